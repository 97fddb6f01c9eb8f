package main

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const sample = `package p

const limit = 2 * 3

type T struct{ a [limit + 1]int }

func f(x, y int, s string, ok bool) (int, bool) {
	if x < y && !ok {
		x++
	}
	s = s + "!"
	println(s)
	return x + y, true
}
`

// sitesOf type-checks src and returns its mutants.
func sitesOf(t *testing.T, src string) []site {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	info := &types.Info{Types: map[ast.Expr]types.TypeAndValue{}}
	conf := types.Config{Importer: importer.Default()}
	if _, err := conf.Check("p", fset, []*ast.File{f}, info); err != nil {
		t.Fatal(err)
	}
	return findSites(fset, f, "p/p.go", []byte(src), info)
}

func TestFindSites(t *testing.T) {
	var got []string
	for _, s := range sitesOf(t, sample) {
		got = append(got, s.kind+" "+s.desc)
	}
	want := []string{
		kindNegation + " < → >=",
		kindBoundary + " < → <=",
		kindLogical + " && → ||",
		kindNot + " ! removed",
		kindIncDec + " ++ → --",
		kindCall + " call removed: println",
		kindArith + " + → -",
		kindBool + " return true → false",
	}
	slices.Sort(got)
	slices.Sort(want)
	// Not mutated: the constant 2 * 3, the array length limit + 1, and
	// the string concatenation s + "!".
	if !slices.Equal(got, want) {
		t.Errorf("mutants:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestApplyCompiles: every mutant of the sample is the sample with one
// edit, and still type-checks.
func TestApplyCompiles(t *testing.T) {
	for _, s := range sitesOf(t, sample) {
		out := string(s.apply([]byte(sample)))
		if out == sample {
			t.Errorf("%s: no change", s)
			continue
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, "p.go", out, 0)
		if err != nil {
			t.Errorf("%s: %v\n%s", s, err, out)
			continue
		}
		if _, err := (&types.Config{Importer: importer.Default()}).Check("p", fset, []*ast.File{f}, nil); err != nil {
			t.Errorf("%s: %v\n%s", s, err, out)
		}
	}
}

// TestSampleStable: the sample depends on each mutant alone, so adding a
// mutant changes it by at most that one.
func TestSampleStable(t *testing.T) {
	var sites []site
	for i := range 200 {
		sites = append(sites, site{file: "a.go", line: i + 1, off: i, src: "line " + strings.Repeat("x", i), desc: "< → <="})
	}
	a := samplePackage(sites, 20, 1)
	b := samplePackage(append(slices.Clone(sites), site{file: "a.go", line: 999, off: 999, src: "new", desc: "< → <="}), 20, 1)
	if len(a) != 20 || len(b) != 20 {
		t.Fatalf("sample sizes %d, %d; want 20", len(a), len(b))
	}
	common := 0
	for _, s := range a {
		for _, u := range b {
			if s.key() == u.key() {
				common++
			}
		}
	}
	if common < 19 {
		t.Errorf("adding one mutant changed the sample by %d", 20-common)
	}
	if c := samplePackage(sites, 20, 2); slices.EqualFunc(a, c, func(x, y site) bool { return x.key() == y.key() }) {
		t.Error("another seed gave the same sample")
	}
	if all := samplePackage(sites, 0, 1); len(all) != len(sites) {
		t.Errorf("n = 0 sampled %d, want all %d", len(all), len(sites))
	}
}

func TestParseMax(t *testing.T) {
	l, err := parseMax("*=40,hoststate=9,egress=30")
	if err != nil || l.of("classify") != 40 || l.of("hoststate") != 9 || l.of("egress") != 30 {
		t.Errorf("parseMax = %+v, %v", l, err)
	}
	if l, err := parseMax("12"); err != nil || l.of("x") != 12 {
		t.Errorf("parseMax(12) = %+v, %v", l, err)
	}
	if _, err := parseMax("a=b"); err == nil {
		t.Error("parseMax(a=b) succeeded")
	}
}

func TestReadEquivalent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "eq.txt")
	os.WriteFile(path, []byte("# comment\n\np/p.go | if x < y { | < → <= | why\n"), 0o600)
	m, err := readEquivalent(path)
	if err != nil || m["p/p.go | if x < y { | < → <="] != "why" {
		t.Errorf("readEquivalent = %v, %v", m, err)
	}
	os.WriteFile(path, []byte("p/p.go | too few\n"), 0o600)
	if _, err := readEquivalent(path); err == nil {
		t.Error("a malformed line was accepted")
	}
	if m, err := readEquivalent(filepath.Join(t.TempDir(), "none")); err != nil || len(m) != 0 {
		t.Errorf("missing file = %v, %v; want empty", m, err)
	}
}

func TestTestTimeout(t *testing.T) {
	for _, tt := range []struct{ base, want time.Duration }{
		{time.Second, 30 * time.Second}, {20 * time.Second, 100 * time.Second}, {time.Hour, 3 * time.Minute},
	} {
		if got := testTimeout(tt.base); got != tt.want {
			t.Errorf("testTimeout(%v) = %v, want %v", tt.base, got, tt.want)
		}
	}
}
