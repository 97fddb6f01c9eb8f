package egresskit_test

import (
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/ratelimit"
	"github.com/egresskit/egresskit/telemetry"
)

// canned answers every request with the same small 200 response, without
// I/O, so that benchmarks measure only the layers above it.
type canned struct{}

func (canned) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{
		StatusCode:    200,
		Status:        "200 OK",
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        http.Header{"Content-Type": {"application/octet-stream"}},
		Body:          io.NopCloser(strings.NewReader("ok")),
		ContentLength: 2,
		Request:       req,
	}, nil
}

func benchmarkClient(b *testing.B, c *http.Client) {
	b.Helper()
	req, _ := http.NewRequest("GET", "http://bench.test/page", nil)
	req.Header.Set("User-Agent", "BenchBot/1.0") // as a crawler sets it: the chain need not clone
	b.ReportAllocs()
	for b.Loop() {
		resp, err := c.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// BenchmarkOverhead compares a bare http.Client with the full chain over the
// same in-memory base: the difference is the chain's per-request cost.
func BenchmarkOverhead(b *testing.B) {
	b.Run("impl=bare", func(b *testing.B) {
		benchmarkClient(b, &http.Client{Transport: canned{}})
	})
	b.Run("impl=chain", func(b *testing.B) {
		chain := mustChain(egresskit.Config{
			Base:         canned{},
			IgnoreRobots: true,
			Store:        mustMemory(hoststate.Config{Limit: ratelimit.Config{PerMinute: 1e9, Burst: 1 << 20}}),
		})
		benchmarkClient(b, &http.Client{Transport: chain})
	})
	b.Run("impl=chain+slog", func(b *testing.B) {
		chain := mustChain(egresskit.Config{
			Base:         canned{},
			IgnoreRobots: true,
			Store:        mustMemory(hoststate.Config{Limit: ratelimit.Config{PerMinute: 1e9, Burst: 1 << 20}}),
			Observers:    []telemetry.Observer{telemetry.NewSlog(slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelDebug})), telemetry.SlogOptions{})},
		})
		benchmarkClient(b, &http.Client{Transport: chain})
	})
	b.Run("impl=chain+audit", func(b *testing.B) {
		audit, err := telemetry.NewAudit(telemetry.AuditConfig{Path: filepath.Join(b.TempDir(), "audit.jsonl")})
		if err != nil {
			b.Fatal(err)
		}
		defer audit.Close()
		chain := mustChain(egresskit.Config{
			Base:         canned{},
			IgnoreRobots: true,
			Store:        mustMemory(hoststate.Config{Limit: ratelimit.Config{PerMinute: 1e9, Burst: 1 << 20}}),
			Audit:        audit,
		})
		benchmarkClient(b, &http.Client{Transport: chain})
	})
	b.Run("impl=chain+robots", func(b *testing.B) {
		chain := mustChain(egresskit.Config{
			Base:  canned{},
			Store: mustMemory(hoststate.Config{Limit: ratelimit.Config{PerMinute: 1e9, Burst: 1 << 20}}),
		})
		benchmarkClient(b, &http.Client{Transport: chain})
	})
}
