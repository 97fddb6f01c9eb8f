package main

import (
	"fmt"
	"go/ast"
	"go/token"
	"go/types"
	"strings"
)

// A site is one mutant: a textual edit of one file that keeps it
// compiling in most cases (a mutant that does not compile is not viable
// and is not scored).
type site struct {
	file string // path relative to the module root
	line int
	col  int    // column of the edit: tells apart equal changes on one line
	kind string // the class of mutation, as gremlins names them where it can
	desc string // what changes, e.g. "< → <="
	src  string // the source line, trimmed

	off, end int    // the byte range of the file replaced
	repl     string // its replacement
}

// key identifies a mutant across edits of unrelated lines: the file, the
// text of its line and the change. equivalent.txt lists keys.
func (s site) key() string { return s.file + " | " + s.src + " | " + s.desc }

// Classes of mutation.
const (
	kindNegation = "CONDITIONALS_NEGATION" // == ↔ !=, < ↔ >=, > ↔ <=
	kindBoundary = "CONDITIONALS_BOUNDARY" // < ↔ <=, > ↔ >=
	kindLogical  = "INVERT_LOGICAL"        // && ↔ ||
	kindNot      = "REMOVE_NOT"            // !x → x
	kindArith    = "ARITHMETIC_BASE"       // + ↔ -, * ↔ /, % → *
	kindIncDec   = "INCREMENT_DECREMENT"   // ++ ↔ --
	kindCall     = "REMOVE_CALL"           // a call statement removed
	kindBool     = "INVERT_RETURN_BOOL"    // return true ↔ return false
)

var (
	negation = map[token.Token]token.Token{
		token.EQL: token.NEQ, token.NEQ: token.EQL,
		token.LSS: token.GEQ, token.GEQ: token.LSS,
		token.GTR: token.LEQ, token.LEQ: token.GTR,
	}
	boundary = map[token.Token]token.Token{
		token.LSS: token.LEQ, token.LEQ: token.LSS,
		token.GTR: token.GEQ, token.GEQ: token.GTR,
	}
	arith = map[token.Token]token.Token{
		token.ADD: token.SUB, token.SUB: token.ADD,
		token.MUL: token.QUO, token.QUO: token.MUL,
		token.REM: token.MUL,
	}
)

// findSites lists the mutants of one file. info holds the types of the
// package, so that only numeric + is mutated (not string concatenation).
func findSites(fset *token.FileSet, f *ast.File, rel string, src []byte, info *types.Info) []site {
	var out []site
	tf := fset.File(f.Pos())
	lines := strings.Split(string(src), "\n")
	add := func(pos, end token.Pos, kind, desc, repl string) {
		p := tf.Position(pos)
		line := p.Line
		out = append(out, site{
			file: rel, line: line, col: p.Column, kind: kind, desc: desc,
			src: strings.TrimSpace(lines[line-1]),
			off: tf.Offset(pos), end: tf.Offset(end), repl: repl,
		})
	}
	numeric := func(e ast.Expr) bool {
		tv, ok := info.Types[e]
		if !ok || tv.Type == nil {
			return false
		}
		b, ok := tv.Type.Underlying().(*types.Basic)
		return ok && b.Info()&types.IsNumeric != 0
	}
	constant := func(e ast.Expr) bool {
		tv, ok := info.Types[e]
		return ok && tv.Value != nil
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GenDecl:
			// Constants and package variables are values, not logic.
			return n.Tok != token.CONST && n.Tok != token.VAR
		case *ast.ArrayType, *ast.Field:
			return false // types: an array's length, a field's type
		case *ast.BinaryExpr:
			if constant(n) {
				return false // a constant (30 * 24 * time.Hour) is a value, not logic
			}
			op, end := n.OpPos, n.OpPos+token.Pos(len(n.Op.String()))
			if to, ok := negation[n.Op]; ok {
				add(op, end, kindNegation, n.Op.String()+" → "+to.String(), to.String())
			}
			if to, ok := boundary[n.Op]; ok {
				add(op, end, kindBoundary, n.Op.String()+" → "+to.String(), to.String())
			}
			switch n.Op {
			case token.LAND:
				add(op, end, kindLogical, "&& → ||", "||")
			case token.LOR:
				add(op, end, kindLogical, "|| → &&", "&&")
			}
			if to, ok := arith[n.Op]; ok && numeric(n) {
				add(op, end, kindArith, n.Op.String()+" → "+to.String(), to.String())
			}
		case *ast.AssignStmt:
			switch n.Tok {
			case token.ADD_ASSIGN, token.SUB_ASSIGN:
				if len(n.Lhs) == 1 && numeric(n.Lhs[0]) {
					to := map[token.Token]string{token.ADD_ASSIGN: "-=", token.SUB_ASSIGN: "+="}[n.Tok]
					add(n.TokPos, n.TokPos+2, kindArith, n.Tok.String()+" → "+to, to)
				}
			}
		case *ast.UnaryExpr:
			if n.Op == token.NOT {
				add(n.OpPos, n.OpPos+1, kindNot, "! removed", "")
			}
		case *ast.IncDecStmt:
			to := map[token.Token]string{token.INC: "--", token.DEC: "++"}[n.Tok]
			add(n.TokPos, n.TokPos+2, kindIncDec, n.Tok.String()+" → "+to, to)
		case *ast.ExprStmt:
			if call, ok := n.X.(*ast.CallExpr); ok && !isPanic(call) {
				add(n.Pos(), n.End(), kindCall, "call removed: "+callName(call), "_ = 0")
			}
		case *ast.ReturnStmt:
			for _, r := range n.Results {
				if id, ok := r.(*ast.Ident); ok && (id.Name == "true" || id.Name == "false") {
					to := map[string]string{"true": "false", "false": "true"}[id.Name]
					add(id.Pos(), id.End(), kindBool, "return "+id.Name+" → "+to, to)
				}
			}
		}
		return true
	})
	return out
}

// isPanic reports whether call is a call of the builtin panic, whose
// removal leaves a function without a terminating statement.
func isPanic(call *ast.CallExpr) bool {
	id, ok := call.Fun.(*ast.Ident)
	return ok && id.Name == "panic"
}

func callName(call *ast.CallExpr) string {
	switch f := call.Fun.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		if x, ok := f.X.(*ast.Ident); ok {
			return x.Name + "." + f.Sel.Name
		}
		return "…." + f.Sel.Name
	}
	return "func"
}

// apply returns src with s's edit made.
func (s site) apply(src []byte) []byte {
	out := make([]byte, 0, len(src)+len(s.repl))
	out = append(out, src[:s.off]...)
	out = append(out, s.repl...)
	return append(out, src[s.end:]...)
}

func (s site) String() string {
	return fmt.Sprintf("%s:%d %s %s", s.file, s.line, s.kind, s.desc)
}
