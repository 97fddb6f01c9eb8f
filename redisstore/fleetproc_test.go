package redisstore_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/internal/redistest"
	"github.com/egresskit/egresskit/ratelimit"
	"github.com/egresskit/egresskit/redisstore"
	"github.com/egresskit/egresskit/retry"
	"github.com/redis/go-redis/v9"
)

// The fleet tests of this file run each worker in a process of its own:
// the test binary, started again with envWorker naming the Redis server
// and the key prefix. TestMain hands such a process to runWorker, which
// reads one command a line on stdin and answers one line on stdout.
const envWorker = "EGRESSKIT_TEST_FLEET_WORKER"

// workerSpec configures a worker process.
type workerSpec struct {
	Addr, Prefix     string
	PerMinute, Burst float64
}

// command is one line a worker process reads.
type command struct {
	Op       string // "get" or "state"
	URL      string // get
	Host     string // state
	Deadline time.Duration
}

// reply is one line a worker process writes.
type reply struct {
	Status      int
	Err         string
	Kind        string        // halted, open, deadline, or "" for other errors
	Wait        time.Duration // of a *ratelimit.DeadlineError
	Escalations int64
	State       hoststate.Status
	Pid         int
}

// runWorker is the worker process: an egresskit chain over a redisstore
// State of its own Redis client, driven by commands on stdin.
func runWorker(env string) int {
	var spec workerSpec
	if err := json.Unmarshal([]byte(env), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	opt, err := redistest.Options(spec.Addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	client := redis.NewClient(opt)
	defer client.Close()
	cfg := fleetConfig(spec.Prefix)
	cfg.HostState.Limit = ratelimit.Config{PerMinute: spec.PerMinute, Burst: int(spec.Burst)}
	st, err := redisstore.New(client, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	var escalations atomic.Int64
	base := http.DefaultTransport.(*http.Transport).Clone()
	defer base.CloseIdleConnections()
	chain := mustChain(egresskit.Config{
		Base: base, Store: st, IgnoreRobots: true, UserAgent: "TestBot/1.0",
		Retry:      retry.Policy{MaxRetries: -1},
		OnEscalate: func(egresskit.Escalation) { escalations.Add(1) },
	})
	hc := &http.Client{Transport: chain}
	in := bufio.NewScanner(os.Stdin)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var c command
		if err := json.Unmarshal(in.Bytes(), &c); err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
			return 2
		}
		ctx, cancel := context.Background(), context.CancelFunc(func() {})
		if c.Deadline > 0 {
			ctx, cancel = context.WithTimeout(ctx, c.Deadline)
		}
		var r reply
		switch c.Op {
		case "get":
			r = workerGet(ctx, hc, c.URL)
		case "state":
			r.State, err = chain.Status(ctx, c.Host)
			if err != nil {
				r.Err = err.Error()
			}
		}
		cancel()
		r.Escalations, r.Pid = escalations.Load(), os.Getpid()
		if err := out.Encode(r); err != nil {
			return 2
		}
	}
	return 0
}

func workerGet(ctx context.Context, hc *http.Client, url string) reply {
	var r reply
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err == nil {
		var resp *http.Response
		if resp, err = hc.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			r.Status = resp.StatusCode
			return r
		}
	}
	r.Err = err.Error()
	var de *ratelimit.DeadlineError
	switch {
	case errors.Is(err, egresskit.ErrHalted):
		r.Kind = "halted"
	case errors.Is(err, egresskit.ErrOpen):
		r.Kind = "open"
	case errors.As(err, &de):
		r.Kind, r.Wait = "deadline", de.Wait
	}
	return r
}

// proc is a worker process seen from the test.
type proc struct {
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

// startWorkers starts n worker processes, stopped when t ends.
func startWorkers(t *testing.T, n int, spec workerSpec) []*proc {
	t.Helper()
	env, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	ps := make([]*proc, n)
	for i := range ps {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envWorker+"="+string(env))
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		p := &proc{cmd: cmd, in: in, out: bufio.NewScanner(out)}
		t.Cleanup(func() {
			p.in.Close()
			if err := p.cmd.Wait(); err != nil {
				t.Errorf("worker process %d: %v", p.cmd.Process.Pid, err)
			}
		})
		ps[i] = p
	}
	return ps
}

// do sends c to the worker and reads its reply.
func (p *proc) do(t *testing.T, c command) reply {
	t.Helper()
	b, _ := json.Marshal(c)
	if _, err := p.in.Write(append(b, '\n')); err != nil {
		t.Fatalf("worker process %d: %v", p.cmd.Process.Pid, err)
	}
	if !p.out.Scan() {
		t.Fatalf("worker process %d: no reply: %v", p.cmd.Process.Pid, p.out.Err())
	}
	var r reply
	if err := json.Unmarshal(p.out.Bytes(), &r); err != nil {
		t.Fatalf("worker process %d: %v", p.cmd.Process.Pid, err)
	}
	return r
}

