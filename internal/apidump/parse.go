package main

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// module is one go.mod of the repository.
type module struct {
	dir  string // its directory
	path string // its module path
	rel  string // dir relative to the repository's root, "." for the root
}

// file is the name of the module's API file in api/.
func (m module) file() string {
	if m.rel == "." {
		return "egresskit.txt"
	}
	return strings.ReplaceAll(m.rel, "/", "-") + ".txt"
}

// pkgAPI is the exported API of one package.
type pkgAPI struct {
	path   string   // import path
	lines  []string // one per exported name or field
	names  int      // types, funcs, methods, consts, vars
	fields int      // exported struct fields
}

func modules(root string) ([]module, error) {
	var mods []module
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || d.Name() != "go.mod" {
			return nil
		}
		mp, err := modulePath(p)
		if err != nil {
			return err
		}
		dir := filepath.Dir(p)
		rel, _ := filepath.Rel(root, dir)
		mods = append(mods, module{dir: dir, path: mp, rel: filepath.ToSlash(rel)})
		return nil
	})
	return mods, err
}

func modulePath(gomod string) (string, error) {
	f, err := os.Open(gomod)
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(s.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`), nil
		}
	}
	return "", fmt.Errorf("%s: no module line", gomod)
}

// moduleAPI walks one module's packages, leaving out nested modules,
// internal/, examples/, cmd/ and testdata/.
func moduleAPI(m module) ([]pkgAPI, error) {
	var out []pkgAPI
	err := filepath.WalkDir(m.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		name := d.Name()
		if p != m.dir {
			if strings.HasPrefix(name, ".") || name == "testdata" || name == "internal" ||
				name == "examples" || name == "cmd" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(p, "go.mod")); err == nil {
				return filepath.SkipDir
			}
		}
		rel, _ := filepath.Rel(m.dir, p)
		ip := m.path
		if rel != "." {
			ip += "/" + filepath.ToSlash(rel)
		}
		api, ok, err := packageAPI(p, ip)
		if err != nil {
			return err
		}
		if ok {
			out = append(out, api)
		}
		return nil
	})
	return out, err
}

// packageAPI reads the non-test files of the package in dir; ok is false
// for a directory with no Go package or a main package.
func packageAPI(dir, importPath string) (pkgAPI, bool, error) {
	fset := token.NewFileSet()
	// Every file is read whatever its build tags: a name declared per tag
	// is one name of the API (render drops the repeats), and the command
	// needs no go/packages.
	//lint:ignore SA1019 build tags are deliberately ignored, see above
	pkgs, err := parser.ParseDir(fset, dir, func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, parser.SkipObjectResolution)
	if err != nil {
		return pkgAPI{}, false, err
	}
	api := pkgAPI{path: importPath}
	found := false
	for name, pkg := range pkgs {
		if name == "main" {
			continue
		}
		found = true
		files := make([]string, 0, len(pkg.Files))
		for fn := range pkg.Files {
			files = append(files, fn)
		}
		sort.Strings(files)
		for _, fn := range files {
			api.file(fset, pkg.Files[fn])
		}
	}
	sort.Strings(api.lines)
	return api, found, nil
}

func (api *pkgAPI) add(counted bool, format string, args ...any) {
	api.lines = append(api.lines, fmt.Sprintf(format, args...))
	if counted {
		api.names++
	} else {
		api.fields++
	}
}

func (api *pkgAPI) file(fset *token.FileSet, f *ast.File) {
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() {
				continue
			}
			if d.Recv == nil {
				api.add(true, "func %s%s", d.Name.Name, signature(fset, d.Type))
				continue
			}
			recv := node(fset, stripNames(d.Recv.List[0].Type))
			if !ast.IsExported(strings.TrimLeft(baseType(recv), "*")) {
				continue
			}
			api.add(true, "method (%s) %s%s", recv, d.Name.Name, signature(fset, d.Type))
		case *ast.GenDecl:
			api.genDecl(fset, d)
		}
	}
}

func (api *pkgAPI) genDecl(fset *token.FileSet, d *ast.GenDecl) {
	for _, spec := range d.Specs {
		switch s := spec.(type) {
		case *ast.ValueSpec:
			kind := "var"
			if d.Tok == token.CONST {
				kind = "const"
			}
			for _, n := range s.Names {
				if !n.IsExported() {
					continue
				}
				if s.Type != nil {
					api.add(true, "%s %s %s", kind, n.Name, node(fset, s.Type))
				} else {
					api.add(true, "%s %s", kind, n.Name)
				}
			}
		case *ast.TypeSpec:
			if !s.Name.IsExported() {
				continue
			}
			api.typeSpec(fset, s)
		}
	}
}

func (api *pkgAPI) typeSpec(fset *token.FileSet, s *ast.TypeSpec) {
	name := s.Name.Name
	switch t := s.Type.(type) {
	case *ast.StructType:
		api.add(true, "type %s struct", name)
		for _, f := range t.Fields.List {
			for _, n := range f.Names {
				if n.IsExported() {
					api.add(false, "field %s.%s %s", name, n.Name, node(fset, f.Type))
				}
			}
			if len(f.Names) == 0 { // embedded
				if e := strings.TrimLeft(baseType(node(fset, f.Type)), "*"); ast.IsExported(e) {
					api.add(false, "embedded %s.%s", name, node(fset, f.Type))
				}
			}
		}
	case *ast.InterfaceType:
		api.add(true, "type %s interface", name)
		for _, m := range t.Methods.List {
			for _, n := range m.Names {
				if ft, ok := m.Type.(*ast.FuncType); ok && n.IsExported() {
					api.add(true, "method (%s) %s%s", name, n.Name, signature(fset, ft))
				}
			}
			if len(m.Names) == 0 {
				api.add(false, "embedded %s.%s", name, node(fset, m.Type))
			}
		}
	default:
		eq := " "
		if s.Assign.IsValid() {
			eq = " = "
		}
		api.add(true, "type %s%s%s", name, eq, node(fset, s.Type))
	}
}

// signature prints a function type without its parameter names.
func signature(fset *token.FileSet, ft *ast.FuncType) string {
	s := node(fset, stripNames(ft))
	return strings.TrimPrefix(s, "func")
}

// stripNames returns a copy of a function type (or any node) without
// parameter and result names, so that renaming one is no API change.
func stripNames(n ast.Expr) ast.Expr {
	ft, ok := n.(*ast.FuncType)
	if !ok {
		return n
	}
	strip := func(fl *ast.FieldList) *ast.FieldList {
		if fl == nil {
			return nil
		}
		out := &ast.FieldList{}
		for _, f := range fl.List {
			k := max(len(f.Names), 1)
			for range k {
				out.List = append(out.List, &ast.Field{Type: stripNames(f.Type)})
			}
		}
		return out
	}
	return &ast.FuncType{TypeParams: ft.TypeParams, Params: strip(ft.Params), Results: strip(ft.Results)}
}

func node(fset *token.FileSet, n ast.Node) string {
	var b bytes.Buffer
	printer.Fprint(&b, fset, n)
	return strings.Join(strings.Fields(b.String()), " ")
}

// baseType is a receiver's type without its type parameters.
func baseType(recv string) string {
	if i := strings.IndexByte(recv, '['); i >= 0 {
		return recv[:i]
	}
	return recv
}

// core is the chain's core: the packages a request passes through.
var core = map[string]bool{
	"": true, "classify": true, "retry": true, "breaker": true, "ratelimit": true,
	"hoststate": true, "hostkey": true, "robots": true, "blockwatch": true,
}

func printTable(w io.Writer, pkgs []pkgAPI) {
	sort.Slice(pkgs, func(i, j int) bool { return pkgs[i].path < pkgs[j].path })
	const mod = "github.com/egresskit/egresskit"
	var total, coreN, fields int
	fmt.Fprintf(w, "%-48s %6s %7s\n", "package", "names", "fields")
	for _, p := range pkgs {
		short := strings.TrimPrefix(strings.TrimPrefix(p.path, mod), "/")
		if short == "" {
			short = "."
		}
		fmt.Fprintf(w, "%-48s %6d %7d\n", short, p.names, p.fields)
		total += p.names
		fields += p.fields
		if core[strings.TrimPrefix(strings.TrimPrefix(p.path, mod), "/")] && !strings.Contains(p.path, "/telemetry/") {
			coreN += p.names
		}
	}
	fmt.Fprintf(w, "%-48s %6d %7d\n", "all", total, fields)
	fmt.Fprintf(w, "%-48s %6d\n", "core (root, classify, retry, breaker, ratelimit,", coreN)
	fmt.Fprintf(w, "%-48s\n", "  hoststate, hostkey, robots, blockwatch)")
}
