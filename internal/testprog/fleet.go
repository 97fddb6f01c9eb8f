package testprog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FleetWorker configures one worker process of RunFleet: an egresskit
// chain from DefaultConfig, robots.txt ignored.
type FleetWorker struct {
	// Redis is a Redis server's address, or Cluster a Redis Cluster's
	// addresses, where the chain keeps its per-host state; with neither,
	// the state is in the process's memory.
	Redis   string
	Cluster []string
	// Prefix is the Redis key prefix. Empty: redisstore's default.
	Prefix string
	// PerMinute and Burst configure every host's pacing
	// (ratelimit.Config); zero: the defaults.
	PerMinute float64
	Burst     int
	// MaxInFlight is egresskit.Config.MaxInFlight: 0, the default;
	// negative, no cap.
	MaxInFlight int
	// Goroutines is how many requests the worker has at once. Zero: 16.
	Goroutines int
	// Loopback dials 127.0.0.1 at each URL's port, whatever its host, so
	// that many host names reach a few loopback servers.
	Loopback bool
	// URLs are the pages it crawls, each taken by its next free goroutine.
	URLs []string
	// Duration, when positive, ends the crawl after it: the requests in
	// flight then are cancelled and not counted.
	Duration time.Duration
	// PerHost, when positive, crawls each host with PerHost goroutines of
	// its own, each taking the host's next URL, instead of Goroutines for
	// all: a crawl of many hosts at once, none waiting behind another.
	PerHost int
}

// FleetResult is what one worker process saw.
type FleetResult struct {
	Pages      int         // URLs given
	Statuses   map[int]int // the final status of each request that had one
	Errors     int         // requests that ended in an error
	FirstError string
	TryLater   int       // answers egresskit.ErrTryLater, each tried again at RetryAt
	Seconds    float64   // from its first request to its last answer
	Latency    []float64 // each request's time through the chain, seconds
	// Hosts has what each host (host[:port]) answered.
	Hosts map[string]FleetHost
}

// FleetHost is what one host answered one worker.
type FleetHost struct {
	Answers    map[int]int // the answers to its attempts, by status
	Final      map[int]int // its requests' final statuses (0: an error)
	FirstError string      // of its first request that ended in an error
}

// OK is how many pages ended 200.
func (r FleetResult) OK() int { return r.Statuses[200] }

const fleetWorkerPkg = "github.com/egresskit/egresskit/internal/testprog/fleetworker"

// fleetWorkerBin builds the worker program in a directory of t's and
// returns its path.
func fleetWorkerBin(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "fleetworker")
	if out, err := execGo("build", "-o", bin, fleetWorkerPkg); err != nil {
		t.Fatalf("testprog: building the fleet worker: %v\n%s", err, out)
	}
	return bin
}

// RunFleet builds the fleet worker program (internal/testprog/fleetworker)
// and runs one process of it per worker, all at once: each reads its URLs,
// then crawls them. It returns what each saw, in order, when all have
// exited; a worker that fails fails t.
func RunFleet(t testing.TB, workers []FleetWorker) []FleetResult {
	t.Helper()
	bin := fleetWorkerBin(t)
	cmds := make([]*exec.Cmd, len(workers))
	outs := make([]*bytes.Buffer, len(workers))
	errs := make([]*bytes.Buffer, len(workers))
	for i, w := range workers {
		args := []string{
			"-prefix", w.Prefix,
			"-per-minute", strconv.FormatFloat(w.PerMinute, 'g', -1, 64),
			"-burst", strconv.Itoa(w.Burst),
			"-max-in-flight", strconv.Itoa(w.MaxInFlight),
			"-goroutines", strconv.Itoa(cmp(w.Goroutines, 16)),
		}
		if w.Prefix == "" {
			args = args[2:]
		}
		if w.Redis != "" {
			args = append(args, "-redis", w.Redis)
		}
		if len(w.Cluster) > 0 {
			args = append(args, "-cluster", strings.Join(w.Cluster, ","))
		}
		if w.Loopback {
			args = append(args, "-loopback")
		}
		if w.PerHost > 0 {
			args = append(args, "-per-host", strconv.Itoa(w.PerHost))
		}
		if w.Duration > 0 {
			args = append(args, "-duration", w.Duration.String())
		}
		cmd := exec.Command(bin, args...)
		cmd.Stdin = strings.NewReader(strings.Join(w.URLs, "\n") + "\n")
		outs[i], errs[i] = &bytes.Buffer{}, &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = outs[i], errs[i]
		setProcAttr(cmd)
		cmds[i] = cmd
	}
	for i, cmd := range cmds {
		if err := cmd.Start(); err != nil {
			for _, c := range cmds[:i] {
				c.Process.Kill()
				c.Wait()
			}
			t.Fatalf("testprog: starting fleet worker %d: %v", i, err)
		}
	}
	res := make([]FleetResult, len(workers))
	var failed []string
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			failed = append(failed, fmt.Sprintf("worker %d: %v\n%s", i, err, errs[i]))
			continue
		}
		if err := json.Unmarshal(outs[i].Bytes(), &res[i]); err != nil {
			failed = append(failed, fmt.Sprintf("worker %d: reading its result: %v\n%s", i, err, outs[i]))
		}
	}
	if len(failed) > 0 {
		t.Fatalf("testprog: %s", strings.Join(failed, "\n"))
	}
	return res
}

// cmp returns v, or def when v is 0.
func cmp(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}
