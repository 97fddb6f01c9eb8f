package testprog

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// BuildBinary builds the main package pkg (as `go build` takes it: "." or
// "../../cmd/preflight", relative to the test's package directory) into a
// new temporary directory, as the program name, and returns the binary's
// path and a func that removes the directory. It is meant for TestMain,
// which builds a command once for its end-to-end tests and has no
// testing.T; on error nothing is left behind and the error holds the
// build's output.
func BuildBinary(pkg, name string) (path string, remove func(), err error) {
	dir, err := os.MkdirTemp("", name+"-test")
	if err != nil {
		return "", nil, fmt.Errorf("testprog: building %s: %w", name, err)
	}
	path = filepath.Join(dir, name)
	if runtime.GOOS == "windows" {
		path += ".exe"
	}
	if out, err := exec.Command(goTool(), "build", "-o", path, pkg).CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("testprog: building %s: %w\n%s", name, err, out)
	}
	return path, func() { os.RemoveAll(dir) }, nil
}

// goTool finds the go command of this toolchain: GOROOT's, when GOROOT is
// set, else the one in PATH.
func goTool() string {
	if root := os.Getenv("GOROOT"); root != "" {
		if p := filepath.Join(root, "bin", "go"); fileExists(p) {
			return p
		}
	}
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// MainWithBinary builds pkg as name (see BuildBinary), stores its path in
// *bin, runs the tests and removes the binary. It returns m.Run's code, or
// 1 when the build fails, for TestMain to pass to os.Exit after any checks
// of its own.
func MainWithBinary(m *testing.M, pkg, name string, bin *string) int {
	path, remove, err := BuildBinary(pkg, name)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	*bin = path
	defer remove()
	return m.Run()
}
