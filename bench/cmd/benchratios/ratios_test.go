package main

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"testing"
)

// run1 returns a benchmark result line.
func run1(name string, pairs ...any) string {
	return fmt.Sprintf("Benchmark%s-2 1000 %s\n", name, fmt.Sprint(pairs...))
}

// fixture is one run in which the chain meets the allocation, hosts and
// Redis targets and misses the time and memory-throughput ones on the
// canned body, and meets them all on the HTML page but the allocations.
const fixture = `BenchmarkOverhead/body=text-128B/impl=bare-2 1000 2000 ns/op 1000 cpu-ns/op 1224 B/op 12 allocs/op
BenchmarkOverhead/body=text-128B/impl=chain-2 1000 4500 ns/op 1800 cpu-ns/op 2000 B/op 20 allocs/op
BenchmarkOverhead/body=text-128B/impl=failsafe-2 1000 4000 ns/op 3000 cpu-ns/op 2000 B/op 39 allocs/op
BenchmarkOverhead/body=html-32KiB/impl=bare-2 1000 9000 ns/op 9000 cpu-ns/op 34000 B/op 14 allocs/op
BenchmarkOverhead/body=html-32KiB/impl=chain-2 1000 10000 ns/op 10500 cpu-ns/op 36000 B/op 25 allocs/op
BenchmarkOverhead/body=html-32KiB/impl=failsafe-2 1000 11000 ns/op 11000 cpu-ns/op 36000 B/op 41 allocs/op
BenchmarkLoopback/body=text-128B/impl=bare-2 1000 100 ns/op 10000 req/s
BenchmarkLoopback/body=text-128B/impl=chain-2 1000 100 ns/op 9000 req/s
BenchmarkLoopback/body=text-128B/impl=redis-2 1000 100 ns/op 6000 req/s
BenchmarkLoopback/body=html-32KiB/impl=bare-2 1000 100 ns/op 5000 req/s 40000 cpu-ns/op
BenchmarkLoopback/body=html-32KiB/impl=chain-2 1000 100 ns/op 4900 req/s 42000 cpu-ns/op
BenchmarkHosts-2 1 1 ns/op 750 live-B/host 0.1 evicted-B/host
`

func TestCompute(t *testing.T) {
	s, err := parse(strings.NewReader(fixture))
	if err != nil {
		t.Fatal(err)
	}
	r := compute(s)
	want := []struct{ what, verdict string }{
		{"text-128B: chain overhead over bare, in memory (wall time)", missed},             // +2.5 µs
		{"text-128B: chain overhead over bare, in memory (CPU time)", met},                 // +800 ns
		{"text-128B: chain overhead at most failsafe-go's, in memory (wall time)", missed}, // 2.5 µs vs 2 µs
		{"text-128B: chain overhead at most failsafe-go's, in memory (CPU time)", met},     // 800 ns vs 2 µs
		{"text-128B: chain allocations over bare, in memory", met},                         // +8
		{"text-128B: loopback throughput, chain / bare", missed},                           // 0.90
		{"html-32KiB: chain overhead at most failsafe-go's, in memory (wall time)", met},   // 1 µs vs 2 µs
		{"html-32KiB: chain overhead at most failsafe-go's, in memory (CPU time)", met},    // 1.5 µs vs 2 µs
		{"html-32KiB: chain allocations over bare, in memory", missed},                     // +11
		{"html-32KiB: loopback throughput, chain / bare", met},                             // 0.98
		{"text-128B: loopback throughput, redis / bare", met},                              // 0.60
		{"100,000 hosts: retained per idle host, after eviction", met},                     // 0.1 B
		{"100,000 hosts: retained per host while tracked", met},                            // 750 B
	}
	if len(r.targets) != len(want) {
		t.Fatalf("compute gave %d targets, want %d", len(r.targets), len(want))
	}
	for i, w := range want {
		if got := r.targets[i]; got.what != w.what || got.verdict != w.verdict {
			t.Errorf("target %d = %q %s (%s), want %q %s", i, got.what, got.verdict, got.measured, w.what, w.verdict)
		}
	}
}

func TestComputeNotRun(t *testing.T) {
	s, err := parse(strings.NewReader(run1("Overhead/body=text-128B/impl=bare", "2000 ns/op")))
	if err != nil {
		t.Fatal(err)
	}
	for _, tg := range compute(s).targets {
		if tg.verdict != notRun {
			t.Errorf("%s: verdict %s, want %s with only the bare client measured", tg.what, tg.verdict, notRun)
		}
	}
}

func TestRunClosing(t *testing.T) {
	var out bytes.Buffer
	if err := run([]string{"-part", "closing"}, strings.NewReader(fixture), &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"On text-128B in memory the chain costs +2.50 µs and +8 allocations", "On html-32KiB in memory the chain costs +1.00 µs and +11 allocations",
		"on text-128B the chain keeps 0.90× of the bare client's throughput", "0.60× with its state in Redis", "on html-32KiB the chain keeps 0.98×", "750 B each while tracked", "4 of 13 targets missed."} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("closing note %q does not contain %q", out.String(), want)
		}
	}
}

func TestRunErrors(t *testing.T) {
	tests := [][]string{
		{"-part", "everything"},
		{"/nonexistent/results.txt"},
		{"-nosuchflag"},
	}
	for _, args := range tests {
		if err := run(args, strings.NewReader(fixture), &bytes.Buffer{}); err == nil {
			t.Errorf("run(%q) = nil, want an error", args)
		}
	}
	if err := run(nil, strings.NewReader("PASS\n"), &bytes.Buffer{}); err == nil {
		t.Errorf("run on input without results = nil, want an error")
	}
}

// TestPaired checks that ratios are taken round by round: a load that
// halves every contender's throughput in some rounds leaves the ratio
// alone, where the ratio of the medians would move.
func TestPaired(t *testing.T) {
	in := run1("Loopback/body=text-128B/impl=bare", "10000 req/s") + run1("Loopback/body=text-128B/impl=chain", "9000 req/s") +
		run1("Loopback/body=text-128B/impl=bare", "5000 req/s") + run1("Loopback/body=text-128B/impl=chain", "4500 req/s") +
		run1("Loopback/body=text-128B/impl=bare", "20000 req/s") + run1("Loopback/body=text-128B/impl=chain", "18000 req/s") +
		run1("Loopback/body=text-128B/impl=bare", "4000 req/s") + run1("Loopback/body=text-128B/impl=chain", "3600 req/s")
	s, err := parse(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := s.throughput("text-128B", "chain"); !ok || math.Abs(got-0.9) > 1e-9 {
		t.Errorf("throughput(chain) = %v, %v, want 0.9, true", got, ok)
	}
	// Unequal rounds: the ratio of the medians (6750 / 7500).
	s["Loopback/body=text-128B/impl=chain"]["req/s"] = []float64{9000, 4500, 18000}
	if got, ok := s.throughput("text-128B", "chain"); !ok || math.Abs(got-9000.0/7500) > 1e-9 {
		t.Errorf("throughput(chain) with unequal rounds = %v, %v, want %v, true", got, ok, 9000.0/7500)
	}
	// A bare throughput of zero gives no ratio.
	s["Loopback/body=text-128B/impl=chain"]["req/s"] = []float64{9000}
	s["Loopback/body=text-128B/impl=bare"]["req/s"] = []float64{0}
	if _, ok := s.throughput("text-128B", "chain"); ok {
		t.Errorf("throughput(chain) over a bare throughput of 0 is ok, want not ok")
	}
}
