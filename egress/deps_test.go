package egress_test

import (
	"fmt"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"regexp"
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
// starts real proxies; and internal/configerr, the module's one
// invalid-configuration error value, knows nothing of outcomes either.
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
			case pkg == module+"/internal/configerr":
				// ConfigError is egresskit.ErrInvalidConfig; nothing flows back.
			default:
				t.Errorf("go %s: egress depends on %s", strings.Join(args, " "), pkg)
			}
		}
		if self == 0 {
			t.Fatalf("go %s listed no egress package; the check checks nothing:\n%s", strings.Join(args, " "), out)
		}
	}
}

// TestAPITakesNoOutcome checks the exported API, as the compiler sees it
// (go/types, from export data), for every way a target's verdict could
// reach selection. Each type is walked in the direction its values flow:
// a function's parameters flow in and its results out; a func-typed value
// or interface flowing in has its parameters flow out and its results in
// (and the reverse for one flowing out); struct fields, elements, keys and
// the underlying types of egress's own named types flow with their
// container. Nothing that flows in may be:
//
//   - an integer as a function parameter, callback result or map key (a
//     status code);
//   - a named integer type other than time.Duration (a status enum);
//   - an integer struct field named like a status, code or outcome;
//   - an error or an http.Response (a target's failure or answer);
//
// and no type anywhere in the API may come from another package of the
// module (classify's Outcome and Result above all).
func TestAPITakesNoOutcome(t *testing.T) {
	pkg := loadAPI(t)
	w := &apiWalker{t: t, seen: map[apiKey]bool{}}
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		switch obj := obj.(type) {
		case *types.Func:
			w.visit(obj.Type(), false, false, name)
		case *types.Var:
			w.visit(obj.Type(), false, false, name)
		case *types.TypeName:
			w.visit(obj.Type(), false, false, name)
			ms := types.NewMethodSet(types.NewPointer(obj.Type()))
			for i := range ms.Len() {
				m := ms.At(i).Obj()
				if m.Name() == "Is" && name == "ConfigError" {
					// errors.Is asks a ConfigError whether it is
					// egresskit.ErrInvalidConfig: the error is compared,
					// never kept, and only by configuration errors.
					continue
				}
				if m.Exported() {
					w.visit(m.Type(), false, false, name+"."+m.Name())
				}
			}
		}
	}
	if w.funcs < 20 {
		t.Fatalf("walked %d function signatures, want the whole API", w.funcs)
	}
}

// loadAPI type-checks nothing itself: it reads egress's export data, as
// built by the go command, with the compiler's importer.
func loadAPI(t *testing.T) *types.Package {
	t.Helper()
	cmd := exec.Command(goTool(t), "list", "-export", "-deps", "-f", "{{.ImportPath}}={{.Export}}", ".")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export: %v", err)
	}
	exports := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if path, file, ok := strings.Cut(line, "="); ok && file != "" {
			exports[path] = file
		}
	}
	imp := importer.ForCompiler(token.NewFileSet(), "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	})
	pkg, err := imp.Import(module + "/egress")
	if err != nil {
		t.Fatalf("import egress: %v", err)
	}
	return pkg
}

type apiKey struct {
	t      types.Type
	in, at bool
}

// apiWalker walks the types of the API; see TestAPITakesNoOutcome.
type apiWalker struct {
	t     *testing.T
	seen  map[apiKey]bool
	funcs int
}

var statusLike = regexp.MustCompile(`(?i)status|code|outcome|verdict|result`)

// visit checks t, found at path, whose values flow into egress when in is
// true; slot is true for a function parameter or result, where a bare
// integer is a status code.
func (w *apiWalker) visit(t types.Type, in, slot bool, path string) {
	t = types.Unalias(t)
	switch t := t.(type) {
	case *types.Named:
		// Types recurse only through names: walk each name once per
		// direction, but report every place a bad type appears.
		k := apiKey{t, in, slot}
		if w.seen[k] {
			return
		}
		w.seen[k] = true
		obj := t.Obj()
		pkgPath := ""
		if obj.Pkg() != nil {
			pkgPath = obj.Pkg().Path()
		}
		if (pkgPath == module || strings.HasPrefix(pkgPath, module+"/")) && pkgPath != module+"/egress" {
			w.t.Errorf("%s: type %s of another package of the module", path, t)
		}
		if !in {
			break
		}
		if pkgPath == "net/http" && obj.Name() == "Response" {
			w.t.Errorf("%s: takes an http.Response", path)
		}
		if b, ok := t.Underlying().(*types.Basic); ok && b.Info()&types.IsInteger != 0 && t.String() != "time.Duration" {
			w.t.Errorf("%s: takes the named integer type %s", path, t)
		}
		if pkgPath == "" && obj.Name() == "error" {
			w.t.Errorf("%s: takes an error", path)
		}
		if pkgPath != module+"/egress" {
			return // other packages' internals are theirs
		}
	case *types.Basic:
		if in && slot && t.Info()&types.IsInteger != 0 {
			w.t.Errorf("%s: takes an integer (%s)", path, t)
		}
		return
	}
	switch u := t.Underlying().(type) {
	case *types.Pointer:
		w.visit(u.Elem(), in, false, path)
	case *types.Slice:
		w.visit(u.Elem(), in, false, path+"[]")
	case *types.Array:
		w.visit(u.Elem(), in, false, path+"[]")
	case *types.Chan:
		w.visit(u.Elem(), in, false, path+"<-")
	case *types.Map:
		w.visit(u.Key(), in, true, path+"[key]") // an integer key is a status table
		w.visit(u.Elem(), in, false, path+"[]")
	case *types.Struct:
		for i := range u.NumFields() {
			f := u.Field(i)
			if !f.Exported() {
				continue
			}
			fp := path + "." + f.Name()
			if b, ok := types.Unalias(f.Type()).(*types.Basic); ok && in && b.Info()&types.IsInteger != 0 && statusLike.MatchString(f.Name()) {
				w.t.Errorf("%s: takes an integer field named like an outcome", fp)
			}
			w.visit(f.Type(), in, false, fp)
		}
	case *types.Signature:
		w.funcs++
		for i := range u.Params().Len() {
			w.visit(u.Params().At(i).Type(), !in, true, fmt.Sprintf("%s(param %d)", path, i))
		}
		for i := range u.Results().Len() {
			w.visit(u.Results().At(i).Type(), in, true, fmt.Sprintf("%s(result %d)", path, i))
		}
	case *types.Interface:
		for i := range u.NumMethods() {
			m := u.Method(i)
			if m.Exported() {
				w.visit(m.Type(), in, false, path+"."+m.Name())
			}
		}
	}
}
