//go:build unix

// Package examples_test runs every command line the documentation gives
// for the examples and the commands, as a reader would type it, from the
// repository's root and without network access: the README's table of
// examples, each example's README (its sh blocks) and each example's doc
// comment (its indented go run and go build lines), and the help text of
// the commands.
package examples_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/egresskit/egresskit/internal/redistest"
)

// root is the repository's root, where the documented commands run.
const root = ".."

// commandTimeout bounds one documented command, its build included.
const commandTimeout = 5 * time.Minute

// documented is one command line and where it is documented.
type documented struct {
	where string // file:line
	line  string // as documented, without its comment
	exit  int    // the exit status the documentation states (a "# ... exit N" comment), else 0
}

// exitComment finds "exit N" in a command's trailing comment.
var exitComment = regexp.MustCompile(`\bexit (\d+)\b`)

// parse splits a documented line into the command and its stated exit.
func parse(where, raw string) documented {
	line, comment, _ := strings.Cut(raw, " #")
	d := documented{where: where, line: strings.TrimSpace(line)}
	if m := exitComment.FindStringSubmatch(comment); m != nil {
		d.exit, _ = strconv.Atoi(m[1])
	}
	return d
}

// isCommand reports whether a documented line is a command to run: go
// run, go build, or a cd into the tree followed by one of those.
func isCommand(line string) bool {
	return strings.HasPrefix(line, "go run ") || strings.HasPrefix(line, "go build ") ||
		(strings.HasPrefix(line, "cd ") && strings.Contains(line, "&& go run"))
}

// readmeTable returns the commands of README.md's "## Examples" table:
// the first cell of each row, a code span.
func readmeTable(t *testing.T) []documented {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	var out []documented
	in := false
	for i, l := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(l, "## "):
			in = l == "## Examples"
		case in && strings.HasPrefix(l, "| `"):
			cell := strings.TrimPrefix(l, "| `")
			cmd, _, ok := strings.Cut(cell, "` |")
			if ok && isCommand(cmd) {
				out = append(out, parse(fmt.Sprintf("README.md:%d", i+1), cmd))
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("README.md: no command in the Examples table")
	}
	return out
}

// shBlocks returns the command lines of the sh blocks of the Markdown file
// path (relative to root).
func shBlocks(t *testing.T, path string) []documented {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, path))
	if errors.Is(err, os.ErrNotExist) {
		return nil // an example may document itself in its doc comment alone
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []documented
	in := false
	for i, l := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(l, "```"):
			in = !in && strings.TrimPrefix(l, "```") == "sh"
		case in && isCommand(strings.TrimSpace(l)):
			out = append(out, parse(fmt.Sprintf("%s:%d", path, i+1), strings.TrimSpace(l)))
		}
	}
	return out
}

// docComment returns the indented command lines of the package comment
// of the Go files in dir (relative to root).
func docComment(t *testing.T, dir string) []documented {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root, dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var out []documented
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		for n := 1; sc.Scan(); n++ {
			l := sc.Text()
			if strings.HasPrefix(l, "package ") {
				break
			}
			if cmd, ok := strings.CutPrefix(l, "//\t"); ok && isCommand(cmd) {
				rel, _ := filepath.Rel(root, f)
				out = append(out, parse(fmt.Sprintf("%s:%d", rel, n), cmd))
			}
		}
		fh.Close()
	}
	return out
}

// allDocumented gathers every documented command, in the order a reader
// meets them, each once (the first place that documents it).
func allDocumented(t *testing.T) []documented {
	t.Helper()
	all := readmeTable(t)
	dirs, err := filepath.Glob(filepath.Join(root, "examples", "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() {
			continue
		}
		rel, _ := filepath.Rel(root, d)
		cmds := shBlocks(t, filepath.Join(rel, "README.md"))
		cmds = append(cmds, docComment(t, rel)...)
		if len(cmds) == 0 {
			// The README table names it, or the example documents none:
			// every example must say how to run it.
			named := false
			for _, c := range all {
				named = named || strings.Contains(c.line, "./"+rel) || strings.Contains(c.line, "cd "+rel)
			}
			if !named {
				t.Errorf("%s: no documented command line (README sh block, doc comment, or the README's table)", rel)
			}
		}
		all = append(all, cmds...)
	}
	seen := map[string]bool{}
	var out []documented
	for _, c := range all {
		if !seen[c.line] {
			seen[c.line] = true
			out = append(out, c)
		}
	}
	return out
}

