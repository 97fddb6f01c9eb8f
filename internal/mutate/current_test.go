package main

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestReportCurrent is CI's cheap check that MUTATION.md, which make
// mutation writes, still describes this tree: every surviving mutant it
// lists is at a line that still reads as quoted, every test it says was
// left out still exists, and the tests left out are the Makefile's
// MUTATION_SKIP. A change that removes or rewrites a listed line (moving
// it is fine), removes a listed file or test, or changes MUTATION_SKIP
// fails it: run make mutation (about 15 minutes) and commit MUTATION.md.
func TestReportCurrent(t *testing.T) {
	root := filepath.Join("..", "..")
	report, err := os.ReadFile(filepath.Join(root, "MUTATION.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(report)

	// Surviving mutants: - `file:line` KIND `desc` — status: `source`
	mutant := regexp.MustCompile("(?m)^- `([^`:]+):(\\d+)` [A-Z_]+ `[^`]*` — [a-z ]+: `(.*)`$")
	listed := mutant.FindAllStringSubmatch(text, -1)
	if len(listed) == 0 && strings.Contains(text, "survived") {
		t.Fatal("MUTATION.md: found no surviving mutant line; has its format changed?")
	}
	lines := map[string][]string{}
	for _, m := range listed {
		file, src := m[1], m[3]
		n, _ := strconv.Atoi(m[2])
		ls, ok := lines[file]
		if !ok {
			b, err := os.ReadFile(filepath.Join(root, file))
			if err != nil {
				t.Errorf("MUTATION.md lists %s:%d, and %v: run make mutation", file, n, err)
				lines[file] = nil
				continue
			}
			ls = strings.Split(string(b), "\n")
			lines[file] = ls
		}
		if ls == nil {
			continue
		}
		if n >= 1 && n <= len(ls) && strings.TrimSpace(ls[n-1]) == src {
			continue
		}
		// Lines above it may have moved it: the line must still exist.
		found := false
		for _, l := range ls {
			found = found || strings.TrimSpace(l) == src
		}
		if !found {
			t.Errorf("MUTATION.md lists %s:%d, %q, which the file no longer has: run make mutation", file, n, src)
		}
	}

	// Tests left out: `PKG`: `^(TestA|TestB)$`
	skipLine := regexp.MustCompile(`Tests not run against mutants[^:]*: (.*)\.\n`).FindStringSubmatch(text)
	want := makeVar(t, filepath.Join(root, "Makefile"), "MUTATION_SKIP")
	var got []string
	if skipLine != nil {
		for _, part := range strings.Split(skipLine[1], "; ") {
			pm := regexp.MustCompile("^`([^`]+)`: `([^`]+)`$").FindStringSubmatch(part)
			if pm == nil {
				t.Errorf("MUTATION.md: cannot read the tests left out, %q", part)
				continue
			}
			got = append(got, pm[1]+"="+pm[2])
			for _, name := range regexp.MustCompile(`Test\w+`).FindAllString(pm[2], -1) {
				if !testExists(t, filepath.Join(root, pm[1]), name) {
					t.Errorf("MUTATION.md leaves out %s of package %s, which no longer exists: run make mutation", name, pm[1])
				}
			}
		}
	}
	if strings.Join(got, ",") != strings.ReplaceAll(want, "$$", "$") {
		t.Errorf("MUTATION.md left out %q; the Makefile's MUTATION_SKIP is %q: run make mutation", strings.Join(got, ","), want)
	}
}

// makeVar returns the value of the ?= variable name in the Makefile.
func makeVar(t *testing.T, path, name string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name); ok {
			if v, ok := strings.CutPrefix(strings.TrimSpace(v), "?="); ok {
				return strings.TrimSpace(v)
			}
		}
	}
	t.Fatalf("%s: no %s ?=", path, name)
	return ""
}

// testExists reports whether a _test.go file of dir declares func name.
func testExists(t *testing.T, dir, name string) bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "func "+name+"(") {
			return true
		}
	}
	return false
}
