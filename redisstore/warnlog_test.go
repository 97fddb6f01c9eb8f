package redisstore_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/egresskit/egresskit/internal/redistest"
	"github.com/egresskit/egresskit/redisstore"
)

// logged collects the records of a slog handler.
type logged struct {
	mu  sync.Mutex // guards buf and n
	buf bytes.Buffer
	n   int
	h   slog.Handler
}

func newLogged() *logged {
	l := &logged{}
	l.h = slog.NewTextHandler(&lockedWriter{l}, &slog.HandlerOptions{Level: slog.LevelDebug})
	return l
}

type lockedWriter struct{ l *logged }

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.l.mu.Lock()
	defer w.l.mu.Unlock()
	w.l.n++
	return w.l.buf.Write(p)
}

func (l *logged) lines() (int, string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n, l.buf.String()
}

// TestWarningsNeverSilent: with no OnWarning, a FailOpen Store whose Redis
// stops logs one warning through slog.Default for the whole outage (not
// one per request), naming the refused connection, and one on recovery.
// Not parallel: it sets slog's default logger.
func TestWarningsNeverSilent(t *testing.T) {
	l := newLogged()
	old := slog.Default()
	slog.SetDefault(slog.New(l.h))
	t.Cleanup(func() { slog.SetDefault(old) })

	ctx := context.Background()
	srv := redistest.Start(t)
	clk := newClock()
	cfg := fleetConfig(redistest.Prefix(t))
	cfg.OnRedisError = redisstore.FailOpen
	cfg.Timeout = time.Second
	cfg.RetryInterval = time.Minute
	cfg.Now = clk.Now
	w := newWorker(t, srv.Addr, cfg)
	site := newOrigin(t, ok)
	if status, err := w.get(ctx, site.URL); status != 200 {
		t.Fatalf("with Redis up: %d, %v", status, err)
	}
	if n, text := l.lines(); n != 0 {
		t.Fatalf("with Redis up, %d lines logged:\n%s", n, text)
	}
	srv.Kill()
	for i := range 20 {
		if status, err := w.get(ctx, site.URL); status != 200 {
			t.Fatalf("request %d with Redis down: %d, %v", i, status, err)
		}
	}
	n, text := l.lines()
	if n != 1 || !strings.Contains(text, "level=WARN") || !strings.Contains(text, "redisstore: outage") ||
		!strings.Contains(text, "connection refused") {
		t.Fatalf("20 requests with Redis down logged %d lines, want one warning naming the refused connection:\n%s", n, text)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	for range 5 {
		if status, err := w.get(ctx, site.URL); status != 200 {
			t.Fatalf("after the restart: %d, %v", status, err)
		}
	}
	n, text = l.lines()
	if n != 2 || !strings.Contains(text, "level=INFO msg=\"redisstore: recovered\"") {
		t.Fatalf("after recovery, %d lines logged, want the warning and one recovery:\n%s", n, text)
	}
}

// TestFailClosedKeepsCause: a FailClosed error says why Redis is
// unavailable — the refused connection, matched as a *net.OpError — not
// only that the call ran out of time; and it is not the caller's
// context.DeadlineExceeded.
func TestFailClosedKeepsCause(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	cfg := fleetConfig(redistest.Prefix(t))
	cfg.Timeout = 200 * time.Millisecond
	w := newWorker(t, srv.Addr, cfg)
	srv.Kill()
	_, err := w.state.Admit(ctx, "a.example")
	var oe *net.OpError
	if !errors.Is(err, redisstore.ErrUnavailable) || !errors.As(err, &oe) || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("Admit with Redis stopped = %v, want ErrUnavailable with the *net.OpError of the refused dial", err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Admit with Redis stopped = %v: matches context.DeadlineExceeded, the caller's deadline", err)
	}
}

func TestWarningText(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	w := redisstore.Warning{Kind: redisstore.Restored, Op: "watch", Err: errors.New("boom"), Halts: 2,
		Hosts: []string{"a.example", "b.example"}, Servers: []string{"10.0.0.1:6379"}, Time: at}
	if got, want := w.String(), "redisstore: restored (watch): boom; halts written: 2; hosts: a.example,b.example; servers: 10.0.0.1:6379"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	var b bytes.Buffer
	slog.New(slog.NewTextHandler(&b, nil)).Warn("x", "w", w)
	for _, want := range []string{"w.kind=restored", "w.op=watch", "w.err=boom", "w.halts=2", "w.hosts=\"[a.example b.example]\"", "w.time=2026-01-02T03:04:05"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("logged %q, want it to contain %q", b.String(), want)
		}
	}
	if got := (redisstore.Warning{Kind: redisstore.Recovered}).String(); got != "redisstore: recovered" {
		t.Errorf("String() = %q", got)
	}
}
