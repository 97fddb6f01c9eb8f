package egresskit_test

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// maxFieldDoc is the most lines an exported field's doc comment may take:
// what it is, its default, its "off". The long form goes in the type's or
// package's documentation, or in docs/reference.md.
const maxFieldDoc = 8

// maxOverview is the most lines of the root package's overview, as go doc
// prints it before the first declaration.
const maxOverview = 40

// TestFieldDocLength: no exported field of an exported struct type in the
// module (outside internal/, examples/ and test files) has a doc comment
// over maxFieldDoc lines.
func TestFieldDocLength(t *testing.T) {
	n := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path == "." {
				return nil
			}
			name := d.Name()
			if strings.HasPrefix(name, ".") || name == "internal" || name == "examples" || name == "testdata" {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir // a module of its own
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(node ast.Node) bool {
			ts, ok := node.(*ast.TypeSpec)
			if !ok || !ts.Name.IsExported() {
				return true
			}
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				return true
			}
			for _, field := range st.Fields.List {
				if field.Doc == nil {
					continue
				}
				lines := 0
				for _, c := range field.Doc.List {
					lines += strings.Count(c.Text, "\n") + 1
				}
				for _, name := range field.Names {
					if !name.IsExported() {
						continue
					}
					n++
					if lines > maxFieldDoc {
						t.Errorf("%s: %s.%s's doc is %d lines, want at most %d (move the long form to the type's doc or docs/reference.md)", path, ts.Name.Name, name.Name, lines, maxFieldDoc)
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 100 {
		t.Errorf("counted the docs of %d exported fields; the walk missed the module", n)
	}
}

// TestOverviewLength: go doc's overview of the root package, what a
// newcomer reads first, is at most maxOverview lines.
func TestOverviewLength(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go doc")
	}
	out, err := exec.Command("go", "doc", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	lines := 0
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "package ") {
			continue
		}
		if strings.HasPrefix(l, "const ") || strings.HasPrefix(l, "var ") || strings.HasPrefix(l, "func ") || strings.HasPrefix(l, "type ") {
			break
		}
		lines++
	}
	if lines > maxOverview {
		t.Errorf("go doc's overview of the root package is %d lines, want at most %d:\n%s", lines, maxOverview, out)
	}
}
