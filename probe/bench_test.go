package probe_test

import (
	"context"
	"fmt"
	"runtime"
	"runtime/metrics"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/egresskit/egresskit/probe"
)

// peakHeap samples the live heap every millisecond until stop is called and
// returns the highest value seen above the value at the start.
func peakHeap() (stop func() uint64) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	runtime.GC()
	base := read()
	done := make(chan struct{})
	var peak uint64
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			peak = max(peak, read())
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	return func() uint64 {
		close(done)
		wg.Wait()
		if peak < base {
			return 0
		}
		return peak - base
	}
}

// BenchmarkRunHealthy measures a 1,000-target run against a healthy
// loopback server with the default options: wall time per run (ns/op) and
// the peak of the live heap during the run.
func BenchmarkRunHealthy(b *testing.B) {
	site := siteServer(b).URL
	targets := make([]probe.Target, 1000)
	for i := range targets {
		targets[i] = probe.Target{URL: fmt.Sprintf("%s/ok/%d", site, i)}
	}
	b.ReportAllocs()
	var peak uint64
	for b.Loop() {
		stop := peakHeap()
		rep, err := probe.Run(context.Background(), targets, probe.Options{})
		peak = max(peak, stop())
		if err != nil || rep.Succeeded != len(targets) {
			b.Fatalf("Run: %v, %d of %d succeeded", err, rep.Succeeded, len(targets))
		}
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
}

// BenchmarkDeadlineOvershoot measures how long after its deadline Run
// returns when 200 targets hang (100 in the TCP handshake, 100 in the TLS
// handshake). Run it with -benchtime=10x for ten runs; it reports the
// median and the maximum overshoot.
func BenchmarkDeadlineOvershoot(b *testing.B) {
	hang, stall := newHangAddr(b), newHoldListener(b).addr()
	var targets []probe.Target
	for i := range 100 {
		targets = append(targets,
			probe.Target{URL: fmt.Sprintf("http://%s/hang/%d", hang, i)},
			probe.Target{URL: fmt.Sprintf("https://%s/stall/%d", stall, i)})
	}
	const deadline = 300 * time.Millisecond
	var over []time.Duration
	b.ReportAllocs()
	for b.Loop() {
		start := time.Now()
		rep, err := probe.Run(context.Background(), targets, probe.Options{Deadline: deadline, Concurrency: 256, PerHost: -1, IgnoreRobots: true})
		over = append(over, time.Since(start)-deadline)
		if err != nil || rep.Outcomes.Deadline != len(targets) {
			b.Fatalf("Run: %v, %d of %d cut by the deadline", err, rep.Outcomes.Deadline, len(targets))
		}
	}
	slices.Sort(over)
	b.ReportMetric(float64(over[len(over)/2])/1e6, "median-overshoot-ms")
	b.ReportMetric(float64(over[len(over)-1])/1e6, "max-overshoot-ms")
}
