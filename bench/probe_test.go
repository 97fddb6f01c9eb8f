package bench

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/egresskit/egresskit/probe"
)

// BenchmarkProbe runs the pre-flight probe over 1,000 targets on a
// loopback server with the default options (64 in flight, the per-host cap
// lifted and robots.txt not checked, as all 1,000 share one host): the wall time
// of one Run (sec/op) and the peak of the live heap during it, above the
// heap before it (peak-heap-MiB).
func BenchmarkProbe(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(serveCanned))
	defer srv.Close()
	targets := make([]probe.Target, 1000)
	for i := range targets {
		targets[i] = probe.Target{URL: srv.URL + "/t/" + strconv.Itoa(i)}
	}
	var peak uint64
	b.ReportAllocs()
	for b.Loop() {
		stop := samplePeakHeap()
		rep, err := probe.Run(context.Background(), targets, probe.Options{PerHost: -1, IgnoreRobots: true})
		peak = max(peak, stop())
		if err != nil {
			b.Fatal(err)
		}
		if rep.Succeeded != len(targets) {
			b.Fatalf("%d of %d probes succeeded", rep.Succeeded, len(targets))
		}
	}
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
}

// samplePeakHeap samples the live heap every millisecond until the
// returned function is called, which returns the highest value seen above
// the heap at the start.
func samplePeakHeap() (stop func() uint64) {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 {
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
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
		return max(peak, base) - base
	}
}