// TestDocumentedCommands runs every documented command line of the
// examples, from the repository's root, offline: modules come from the
// local cache only (GOPROXY=off) and every HTTP request that would leave
// the machine fails (a proxy that does not exist; loopback is never
// proxied). Each must end with the exit status its documentation states.
// A command that names a Redis server (127.0.0.1:6379) is given the test's
// own.
func TestDocumentedCommands(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs every example")
	}
	cmds := allDocumented(t)
	// The modules of their own (cd DIR && go run) are downloaded first, on
	// line: offline is the examples' promise, not the toolchain's.
	for _, c := range cmds {
		if dir, ok := strings.CutPrefix(c.line, "cd "); ok {
			dir, _, _ = strings.Cut(dir, " ")
			dl := exec.Command("go", "mod", "download")
			dl.Dir = filepath.Join(root, dir)
			if out, err := dl.CombinedOutput(); err != nil {
				t.Fatalf("go mod download in %s: %v\n%s", dir, err, out)
			}
		}
	}
	tmp := t.TempDir()
	redisAddr, redisErr := os.Getenv(redistest.EnvAddr), error(nil)
	started, parent := false, t
	for _, c := range cmds {
		t.Run(c.where, func(t *testing.T) {
			line := strings.ReplaceAll(c.line, "/tmp/", tmp+"/")
			if strings.Contains(line, "127.0.0.1:6379") {
				if redisAddr == "" && !started {
					// One server for every command that names one, kept
					// for the whole test.
					started = true
					srv, err := redistest.NewServer()
					if redisErr = err; err == nil {
						redisAddr = srv.Addr
						parent.Cleanup(srv.Close)
					}
				}
				if redisAddr == "" {
					if os.Getenv(redistest.EnvRequire) == "1" {
						t.Fatalf("no Redis server for %s: %v", c.line, redisErr)
					}
					t.Skipf("no Redis server for %s: %v", c.line, redisErr)
				}
				line = strings.ReplaceAll(line, "127.0.0.1:6379", redisAddr)
			}
			out, code, err := runShell(t, line)
			if err != nil {
				t.Fatalf("%s: %v\n%s", c.line, err, out)
			}
			if code != c.exit {
				t.Errorf("%s (%s): exit %d, documented %d\n%s", c.line, c.where, code, c.exit, out)
			}
		})
	}
}

// TestCommandHelp: each command's -h exits 0 on its help, which describes
// every flag and states the exit statuses.
func TestCommandHelp(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the commands")
	}
	for _, tt := range []struct {
		cmd   string
		flags []string
	}{
		{"go run ./cmd/preflight -h", []string{"-timeout", "-per-host", "-user-agent", "-exit-zero", "-targets", "-proxy"}},
		{"go run ./examples/orchestrator -h", []string{"-preflight", "-site"}},
		{"go run ./cmd/egressctl -h", []string{"-redis", "-prefix", "-audit", "EGRESSCTL_REDIS"}},
		{"go run ./cmd/egressaudit -h", []string{"verify", "-anchor"}},
	} {
		t.Run(tt.cmd, func(t *testing.T) {
			out, code, err := runShell(t, tt.cmd)
			if err != nil || code != 0 {
				t.Fatalf("%s: exit %d, %v\n%s", tt.cmd, code, err, out)
			}
			for _, f := range append(tt.flags, "Exit status") {
				if !bytes.Contains(out, []byte(f)) {
					t.Errorf("%s does not mention %s:\n%s", tt.cmd, f, out)
				}
			}
		})
	}
}

// runShell runs line with sh from the repository's root, offline, and
// returns its combined output and exit status; err is set when it could
// not run or did not end within commandTimeout (its process group is
// killed then).
func runShell(t *testing.T, line string) ([]byte, int, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.Command("sh", "-c", line)
	cmd.Dir = root
	cmd.Env = append(os.Environ(),
		"GOPROXY=off", "GOFLAGS=-mod=readonly",
		"HTTP_PROXY=http://127.0.0.1:9", "HTTPS_PROXY=http://127.0.0.1:9", "NO_PROXY=", "ALL_PROXY=")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, 0, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		return out.Bytes(), -1, fmt.Errorf("did not end within %v", commandTimeout)
	}
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		// go run reports the program's status as its own "exit status N"
		// and exits 1: read N back.
		if m := regexp.MustCompile(`(?m)^exit status (\d+)$`).FindSubmatch(out.Bytes()); m != nil && ee.ExitCode() == 1 {
			n, _ := strconv.Atoi(string(m[1]))
			return out.Bytes(), n, nil
		}
		return out.Bytes(), ee.ExitCode(), nil
	}
	return out.Bytes(), 0, err
}
