package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// pkg is one package under mutation.
type pkg struct {
	path  string // import path
	dir   string // absolute directory
	rel   string // directory relative to the module root ("." for the root)
	files map[string][]byte
	sites []site
}

// loadPackage lists, parses and type-checks the non-test files of the
// package in dir rel (relative to root) and finds its mutants.
func loadPackage(root, rel string) (*pkg, error) {
	var listed struct {
		ImportPath string
		Dir        string
		GoFiles    []string
	}
	out, err := goCmd(root, "list", "-json", "./"+rel)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(out, &listed); err != nil {
		return nil, fmt.Errorf("go list %s: %v", rel, err)
	}
	imp, err := exportImporter(root, "./"+rel)
	if err != nil {
		return nil, err
	}
	p := &pkg{path: listed.ImportPath, dir: listed.Dir, rel: rel, files: map[string][]byte{}}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range listed.GoFiles {
		src, err := os.ReadFile(filepath.Join(listed.Dir, name))
		if err != nil {
			return nil, err
		}
		f, err := parser.ParseFile(fset, name, src, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
		p.files[name] = src
	}
	info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}}
	conf := types.Config{Importer: imp}
	if _, err := conf.Check(listed.ImportPath, fset, files, info); err != nil {
		return nil, fmt.Errorf("type-check %s: %v", rel, err)
	}
	for i, f := range files {
		name := listed.GoFiles[i]
		p.sites = append(p.sites, findSites(fset, f, filepath.ToSlash(filepath.Join(rel, name)), p.files[name], info)...)
	}
	return p, nil
}

// exportImporter imports packages from the export data the go command
// builds for the dependencies of pattern.
func exportImporter(root, pattern string) (types.Importer, error) {
	out, err := goCmd(root, "list", "-export", "-deps", "-f", "{{.ImportPath}}={{.Export}}", pattern)
	if err != nil {
		return nil, err
	}
	exports := map[string]string{}
	for line := range strings.Lines(string(out)) {
		if path, file, ok := strings.Cut(strings.TrimSpace(line), "="); ok && file != "" {
			exports[path] = file
		}
	}
	return importer.ForCompiler(token.NewFileSet(), "gc", func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(file)
	}), nil
}

// covered reads a coverage profile and returns, per file (relative to the
// module root), the lines that some test executed.
func covered(profile, module string) (map[string]map[int]bool, error) {
	f, err := os.Open(profile)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]map[int]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// name.go:startLine.startCol,endLine.endCol numStmts count
		line := sc.Text()
		if strings.HasPrefix(line, "mode:") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 3 || fields[2] == "0" {
			continue
		}
		file, span, ok := strings.Cut(fields[0], ":")
		if !ok {
			continue
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(file, module), "/")
		from, to, _ := strings.Cut(span, ",")
		l1, _ := strconv.Atoi(strings.Split(from, ".")[0])
		l2, _ := strconv.Atoi(strings.Split(to, ".")[0])
		if out[rel] == nil {
			out[rel] = map[int]bool{}
		}
		for l := l1; l <= l2; l++ {
			out[rel][l] = true
		}
	}
	return out, sc.Err()
}

// goCmd runs the go command in dir and returns its standard output.
func goCmd(dir string, args ...string) ([]byte, error) {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return out, nil
}
