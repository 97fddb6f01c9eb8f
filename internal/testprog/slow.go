package testprog

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// SlowOptions configures SlowServer.
type SlowOptions struct {
	Workers int           // requests served at once; 0: 8
	Service time.Duration // service time of each; 0: 1s
	// PerHost makes every host name (Host header) a server of its own,
	// with Workers workers and stats of its own (HostStats).
	PerHost bool
}

// Slow is a running slowing server (see SlowServer).
type Slow struct {
	URL     string // http://127.0.0.1:port
	Workers int
	Service time.Duration
}

// Capacity is the most requests a second the server answers.
func (s *Slow) Capacity() float64 { return float64(s.Workers) / s.Service.Seconds() }

// SlowStats is what a slowing server saw.
type SlowStats struct {
	Requests     int           // answered
	MaxInFlight  int           // queued or served at once, at most
	MaxServing   int           // served at once (holding a worker), at most
	MeanInFlight float64       // time-weighted, from the first arrival to the last answer
	Span         time.Duration // from the first arrival to the last answer
	P50, P95     time.Duration // latency from arrival to answer
}

// Throughput is the requests answered a second over Span.
func (s SlowStats) Throughput() float64 {
	if s.Span <= 0 {
		return 0
	}
	return float64(s.Requests) / s.Span.Seconds()
}

func (s SlowStats) String() string {
	return fmt.Sprintf("%d answered in %v (%.2f/s); in flight max %d, mean %.1f; served at once max %d; latency p50 %v, p95 %v",
		s.Requests, s.Span.Round(10*time.Millisecond), s.Throughput(), s.MaxInFlight, s.MeanInFlight, s.MaxServing,
		s.P50.Round(time.Millisecond), s.P95.Round(time.Millisecond))
}

// slowServerPkg is the slowing server's main package, built by import path
// so that any module with egresskit in its build list can build it.
const slowServerPkg = "github.com/egresskit/egresskit/internal/testprog/slowserver"

// SlowServer builds and starts, in its own process, an application server
// whose latency grows with the requests in flight: opts.Workers workers
// serve a request each in opts.Service, the rest wait in a queue, so its
// capacity is Workers/Service requests a second and a request's latency is
// its wait plus the service time. Stats reports what it saw. It is
// killed when the test ends.
func SlowServer(t testing.TB, opts SlowOptions) *Slow {
	t.Helper()
	if opts.Workers <= 0 {
		opts.Workers = 8
	}
	if opts.Service <= 0 {
		opts.Service = time.Second
	}
	bin := filepath.Join(t.TempDir(), "slowserver")
	if out, err := execGo("build", "-o", bin, slowServerPkg); err != nil {
		t.Fatalf("testprog: building the slowing server: %v\n%s", err, out)
	}
	port := FreePort(t)
	args := []string{
		"-addr", "127.0.0.1:" + strconv.Itoa(port),
		"-workers", strconv.Itoa(opts.Workers),
		"-service", opts.Service.String(),
	}
	if opts.PerHost {
		args = append(args, "-per-host")
	}
	Start(t, Spec{Path: bin, Port: port, Args: args})
	return &Slow{URL: "http://127.0.0.1:" + strconv.Itoa(port), Workers: opts.Workers, Service: opts.Service}
}

// Stats returns what the server saw so far (of every host together,
// with PerHost).
func (s *Slow) Stats() (SlowStats, error) { return s.stats(s.URL + "/_stats") }

// HostStats returns what the server saw of host (as the Host header named
// it, "name:port") so far; it needs PerHost.
func (s *Slow) HostStats(host string) (SlowStats, error) {
	return s.stats(s.URL + "/_stats?host=" + url.QueryEscape(host))
}

func (s *Slow) stats(u string) (SlowStats, error) {
	resp, err := http.Get(u)
	if err != nil {
		return SlowStats{}, err
	}
	defer resp.Body.Close()
	var st SlowStats
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return SlowStats{}, fmt.Errorf("testprog: reading the slowing server's stats: %w", err)
	}
	return st, nil
}

// execGo runs the go command with args and returns its combined output.
func execGo(args ...string) ([]byte, error) {
	return exec.Command(goTool(), args...).CombinedOutput()
}
