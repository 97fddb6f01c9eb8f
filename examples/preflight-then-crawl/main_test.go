package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// received is what one host saw: page requests (probe and crawl) and
// robots.txt requests (the probe's check, then the chain's own).
type received struct{ pages, robots int }

func TestScenarios(t *testing.T) {
	const pages = 3
	crawled := received{pages: 1 + pages, robots: 2} // the probe, then the crawl
	tests := []struct {
		scenario string
		wantErr  error
		want     []string // lines (or parts of lines) of the output
		unwanted []string
		received map[string]received // by host; hosts not listed: crawled
	}{
		{
			scenario: scenarioHealthy,
			want: []string{
				"scenario healthy: probed 5 hosts: HEALTHY (success rate 1.00, rate-limited 0, blocked 0)\n",
				"recommended: concurrency 1.00, backoff 1s..10s with 2 retries, halt hosts: none\n",
				"chain: 2 retries, backoff 1s..10s, 30s per request; 4 of 4 workers; leave alone: none\n",
				"crawled 15 of 15 pages\n",
			},
			unwanted: []string{"reason:", "halting"},
		},
		{
			scenario: scenarioDegraded,
			want: []string{
				"scenario degraded: probed 5 hosts: DEGRADED (success rate 0.80, rate-limited 0, blocked 1)\n",
				"reason: success rate 0.8 is below 0.9\n",
				"docs  403  refused  challenge marker\n",
				"recommended: concurrency 0.80, backoff 2s..30s with 3 retries, halt hosts: docs\n",
				"chain: 3 retries, backoff 2s..30s, 30s per request; 3 of 4 workers; leave alone: docs\n",
				"crawled 12 of 15 pages\n",
			},
			unwanted: []string{"halting"},
			received: map[string]received{"docs": {pages: 1, robots: 1}}, // the probe only
		},
		{
			scenario: scenarioCritical,
			wantErr:  errCritical,
			want: []string{
				"scenario critical: probed 5 hosts: CRITICAL (success rate 0.40, rate-limited 2, blocked 1)\n",
				"reason: 2 of 5 probes were rate-limited (degraded at 1)\n",
				"reason: success rate 0.4 is below 0.5\n",
				"blog  429  throttled  status 429\n",
				"wiki  403  refused    challenge marker\n",
				"halt hosts: wiki\n",
				"recommended: pace blog at 2/min\n",
				"recommended: pace shop at 2/min\n",
				"halting: CRITICAL, nothing crawled\n",
			},
			unwanted: []string{"chain:", "\ncrawled"},
			received: map[string]received{ // the probes only
				"blog": {pages: 1, robots: 1}, "docs": {pages: 1, robots: 1}, "news": {pages: 1, robots: 1},
				"shop": {pages: 1, robots: 1}, "wiki": {pages: 1, robots: 1},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.scenario, func(t *testing.T) {
			t.Parallel()
			ts, err := startTargets(tt.scenario)
			if err != nil {
				t.Fatal(err)
			}
			defer ts.Close()
			var out bytes.Buffer
			err = run(context.Background(), &out, ts, options{workers: 4, pages: pages})
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Fatalf("run(%s) = %v, want %v\n%s", tt.scenario, err, tt.wantErr, out.String())
			}
			got := out.String()
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("run(%s) output lacks %q; got:\n%s", tt.scenario, w, got)
				}
			}
			for _, w := range tt.unwanted {
				if strings.Contains(got, w) {
					t.Errorf("run(%s) output has %q; got:\n%s", tt.scenario, w, got)
				}
			}
			// The hosts' own counts: nothing crawled beyond what the
			// diagnosis allowed, nothing fetched twice.
			for _, s := range ts.sites {
				want, ok := tt.received[s.name]
				if !ok {
					want = crawled
				}
				p, r := s.counts()
				if got := (received{p, r}); got != want {
					t.Errorf("run(%s): %s received %+v, want %+v", tt.scenario, s.name, got, want)
				}
			}
		})
	}
}

func TestUnknownScenario(t *testing.T) {
	if _, err := startTargets("sunny"); err == nil || !strings.Contains(err.Error(), `unknown scenario "sunny"`) {
		t.Errorf("startTargets(sunny) = %v, want an unknown-scenario error", err)
	}
}
