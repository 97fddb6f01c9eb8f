package main

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/internal/testprog"
)

// TestEndToEndStdinNeverEnds is `sleep 30 | preflight -timeout 1s -`: a
// standard input that stays open must not hold the command past its
// deadline. It exits with the usage status and a message naming the
// timeout, and probes nothing: the message is the deadline's (no
// wall-clock bound is asserted; a command held by its input would fail the
// test by its timeout).
func TestEndToEndStdinNeverEnds(t *testing.T) {
	for _, args := range [][]string{{"-timeout", "1s", "-"}, {"-timeout", "1s", "-targets", "-"}} {
		cmd := exec.Command(binary, args...)
		w, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(w, "http://127.0.0.1:1/never-probed") // a line, and then nothing more
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		err = cmd.Wait()
		w.Close()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != exitUsage {
			t.Errorf("preflight %v with an open stdin: %v, want exit status %d", args, err, exitUsage)
		}
		if out.Len() != 0 || !strings.Contains(errb.String(), "did not end within -timeout 1s") {
			t.Errorf("preflight %v: stdout %q, stderr %q; want nothing and a message naming the timeout", args, out.String(), errb.String())
		}
	}
}

// counting answers every request with 200 and counts them.
func counting(t *testing.T) (string, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		fmt.Fprintln(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &n
}

func TestEndToEndBadHeaderValue(t *testing.T) {
	site, hits := counting(t)
	for _, ua := range []string{"crawler/1\r\nX-Injected: 1", "crawler/1\n", "crawler\x7f/1"} {
		r := runBinary(t, "", "-user-agent", ua, site+"/ok/1")
		if r.code != exitUsage || r.stdout != "" || !strings.Contains(r.stderr, "-user-agent") {
			t.Errorf("-user-agent %q: exit %d, stdout %q, stderr %q; want 2 (usage), nothing, an error naming -user-agent", ua, r.code, r.stdout, r.stderr)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the site received %d requests, want none: a bad header is a usage error found before probing", n)
	}
}

func TestEndToEndUnreadableInputs(t *testing.T) {
	site := testprog.ProbeSite(t)
	dir := t.TempDir()
	bom := filepath.Join(dir, "bom.txt")
	if err := os.WriteFile(bom, []byte("\xef\xbb\xbf"+site+"/ok/1\r\n"+site+"/ok/2\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runBinary(t, "", "-targets", bom)
	if m := checkStableJSON(t, r.stdout); r.code != exitHealthy || m["total_probed"] != 2.0 {
		t.Errorf("file with a byte order mark: exit %d, total_probed %v, stderr %q; want 0, 2", r.code, m["total_probed"], r.stderr)
	}
	r = runBinary(t, "\xef\xbb\xbf"+site+"/ok/1\n", "-")
	if r.code != exitHealthy {
		t.Errorf("stdin with a byte order mark: exit %d, stderr %q; want 0", r.code, r.stderr)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"missing targets file", []string{"-targets", filepath.Join(dir, "absent.txt")}, "no such file"},
		{"directory as targets", []string{"-targets", dir}, "is a directory"},
		{"directory as proxies", []string{"-proxies", dir, site + "/ok/1"}, "is a directory"},
	}
	for _, tt := range tests {
		r := runBinary(t, "", tt.args...)
		if r.code != exitUsage || r.stdout != "" || !strings.Contains(r.stderr, tt.want) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want 2 (usage), nothing, %q", tt.name, r.code, r.stdout, r.stderr, tt.want)
		}
	}
}

// politeSite serves a robots.txt for the egresskit agent token, holds each
// page briefly so that probes overlap, and records the peak number of page
// requests in flight and every User-Agent.
type politeSite struct {
	url        string
	now, peak  atomic.Int32
	mu         sync.Mutex
	agents     map[string]bool
	privateHit atomic.Bool
}

func newPoliteSite(t *testing.T) *politeSite {
	t.Helper()
	s := &politeSite{agents: map[string]bool{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.agents[r.Header.Get("User-Agent")] = true
		s.mu.Unlock()
		switch {
		case r.URL.Path == "/robots.txt":
			fmt.Fprint(w, "User-agent: egresskit\nDisallow: /private/\n")
			return
		case strings.HasPrefix(r.URL.Path, "/private/"):
			s.privateHit.Store(true)
		}
		n := s.now.Add(1)
		defer s.now.Add(-1)
		for p := s.peak.Load(); n > p && !s.peak.CompareAndSwap(p, n); p = s.peak.Load() {
		}
		time.Sleep(20 * time.Millisecond) // the server holding the page, so that probes overlap
		fmt.Fprintln(w, "ok")
	}))
	t.Cleanup(srv.Close)
	s.url = srv.URL
	return s
}

func TestEndToEndPolite(t *testing.T) {
	s := newPoliteSite(t)
	args := []string{"-timeout", "20s", s.url + "/private/1"}
	for i := range 10 {
		args = append(args, fmt.Sprintf("%s/page/%d", s.url, i))
	}
	r := runBinary(t, "", args...)
	m := checkStableJSON(t, r.stdout)
	if r.code != exitHealthy {
		t.Fatalf("exit %d, stderr %q; want 0", r.code, r.stderr)
	}
	first := m["results"].([]any)[0].(map[string]any)
	d := m["diagnosis"].(map[string]any)
	if first["disallowed_by_robots"] != true || d["disallowed_count"] != 1.0 || d["measured"] != 10.0 || s.privateHit.Load() {
		t.Errorf("disallowed URL: result %v, disallowed_count %v, measured %v, sent %v; want reported, not measured, not sent",
			first, d["disallowed_count"], d["measured"], s.privateHit.Load())
	}
	if p := s.peak.Load(); p > 2 {
		t.Errorf("peak probes in flight to one host = %d, want at most 2 (the default -per-host)", p)
	}
	s.mu.Lock()
	if len(s.agents) != 1 || !s.agents[egresskit.DefaultUserAgent] {
		t.Errorf("User-Agents sent = %v, want only the chain's %q", s.agents, egresskit.DefaultUserAgent)
	}
	s.mu.Unlock()

	// Told otherwise: -ignore-robots probes the private URL.
	r = runBinary(t, "", "-ignore-robots", "-user-agent", "othercrawler/1", s.url+"/private/2")
	if r.code != exitHealthy || !s.privateHit.Load() {
		t.Errorf("-ignore-robots: exit %d, private page sent %v; want 0 and sent\n%s\n%s", r.code, s.privateHit.Load(), r.stdout, r.stderr)
	}
}
