// Command apidump prints the exported API of every module in the
// repository, one line per exported name, and checks it against the
// reviewed files in api/ (one per module), as Go keeps the standard
// library's API in api/go1.*.txt.
//
//	go run ./internal/apidump            print the per-package count table
//	go run ./internal/apidump -check     fail when the code and api/ differ
//	go run ./internal/apidump -write     rewrite api/ from the code
//
// A name is an exported type, function, method (of an exported type or
// interface), constant or variable of a package outside internal/,
// examples/ and testdata/; exported struct fields are listed too, and
// counted apart.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

func main() {
	check := flag.Bool("check", false, "fail when api/ differs from the code")
	write := flag.Bool("write", false, "rewrite api/ from the code")
	root := flag.String("root", ".", "the repository's root")
	flag.Parse()
	if err := run(*root, *check, *write); err != nil {
		fmt.Fprintln(os.Stderr, "apidump:", err)
		os.Exit(1)
	}
}

func run(root string, check, write bool) error {
	mods, err := modules(root)
	if err != nil {
		return err
	}
	var all []pkgAPI
	diffs := 0
	for _, m := range mods {
		pkgs, err := moduleAPI(m)
		if err != nil {
			return err
		}
		all = append(all, pkgs...)
		file := filepath.Join(root, "api", m.file())
		text := render(pkgs)
		switch {
		case write && len(text) == 0:
			if err := os.Remove(file); err != nil && !os.IsNotExist(err) {
				return err
			}
		case write:
			if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(file, text, 0o644); err != nil {
				return err
			}
		case check:
			old, err := os.ReadFile(file)
			if os.IsNotExist(err) && len(text) == 0 {
				continue // a module with no exported API has no file
			}
			if err != nil {
				return fmt.Errorf("module %s: %w (run make api-write and review the diff)", m.path, err)
			}
			if d := diff(old, text); d != "" {
				diffs++
				fmt.Fprintf(os.Stderr, "api/%s differs from the code of %s:\n%s", m.file(), m.path, d)
			}
		}
	}
	printTable(os.Stdout, all)
	if diffs > 0 {
		return fmt.Errorf("%d API file(s) differ from the code: review the change, then run make api-write", diffs)
	}
	return nil
}

// render is the API file of one module: its lines, sorted.
func render(pkgs []pkgAPI) []byte {
	var lines []string
	for _, p := range pkgs {
		for _, l := range p.lines {
			lines = append(lines, "pkg "+p.path+", "+l)
		}
	}
	sort.Strings(lines)
	lines = slices.Compact(lines) // a name declared per build tag is one name
	var b bytes.Buffer
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// diff lists the lines only in old (-) and only in new (+).
func diff(old, new []byte) string {
	in := func(b []byte) map[string]bool {
		m := map[string]bool{}
		for _, l := range strings.Split(string(b), "\n") {
			if l != "" {
				m[l] = true
			}
		}
		return m
	}
	o, n := in(old), in(new)
	var out []string
	for l := range o {
		if !n[l] {
			out = append(out, "-"+l)
		}
	}
	for l := range n {
		if !o[l] {
			out = append(out, "+"+l)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i][1:] < out[j][1:] })
	if len(out) == 0 {
		return ""
	}
	return strings.Join(out, "\n") + "\n"
}
