package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestAPIFilesMatch fails when the exported API of any module differs from
// its reviewed file in api/: a change of the public surface is an edit of
// that file in the same commit (make api-write, then review the diff).
func TestAPIFilesMatch(t *testing.T) {
	root := filepath.Join("..", "..")
	if err := run(root, true, false); err != nil {
		t.Fatal(err)
	}
}

// TestBudget keeps the exported surface within the v1 budget (at most 400
// names in all public packages, 120 in the chain's core) and from growing:
// the ceilings are today's counts, so a new exported name needs one
// removed, or a deliberate raise of a ceiling reviewed with its reason.
func TestBudget(t *testing.T) {
	mods, err := modules(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	var all []pkgAPI
	for _, m := range mods {
		p, err := moduleAPI(m)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, p...)
	}
	var b bytes.Buffer
	printTable(&b, all)
	total, coreN := -1, -1
	for _, l := range strings.Split(b.String(), "\n") {
		f := strings.Fields(l)
		switch {
		case len(f) >= 2 && f[0] == "all":
			total, _ = strconv.Atoi(f[1])
		case len(f) >= 2 && f[0] == "core":
			coreN, _ = strconv.Atoi(f[len(f)-1])
		}
	}
	t.Logf("exported names: %d in all, %d in the core", total, coreN)
	if total < 0 || coreN < 0 {
		t.Fatalf("table has no totals:\n%s", b.String())
	}
	// 382 and 113 since issue 38's errors: ErrTryLater, RetryAt and
	// ratelimit.WaitError (the one action "try the host later", and when),
	// and redisstore's Store.Close (a worker's last records flushed).
	// 388 since issue 37: console.ErrWeakToken, and the redacting Format
	// and MarshalJSON of session.Session, session.CreateOptions and
	// console.Config (no credential in any encoding).
	const maxTotal, maxCore = 388, 113
	if total > maxTotal || coreN > maxCore {
		t.Errorf("exported names: %d in all (ceiling %d), %d in the core (ceiling %d): remove a name before adding one", total, maxTotal, coreN, maxCore)
	}
}

// TestNoLargeTrackedFiles: no file over 1 MiB is tracked outside testdata/
// (build outputs belong in .gitignore). It asks git for the tracked files
// and, where git cannot answer (an exported tree, a checkout owned by
// another user), walks the tree instead.
func TestNoLargeTrackedFiles(t *testing.T) {
	root := filepath.Join("..", "..")
	sizes, err := trackedSizes(root)
	if err != nil {
		t.Logf("git ls-files: %v; walking the tree", err)
		if sizes, err = walkedSizes(root); err != nil {
			t.Fatal(err)
		}
	}
	if len(sizes) == 0 {
		t.Fatal("found no files")
	}
	for path, n := range sizes {
		if n > 1<<20 && !strings.Contains("/"+filepath.ToSlash(path), "/testdata/") {
			t.Errorf("%s is tracked and %d bytes (over 1 MiB, outside testdata/)", path, n)
		}
	}
}

func trackedSizes(root string) (map[string]int64, error) {
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--format=%(objectsize) %(path)").Output()
	if err != nil {
		return nil, err
	}
	sizes := map[string]int64{}
	for _, rec := range strings.Split(string(out), "\x00") {
		size, path, ok := strings.Cut(rec, " ")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(size, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%q: %v", rec, err)
		}
		sizes[path] = n
	}
	return sizes, nil
}

func walkedSizes(root string) (map[string]int64, error) {
	sizes := map[string]int64{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		sizes[rel] = info.Size()
		return nil
	})
	return sizes, err
}