func (p *proc) get(t *testing.T, url string) reply {
	t.Helper()
	return p.do(t, command{Op: "get", URL: url})
}

// TestFleetProcesses runs the fleet scenarios with three worker processes
// (the test binary started again), each with its own Redis client, State
// and chain, sharing state only through a real Redis: eight failures
// spread over the processes open the breaker for all of them; one
// refusal halts the host for all, with one escalation in the fleet; one
// 429 with Retry-After slows and pauses the host for all.
func TestFleetProcesses(t *testing.T) {
	ws := startWorkers(t, 3, workerSpec{Addr: redistest.Addr(t), Prefix: redistest.Prefix(t), PerMinute: 600, Burst: 10})
	pids := map[int]bool{os.Getpid(): true}

	t.Run("breaker", func(t *testing.T) {
		o := newOrigin(t, func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "down", http.StatusBadGateway)
		})
		for i := range 8 {
			r := ws[i%3].get(t, o.URL+"/")
			pids[r.Pid] = true
			if r.Status != 502 {
				t.Fatalf("request %d from process %d = %+v; want 502", i+1, i%3, r)
			}
		}
		for i, w := range ws {
			if r := w.get(t, o.URL+"/"); r.Kind != "open" {
				t.Errorf("process %d after 8 failures: %+v, want the breaker open", i, r)
			}
		}
		if got := o.n.Load(); got != 8 {
			t.Errorf("origin saw %d requests, want 8", got)
		}
	})
	if len(pids) != 4 {
		t.Fatalf("process ids %v: want the test and 3 distinct workers", pids)
	}

	t.Run("halt", func(t *testing.T) {
		o := newOrigin(t, func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, "<html>TestBot is not welcome here.</html>")
		})
		before := ws[0].get(t, o.URL+"/")
		if before.Status != 403 {
			t.Fatalf("process 0: %+v; want the 403", before)
		}
		var escalations int64
		for i, w := range ws {
			var r reply
			for range 3 {
				if r = w.get(t, o.URL+"/again"); r.Kind != "halted" {
					t.Errorf("process %d after the halt: %+v, want halted", i, r)
				}
			}
			escalations += r.Escalations
		}
		if got := o.n.Load(); got != 1 {
			t.Errorf("origin saw %d requests, want 1", got)
		}
		if escalations != 1 {
			t.Errorf("escalations in the fleet = %d, want 1", escalations)
		}
	})

	t.Run("throttle", func(t *testing.T) {
		o := newOrigin(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "30")
			http.Error(w, "slow down", http.StatusTooManyRequests)
		})
		if r := ws[0].get(t, o.URL+"/"); r.Status != 429 {
			t.Fatalf("process 0: %+v; want 429", r)
		}
		for i, w := range ws[1:] {
			st := w.do(t, command{Op: "state", Host: o.host()}).State
			if st.PerMinute != 300 || st.PausedUntil.IsZero() || st.Recent.Throttled != 1 {
				t.Errorf("process %d sees rate %v, paused until %v, recent %v; want 300, paused, 1 throttled", i+1, st.PerMinute, st.PausedUntil, st.Recent)
			}
			// The next request would wait out the 30s pause: with a 1s
			// deadline it is refused without being sent.
			if r := w.do(t, command{Op: "get", URL: o.URL + "/", Deadline: time.Second}); r.Kind != "deadline" || r.Wait < 25*time.Second {
				t.Errorf("process %d during the pause: %+v, want a deadline error with a wait of about 30s", i+1, r)
			}
		}
		if got := o.n.Load(); got != 1 {
			t.Errorf("origin saw %d requests, want 1", got)
		}
	})
}

// TestFleetProcessesRedisRestart: two worker processes; one is refused
// and halts the host, the other sees the halt through Redis. Redis is
// killed (SIGKILL) and restarted empty: the next 5 requests of each
// process reach the host 0 times, and the fleet escalated once.
func TestFleetProcessesRedisRestart(t *testing.T) {
	srv := redistest.Start(t)
	ws := startWorkers(t, 2, workerSpec{Addr: srv.Addr, Prefix: "restart", PerMinute: 600, Burst: 10})
	o := newOrigin(t, refuse)
	if r := ws[0].get(t, o.URL+"/"); r.Status != 403 {
		t.Fatalf("process 0: %+v; want the 403", r)
	}
	if r := ws[1].get(t, o.URL+"/"); r.Kind != "halted" {
		t.Fatalf("process 1 before the restart: %+v; want halted", r)
	}
	srv.Kill()
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	var escalations int64
	for i, w := range ws {
		var r reply
		for range 5 {
			if r = w.get(t, o.URL+"/"); r.Kind != "halted" {
				t.Errorf("process %d after the restart: %+v; want halted", i, r)
			}
		}
		escalations += r.Escalations
	}
	if got := o.n.Load(); got != 1 {
		t.Errorf("origin saw %d requests, want 1", got)
	}
	if escalations != 1 {
		t.Errorf("escalations in the fleet = %d, want 1", escalations)
	}
}
