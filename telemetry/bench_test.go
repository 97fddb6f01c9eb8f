package telemetry_test

import (
	"context"
	"io"
	"log/slog"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/egresskit/egresskit/telemetry"
)

// BenchmarkFanoutNone is the cost of an event handed to a Fanout of no
// observer.
func BenchmarkFanoutNone(b *testing.B) {
	obs := telemetry.Fanout()
	ctx := context.Background()
	e := sampleEvent()
	b.ReportAllocs()
	for b.Loop() {
		obs.Observe(ctx, e)
	}
}

func BenchmarkSlogDiscard(b *testing.B) {
	obs := telemetry.Fanout(telemetry.NewSlog(slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelDebug})), telemetry.SlogOptions{}))
	ctx := context.Background()
	e := sampleEvent()
	b.ReportAllocs()
	for b.Loop() {
		obs.Observe(ctx, e)
	}
}

func BenchmarkAuditFile(b *testing.B) {
	for _, bc := range []struct {
		name  string
		every time.Duration
	}{{"SyncEvery1s", 0}, {"SyncOnClose", -1}} {
		b.Run(bc.name, func(b *testing.B) {
			a, err := telemetry.NewAudit(telemetry.AuditConfig{Path: filepath.Join(b.TempDir(), "audit.jsonl"), SyncEvery: bc.every})
			if err != nil {
				b.Fatal(err)
			}
			defer a.Close()
			ctx := context.Background()
			e := sampleEvent()
			b.ReportAllocs()
			for b.Loop() {
				a.Observe(ctx, e)
			}
		})
	}
}

func BenchmarkAsync(b *testing.B) {
	a := telemetry.NewAsync(telemetry.ObserverFunc(func(context.Context, *telemetry.Event) {}), 1024)
	defer a.Close()
	ctx := context.Background()
	e := sampleEvent()
	b.ReportAllocs()
	for b.Loop() {
		a.Observe(ctx, e)
	}
}

func BenchmarkRedactURL(b *testing.B) {
	for _, bc := range []struct{ name, url string }{
		{"FastPath", "https://example.com/articles/2026/go-generics"},
		{"Query", "https://example.com/search?q=go&page=2"},
		{"Secret", "https://user:pw@example.com/search?q=go&token=abc"},
	} {
		u, _ := url.Parse(bc.url)
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				(telemetry.Redactor{}).RedactURL(u)
			}
		})
	}
}

func BenchmarkRedactString(b *testing.B) {
	s := `Get "https://example.com/search?q=go&page=2": dial tcp 127.0.0.1:443: connection refused`
	b.ReportAllocs()
	for b.Loop() {
		(telemetry.Redactor{}).RedactString(s)
	}
}

func BenchmarkVerify(b *testing.B) {
	path := filepath.Join(b.TempDir(), "audit.jsonl")
	a, _ := telemetry.NewAudit(telemetry.AuditConfig{Path: path, SyncEvery: -1})
	for range 1000 {
		a.Observe(context.Background(), sampleEvent())
	}
	a.Close()
	b.ReportAllocs()
	for b.Loop() {
		if err := verifyFiles(path); err != nil {
			b.Fatal(err)
		}
	}
}
