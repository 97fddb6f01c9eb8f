package egress_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/egresskit/egresskit"

// goTool returns the go command of the toolchain running the test.
func goTool(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("no go command to list dependencies: %v", err)
	}
	return p
}

// TestImportsNoOtherModulePackage enforces the boundary that makes egress
// unable to learn from outcomes: neither the package nor its tests depend
// on any other package of the module — classify, retry, breaker,
// ratelimit or any other. Only the tests may use internal/testprog, which
// starts real proxies.
func TestImportsNoOtherModulePackage(t *testing.T) {
	for _, args := range [][]string{
		{"list", "-deps", "."},
		{"list", "-deps", "-test", "."},
	} {
		cmd := exec.Command(goTool(t), args...)
		cmd.Env = append(os.Environ(), "GOWORK=off")
		out, err := cmd.Output()
		if err != nil {
			stderr := ""
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = string(ee.Stderr)
			}
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, stderr)
		}
		self := 0
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			pkg, _, _ := strings.Cut(line, " ") // "pkg [pkg.test]" for test variants
			if pkg != module && !strings.HasPrefix(pkg, module+"/") {
				continue
			}
			switch {
			case pkg == module+"/egress" || pkg == module+"/egress_test" || pkg == module+"/egress.test":
				self++
			case pkg == module+"/internal/testprog" && slices.Contains(args, "-test"):
				// The tests start real proxies; testprog knows nothing of outcomes.
			default:
				t.Errorf("go %s: egress depends on %s", strings.Join(args, " "), pkg)
			}
		}
		if self == 0 {
			t.Fatalf("go %s listed no egress package; the check checks nothing:\n%s", strings.Join(args, " "), out)
		}
	}
}

// TestAPITakesNoOutcome checks the exported API by its source: no exported
// function or method accepts a status code (any integer), an error or a
// response — the ways a target's verdict could reach selection.
func TestAPITakesNoOutcome(t *testing.T) {
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	forbidden := map[string]bool{
		"int": true, "int8": true, "int16": true, "int32": true, "int64": true,
		"uint": true, "uint8": true, "uint16": true, "uint32": true, "uint64": true,
		"error": true, "http.Response": true, "*http.Response": true,
	}
	checked := 0
	for _, f := range files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || !fn.Name.IsExported() {
				continue
			}
			if fn.Recv != nil && !ast.IsExported(recvName(fn.Recv.List[0].Type)) {
				continue
			}
			checked++
			for _, p := range fn.Type.Params.List {
				if typ := exprString(p.Type); forbidden[typ] {
					t.Errorf("%s takes a parameter of type %s", fn.Name.Name, typ)
				}
			}
		}
	}
	if checked < 10 {
		t.Fatalf("checked %d exported functions, want the whole API", checked)
	}
}

func recvName(e ast.Expr) string {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

func exprString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.StarExpr:
		return "*" + exprString(e.X)
	case *ast.SelectorExpr:
		return exprString(e.X) + "." + e.Sel.Name
	}
	return ""
}
