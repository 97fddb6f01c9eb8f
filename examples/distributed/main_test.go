package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/egresskit/egresskit/internal/redistest"
)

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "-worker" {
		// Started by the coordinator under test (os.Executable is this
		// test binary): be a worker.
		os.Exit(realMain(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(redistest.Main(m))
}

func TestRun(t *testing.T) {
	addr := redistest.Addr(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	sum, err := run(context.Background(), &out, config{redis: addr, exe: exe, pages: 3})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	got := out.String()
	t.Logf("output:\n%s", got)

	tests := []struct {
		target   string
		received int    // by the host's own count
		view     string // what both workers see at the end
		result   string // a result some request had
	}{
		// Eight failures across both workers open the shared breaker;
		// no worker sends a ninth.
		{"failing", 8, "breaker open", "breaker open"},
		// One 429 and its retry, then the other five requests; the halved
		// rate is shared (its recovery is checked below).
		{"throttling", 7, "", "200"},
		{"healthy", 6, "closed, 600/min", "200"},
		// One refusal halts the host for both workers.
		{"refusing", 1, "halted", "host halted"},
	}
	if len(sum.Targets) != len(tests) {
		t.Fatalf("summary has %d targets, want %d", len(sum.Targets), len(tests))
	}
	for i, tt := range tests {
		s := sum.Targets[i]
		if s.Name != tt.target {
			t.Fatalf("target %d is %q, want %q", i, s.Name, tt.target)
		}
		if s.Received != tt.received || s.SentTotal() != s.Received {
			t.Errorf("%s: host received %d, workers sent %d+%d; want %d received, all of them reported sent",
				s.Name, s.Received, s.Sent[0], s.Sent[1], tt.received)
		}
		if s.Requests != [workers]int{3, 3} {
			t.Errorf("%s: requests per worker = %v, want [3 3]", s.Name, s.Requests)
		}
		for w, v := range s.Views {
			if tt.view == "" {
				// Halved to 300/min by the 429, then climbing back toward
				// the configured rate with the OK answers since.
				if v.Breaker != "closed" || v.PerMinute < perMinute/2 || v.PerMinute >= perMinute {
					t.Errorf("%s: worker %d sees %q, want closed at a rate in [%d, %d)/min", s.Name, w+1, view(v), perMinute/2, perMinute)
				}
				continue
			}
			if got := view(v); got != tt.view {
				t.Errorf("%s: worker %d sees %q, want %q", s.Name, w+1, got, tt.view)
			}
		}
		if s.Results[tt.result] == 0 {
			t.Errorf("%s: results %v, want some %q", s.Name, s.Results, tt.result)
		}
	}
	if s := sum.Targets[1]; s.Statuses[429] != 1 {
		t.Errorf("throttling: statuses %v, want exactly one 429", s.Statuses)
	}
	if s := sum.Targets[3]; s.EscalatedBy == 0 || s.Results["host halted"] != 5 {
		t.Errorf("refusing: escalated by worker %d, results %v; want an escalation and 5 requests not sent", s.EscalatedBy, s.Results)
	}

	for _, want := range []string{
		"failing: 8 attempts reached the host, then the shared breaker turned both workers away (worker 1 sees breaker open, worker 2 sees breaker open)\n",
		"throttling: 1× 429 halved the shared rate to 300/min; it recovers for both: worker 1 sees ",
		"refusing: 1 request reached the host; its refusal (to worker ",
		") halted the host for both (5 requests not sent)\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	// The table shows the hosts' own counts next to the workers'.
	for _, s := range sum.Targets {
		if !strings.Contains(got, s.Answers) {
			t.Errorf("output lacks the row of %s", s.Name)
		}
	}

	// The run leaves no key behind: a halt never expires.
	c := redistest.Dial(t, addr)
	keys, err := c.Keys(context.Background(), sum.Prefix+":*").Result()
	if err != nil || len(keys) != 0 {
		t.Errorf("keys left under %s: %v, %v", sum.Prefix, keys, err)
	}
}

// closedAddr returns an address of 127.0.0.1 where nothing listens.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestNoRedis(t *testing.T) {
	addr := closedAddr(t)
	var stdout, stderr bytes.Buffer
	if code := realMain(context.Background(), []string{"-redis", addr}, &stdout, &stderr); code != 1 {
		t.Errorf("realMain(-redis %s) = %d, want 1", addr, code)
	}
	msg := stderr.String()
	for _, want := range []string{"distributed: no Redis server at " + addr, "-redis", envRedis} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout = %q, want nothing", stdout.String())
	}
	if _, err := run(context.Background(), &stdout, config{redis: addr, pages: 1}); !errors.Is(err, errNoRedis) {
		t.Errorf("run without Redis = %v, want errNoRedis", err)
	}
}

func TestResolveRedis(t *testing.T) {
	tests := []struct{ flag, env, want string }{
		{"", "", defaultRedis},
		{"", "10.0.0.1:6380", "10.0.0.1:6380"},
		{"127.0.0.1:7000", "10.0.0.1:6380", "127.0.0.1:7000"},
		{"redis://127.0.0.1:7000/2", "", "redis://127.0.0.1:7000/2"},
	}
	for _, tt := range tests {
		if got := resolveRedis(tt.flag, tt.env); got != tt.want {
			t.Errorf("resolveRedis(%q, %q) = %q, want %q", tt.flag, tt.env, got, tt.want)
		}
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-pages", "0"}, {"-nosuchflag"}} {
		var stdout, stderr bytes.Buffer
		if code := realMain(context.Background(), args, &stdout, &stderr); code != 2 {
			t.Errorf("realMain(%q) = %d, want 2", args, code)
		}
	}
}

func TestWorkerCannotStart(t *testing.T) {
	addr := redistest.Addr(t)
	exe := t.TempDir() + "/no-such-binary"
	var out bytes.Buffer
	_, err := run(context.Background(), &out, config{redis: addr, exe: exe, pages: 1})
	if err == nil || !strings.Contains(err.Error(), "worker 1:") {
		t.Errorf("run with a missing worker binary = %v, want a worker 1 error", err)
	}
	if out.Len() != 0 {
		t.Errorf("output = %q, want nothing", out.String())
	}
}
