package wallclock

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// allowed are the functions, "path:Func" from the repository's root, whose
// real-time comparisons are by design; each says why.
var allowed = map[string]string{
	"redisstore/skew_test.go:TestSkewedWorkersAgree": "reads when a breaker opened by Redis's clock stays open " +
		"(about 5m) against the local clock, with a minute's slack either way: a value Redis stamped, not a span the test took",
}

// TestNoWallClockAsserts parses every _test.go file of the repository and
// fails for each comparison of a real-clock span outside a synctest bubble
// and outside allowed.
func TestNoWallClockAsserts(t *testing.T) {
	root := filepath.Join("..", "..")
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		found = append(found, scan(t, filepath.ToSlash(rel), src)...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Errorf("%s: a real-clock span compared in an assertion; assert the cause (an error, a count, an order) "+
			"on a fake clock or in a synctest bubble, bound a hang with a deadline (time.Now().After), "+
			"or add the function to allowed with why", f)
	}
}

// scan returns the real-clock comparisons of one file, outside synctest
// bubbles and allowed, as "path:line: func: expression".
func scan(t *testing.T, path string, src []byte) []string {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, 0)
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return nil
	}
	var out []string
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		key := path + ":" + fn.Name.Name
		if _, ok := allowed[key]; ok {
			continue
		}
		for _, e := range realSpanCompares(fn.Body) {
			out = append(out, fmt.Sprintf("%s:%d: %s: %s", path, fset.Position(e.Pos()).Line, fn.Name.Name, render(fset, e)))
		}
	}
	return out
}

// realSpanCompares returns the comparisons, in the condition of an if
// statement that fails the test, outside synctest bubbles, of which one
// side is a span of the real clock: a call of time.Since or time.Until,
// a.Sub(b) of two variables set from time.Now, or a variable set from
// either (or ranging over one). A loop's own timing (a pacing window, a
// spin) is not an assertion and is not reported.
func realSpanCompares(body *ast.BlockStmt) []ast.Expr {
	now, span := map[string]bool{}, map[string]bool{}
	isSpan := func(e ast.Expr) bool {
		found := false
		ast.Inspect(e, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				if isCall(n, "time", "Since") || isCall(n, "time", "Until") {
					found = true
				}
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Sub" && len(n.Args) == 1 {
					a, okA := sel.X.(*ast.Ident)
					b, okB := n.Args[0].(*ast.Ident)
					if okA && okB && now[a.Name] && now[b.Name] {
						found = true
					}
				}
			case *ast.Ident:
				if span[n.Name] {
					found = true
				}
			}
			return !found
		})
		return found
	}
	// The variables, in source order, so that one set from another counts.
	outsideBubbles(body, func(n ast.Node) {
		var lhs, rhs []ast.Expr
		switch n := n.(type) {
		case *ast.RangeStmt: // for _, d := range spans
			if n.Value != nil && isSpan(n.X) {
				lhs, rhs = []ast.Expr{n.Value}, []ast.Expr{n.X}
			}
		case *ast.AssignStmt:
			lhs, rhs = n.Lhs, n.Rhs
		case *ast.ValueSpec:
			for _, id := range n.Names {
				lhs = append(lhs, id)
			}
			rhs = n.Values
		}
		if len(lhs) != len(rhs) {
			return
		}
		for i, l := range lhs {
			id, ok := l.(*ast.Ident)
			if !ok {
				continue
			}
			if c, ok := rhs[i].(*ast.CallExpr); ok && isCall(c, "time", "Now") {
				now[id.Name] = true
			} else if isSpan(rhs[i]) {
				span[id.Name] = true
			}
		}
	})
	var out []ast.Expr
	outsideBubbles(body, func(n ast.Node) {
		is, ok := n.(*ast.IfStmt)
		if !ok || !fails(is.Body) {
			return
		}
		ast.Inspect(is.Cond, func(n ast.Node) bool {
			b, ok := n.(*ast.BinaryExpr)
			if !ok {
				return true
			}
			switch b.Op {
			case token.LSS, token.GTR, token.LEQ, token.GEQ, token.EQL, token.NEQ:
				if isSpan(b.X) || isSpan(b.Y) {
					out = append(out, b)
					return false
				}
			}
			return true
		})
	})
	return out
}

// fails reports whether block fails the test: it calls a method named
// Error, Errorf, Fatal, Fatalf or Fail (of a testing.T or B, or a helper
// of the same name).
func fails(block *ast.BlockStmt) bool {
	found := false
	ast.Inspect(block, func(n ast.Node) bool {
		if c, ok := n.(*ast.CallExpr); ok {
			if sel, ok := c.Fun.(*ast.SelectorExpr); ok {
				switch sel.Sel.Name {
				case "Error", "Errorf", "Fatal", "Fatalf", "Fail", "FailNow":
					found = true
				}
			}
		}
		return !found
	})
	return found
}

// outsideBubbles calls f for every node of body in source order, except
// those inside the function given to a synctest.Test call.
func outsideBubbles(body ast.Node, f func(ast.Node)) {
	ast.Inspect(body, func(n ast.Node) bool {
		if n == nil {
			return false
		}
		if c, ok := n.(*ast.CallExpr); ok && isCall(c, "synctest", "Test") {
			for _, a := range c.Args {
				if _, ok := a.(*ast.FuncLit); !ok {
					ast.Inspect(a, func(n ast.Node) bool {
						if n != nil {
							f(n)
						}
						return true
					})
				}
			}
			return false
		}
		f(n)
		return true
	})
}

// isCall reports whether c calls pkg.name.
func isCall(c *ast.CallExpr, pkg, name string) bool {
	sel, ok := c.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != name {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	return ok && id.Name == pkg
}

// render prints e as source.
func render(fset *token.FileSet, e ast.Expr) string {
	var b strings.Builder
	printer.Fprint(&b, fset, e)
	return b.String()
}

// TestScan holds the scan to what it reports: a span of the real clock in
// the condition of a failing if, and nothing in a synctest bubble, in a
// loop's own timing, or in a deadline.
func TestScan(t *testing.T) {
	for _, tt := range []struct {
		name, body string
		want       int
	}{
		{"since", `if time.Since(start) > time.Second { t.Errorf("slow") }`, 1},
		{"variable", `took := time.Since(start); if took != 0 { t.Fatal(took) }`, 1},
		{"until", `if d := time.Until(at); d < time.Minute { t.Error(d) }`, 1},
		{"two readings", `a := time.Now(); run(); b := time.Now(); if b.Sub(a) >= time.Second { t.Fatalf("slow") }`, 1},
		{"ranged", `var lags []time.Duration; lags = append(lags, time.Since(up)); for _, l := range lags { if l > time.Second { t.Error(l) } }`, 1},
		{"in a bubble", `synctest.Test(t, func(t *testing.T) { if time.Since(start) != time.Second { t.Error("fake") } })`, 0},
		{"loop", `for start := time.Now(); time.Since(start) < time.Second; { spin() }`, 0},
		{"pacing", `if w := int(time.Since(start) / window); w < n { wait() }`, 0},
		{"deadline", `deadline := time.Now().Add(time.Minute); if time.Now().After(deadline) { t.Fatal("hung") }`, 0},
		{"fake clock", `if got := clk.Now().Sub(start); got != time.Second { t.Error(got) }`, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := "package p\nfunc TestX(t *testing.T) {\n" + tt.body + "\n}\n"
			if got := scan(t, "p_test.go", []byte(src)); len(got) != tt.want {
				t.Errorf("scan(%s) = %q, want %d reported", tt.body, got, tt.want)
			}
		})
	}
}
