package bench

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"

	"github.com/egresskit/egresskit/internal/cputime"
)

// BenchmarkOverhead sends the same GET through every contender over an
// in-memory base transport, one request at a time, for each page (the
// canned 128-byte text, and real HTML pages of 32 and 256 KiB): what each
// layer costs per request, in time, CPU time, bytes and allocations.
func BenchmarkOverhead(b *testing.B) {
	for _, p := range pages() {
		b.Run("body="+p.name, func(b *testing.B) {
			p.need(b)
			for _, c := range contenders {
				b.Run("impl="+c.name, func(b *testing.B) { benchOverhead(b, c, p) })
			}
		})
	}
}

// benchOverhead is BenchmarkOverhead for contender c and page p.
func benchOverhead(b *testing.B, c contender, p *page) {
	client := &http.Client{Transport: c.build(b, route{base: memTransport{Page: p}})}
	req := newRequest(b, "http://bench.test/page")
	if err := fetch(client, req); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	cpu := cputime.Process()
	for b.Loop() {
		if err := fetch(client, req); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cputime.Process()-cpu)/float64(b.N), "cpu-ns/op")
}

// BenchmarkLoopback sends the same GET through every contender to a
// loopback HTTP/1.1 keep-alive server from 64 goroutines (more when
// GOMAXPROCS does not divide 64), for each page, and reports the
// throughput in requests per second. Client and server share the
// machine's cores.
func BenchmarkLoopback(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(serveCanned))
	defer srv.Close()
	for _, p := range pages() {
		b.Run("body="+p.name, func(b *testing.B) {
			p.need(b)
			for _, c := range contenders {
				b.Run("impl="+c.name, func(b *testing.B) { benchLoopback(b, c, srv.URL+"/"+p.name) })
			}
		})
	}
}

// benchLoopback is BenchmarkLoopback for contender c and the page at url.
// Besides req/s it reports the CPU time of the process (client and
// server) per request, which a busy machine disturbs less than the wall
// time.
func benchLoopback(b *testing.B, c contender, url string) {
	base := loopbackTransport()
	defer base.CloseIdleConnections()
	client := &http.Client{Transport: c.build(b, route{base: base, loopback: true})}
	warmUp(b, client, url)
	procs := runtime.GOMAXPROCS(0)
	b.SetParallelism((concurrency + procs - 1) / procs)
	b.ReportAllocs()
	b.ResetTimer()
	cpu := cputime.Process()
	b.RunParallel(func(pb *testing.PB) {
		req := newRequest(b, url)
		for pb.Next() {
			if err := fetch(client, req); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
	b.ReportMetric(float64(cputime.Process()-cpu)/float64(b.N), "cpu-ns/op")
}

// warmUp sends concurrency requests at once through client, so that the
// keep-alive connections the timed requests use are open already.
func warmUp(b *testing.B, client *http.Client, url string) {
	b.Helper()
	reqs := make([]*http.Request, concurrency)
	for i := range reqs {
		reqs[i] = newRequest(b, url)
	}
	errs := make([]error, concurrency)
	var wg sync.WaitGroup
	for i, req := range reqs {
		wg.Go(func() { errs[i] = fetch(client, req) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		b.Fatal(err)
	}
}
