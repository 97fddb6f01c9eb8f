package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// runner runs package tests, plain or against a mutant.
type runner struct {
	root     string
	tmp      string
	deadline time.Time         // no mutant starts after it
	hardStop time.Time         // a mutant still running then is stopped and not scored
	skip     map[string]string // package → go test -skip pattern
	n        atomic.Int64      // names temporary files
}

// status is what became of a mutant.
type status string

const (
	statusKilled     status = "killed"
	statusTimedOut   status = "timed out" // killed: the tests did not finish
	statusSurvived   status = "survived"
	statusNotCovered status = "not covered" // survived: no test runs its line
	statusNotViable  status = "not viable"  // does not compile: not scored
	statusEquivalent status = "equivalent"  // listed in equivalent.txt: not scored
	statusNotRun     status = "not run"     // the budget ran out: not scored
)

type result struct {
	site   site
	status status
	note   string // the failing test, or why a mutant is equivalent
}

type baseline struct {
	took  time.Duration
	cover map[string]map[int]bool
}

// testArgs are the flags of every test run of p: short mode, no cache,
// stop at the first failure, and the tests -skip names left out.
func (r *runner) testArgs(p *pkg, timeout time.Duration) []string {
	args := []string{"test", "-short", "-count=1", "-failfast", "-timeout=" + timeout.String()}
	if re := r.skip[p.rel]; re != "" {
		args = append(args, "-skip="+re)
	}
	return args
}

// baseline runs the package's tests once, unmutated, with coverage: they
// must pass, and they say which lines any test executes.
func (r *runner) baseline(p *pkg) (baseline, error) {
	profile := filepath.Join(r.tmp, "cover-"+strconv.FormatInt(r.n.Add(1), 10)+".out")
	args := append(r.testArgs(p, 10*time.Minute), "-coverprofile="+profile, "./"+p.rel)
	start := time.Now()
	out, err := r.goTest(context.Background(), args)
	took := time.Since(start)
	if err != nil {
		return baseline{}, fmt.Errorf("tests fail without a mutant: %v\n%s", err, tail(out))
	}
	cover, err := covered(profile, module)
	if err != nil {
		return baseline{}, err
	}
	return baseline{took: took, cover: cover}, nil
}

// run tests one mutant of p.
func (r *runner) run(p *pkg, s site, timeout time.Duration) result {
	name := filepath.Base(s.file)
	src := p.files[name]
	n := strconv.FormatInt(r.n.Add(1), 10)
	mutant := filepath.Join(r.tmp, n+"-"+name)
	overlay := filepath.Join(r.tmp, n+"-overlay.json")
	if err := os.WriteFile(mutant, s.apply(src), 0o600); err != nil {
		return result{site: s, status: statusNotRun, note: err.Error()}
	}
	defer os.Remove(mutant)
	ov, _ := json.Marshal(map[string]map[string]string{"Replace": {filepath.Join(p.dir, name): mutant}})
	if err := os.WriteFile(overlay, ov, 0o600); err != nil {
		return result{site: s, status: statusNotRun, note: err.Error()}
	}
	defer os.Remove(overlay)

	// The go command gets the test timeout plus time to build; the test
	// binary's own -timeout makes it print the stuck tests.
	ctx, cancel := context.WithTimeout(context.Background(), timeout+2*time.Minute)
	defer cancel()
	ctx, stop := context.WithDeadline(ctx, r.hardStop)
	defer stop()
	args := append(r.testArgs(p, timeout), "-overlay="+overlay, "./"+p.rel)
	out, err := r.goTest(ctx, args)
	switch {
	case err != nil && !time.Now().Before(r.hardStop):
		return result{site: s, status: statusNotRun, note: "stopped at the end of the budget"}
	case err == nil:
		return result{site: s, status: statusSurvived}
	case bytes.Contains(out, []byte("[build failed]")) || bytes.Contains(out, []byte("[setup failed]")):
		return result{site: s, status: statusNotViable}
	case ctx.Err() != nil || bytes.Contains(out, []byte("panic: test timed out")):
		return result{site: s, status: statusTimedOut}
	default:
		return result{site: s, status: statusKilled, note: firstFailure(out)}
	}
}

// goTest runs the go command with args in the module root and returns its
// combined output.
func (r *runner) goTest(ctx context.Context, args []string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = r.root
	cmd.WaitDelay = 10 * time.Second
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) && ctx.Err() == nil {
		return buf.Bytes(), fmt.Errorf("go test: %w", err)
	}
	return buf.Bytes(), err
}

// firstFailure returns the name of the first failing test in go test's
// output.
func firstFailure(out []byte) string {
	for line := range strings.Lines(string(out)) {
		if name, ok := strings.CutPrefix(strings.TrimSpace(line), "--- FAIL: "); ok {
			name, _, _ = strings.Cut(name, " ")
			return name
		}
	}
	return ""
}

func tail(out []byte) []byte {
	if len(out) > 4000 {
		return out[len(out)-4000:]
	}
	return out
}
