package blocks_test

import (
	"net/url"
	"testing"
	"time"

	"github.com/egresskit/egresskit/blockwatch"
	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/internal/blocks"
)

// BenchmarkObserve is the block detector's cost per answer of a host with a
// full window: an OK answer (a crawl's usual one), and a 403 among OKs.
func BenchmarkObserve(b *testing.B) {
	for _, bc := range []struct {
		name  string
		every int // one answer in every is a 403
	}{{"ok", 0}, {"403-in-10", 10}} {
		b.Run(bc.name, func(b *testing.B) {
			w := blocks.New(blockwatch.Config{})
			ok := classify.Result{Outcome: classify.OK, Status: 200}
			refused := classify.Result{Outcome: classify.Permanent, Status: 403}
			urls := [...]*url.URL{page(1), page(2), page(3), page(4)}
			now := t0
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				r := ok
				if bc.every > 0 && i%bc.every == 0 {
					r = refused
				}
				if ev := w.Observe("bench.example", urls[i%len(urls)], r, now); ev != nil {
					b.Fatalf("flagged: %v", ev)
				}
				i++
				now = now.Add(time.Millisecond)
			}
		})
	}
}
