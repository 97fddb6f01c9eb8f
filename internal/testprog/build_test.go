package testprog_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/egresskit/egresskit/internal/testprog"
)

// TestBuildBinary: the built program runs; remove deletes it; a package
// that cannot be built is an error that carries the build's output and
// leaves no directory behind.
func TestBuildBinary(t *testing.T) {
	path, remove, err := testprog.BuildBinary("./testdata/hello", "hello")
	if err != nil {
		t.Fatal(err)
	}
	if base := filepath.Base(path); !strings.HasPrefix(base, "hello") {
		t.Errorf("BuildBinary path %q, want a file named hello", path)
	}
	out, err := exec.Command(path, "a", "b").Output()
	if err != nil || string(out) != "hello a b\n" {
		t.Errorf("running the built hello = %q, %v; want %q", out, err, "hello a b\n")
	}
	remove()
	if _, err := os.Stat(filepath.Dir(path)); !os.IsNotExist(err) {
		t.Errorf("after remove, Stat(%s) = %v, want not exist", filepath.Dir(path), err)
	}

	before, _ := filepath.Glob(filepath.Join(os.TempDir(), "missing-test*"))
	path, remove, err = testprog.BuildBinary("./testdata/missing", "missing")
	if err == nil || path != "" || remove != nil || !strings.Contains(err.Error(), "testdata/missing") {
		t.Errorf("BuildBinary(missing) = %q, %v, %v; want an error naming the package", path, remove != nil, err)
	}
	if after, _ := filepath.Glob(filepath.Join(os.TempDir(), "missing-test*")); len(after) != len(before) {
		t.Errorf("BuildBinary(missing) left %v behind", after)
	}
}
