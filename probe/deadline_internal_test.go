package probe

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/egresskit/egresskit/classify"
)

// fakeSite answers probes in memory, in a synctest bubble's fake time, by
// the first segment of the path: /hang/ never answers (until the probe's
// context ends), /slow/N/ answers 200 after N ms, /throttle/ 429 with
// Retry-After: 7, /challenge/ a 403 challenge page, anything else 200,
// each after latency.
type fakeSite struct{ latency time.Duration }

const fakeChallenge = `<!DOCTYPE html><html><head><title>Just a moment...</title></head>
<body><script>window._cf_chl_opt={cvId:"3"};</script></body></html>`

func (f fakeSite) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx := r.Context()
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/"), "/")
	wait := f.latency
	switch parts[0] {
	case "hang":
		<-ctx.Done()
		return nil, ctx.Err()
	case "slow":
		ms, _ := strconv.Atoi(parts[1])
		wait = time.Duration(ms) * time.Millisecond
	}
	select {
	case <-time.After(wait):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	status, body, h := http.StatusOK, `{"ok":true}`, http.Header{"Content-Type": {"application/json"}}
	switch parts[0] {
	case "throttle":
		status, body, h = http.StatusTooManyRequests, "slow down", http.Header{"Retry-After": {"7"}}
	case "challenge":
		status, body, h = http.StatusForbidden, fakeChallenge, http.Header{"Content-Type": {"text/html; charset=utf-8"}}
	}
	return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)), Request: r, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}, nil
}

// fakeRun runs targets (paths on site.test) in fake time and returns the
// report, how long Run took in fake time, and the error.
func fakeRun(t *testing.T, ctx context.Context, paths []string, opts Options) (*Report, time.Duration, error) {
	t.Helper()
	targets := make([]Target, len(paths))
	for i, p := range paths {
		targets[i] = Target{URL: "http://site.test" + p}
	}
	opts.IgnoreRobots = true
	if opts.transport == nil {
		opts.transport = fakeSite{latency: 10 * time.Millisecond}
	}
	start := time.Now()
	rep, err := Run(ctx, targets, opts)
	return rep, time.Since(start), err
}

// TestRunDeadlineFakeTime is the deadline logic of a large run, in fake
// time: 1,000 probes, 150 of which never answer, 256 in flight, a 2 s
// deadline. Run returns exactly at the deadline (not a tick later: the
// deadline's timer cancels the probes in flight, whose workers then end),
// every answering probe keeps its outcome, and every hanging one is
// reported as cut by the deadline. A goroutine left behind would fail
// synctest.Test.
func TestRunDeadlineFakeTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var paths []string
		want := map[string]int{}
		for i := range 1000 {
			kind := "ok"
			switch {
			case i%20 == 3:
				kind = "throttle"
			case i%20 == 7:
				kind = "challenge"
			case i%20 == 11 || i%20 == 13 || i%20 == 17:
				kind = "hang"
			}
			paths = append(paths, fmt.Sprintf("/%s/%d", kind, i))
			want[kind]++
		}
		rep, took, err := fakeRun(t, context.Background(), paths, Options{Deadline: 2 * time.Second, Concurrency: 256, PerHost: -1})
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		if took != 2*time.Second {
			t.Errorf("Run returned after %v of fake time, want exactly the 2s deadline", took)
		}
		got := map[string]map[string]int{}
		for i, r := range rep.Results {
			kind := strings.Split(paths[i], "/")[1]
			if got[kind] == nil {
				got[kind] = map[string]int{}
			}
			got[kind][r.OutcomeName()]++
			if kind == "hang" && (!r.Deadline || r.Err != "deadline" || r.Outcome != classify.Canceled || r.Stage == "queued") {
				t.Errorf("hanging probe %d = %+v, want cut by the deadline in flight", i, r)
			}
			if kind != "hang" && r.Latency != 10*time.Millisecond {
				t.Errorf("probe %d latency %v, want the site's 10ms", i, r.Latency)
			}
		}
		wantOutcomes := map[string]map[string]int{
			"ok":        {"ok": want["ok"]},
			"throttle":  {"throttled": want["throttle"]},
			"challenge": {"refused": want["challenge"]},
			"hang":      {"deadline": want["hang"]},
		}
		if fmt.Sprint(got) != fmt.Sprint(wantOutcomes) {
			t.Errorf("outcomes by kind = %v, want %v", got, wantOutcomes)
		}
		if d := rep.Diagnosis; d.NotStarted != 0 || d.Outcomes.Deadline != want["hang"] || d.Succeeded != want["ok"] {
			t.Errorf("diagnosis: NotStarted %d, Deadline %d, Succeeded %d; want 0, %d, %d",
				d.NotStarted, d.Outcomes.Deadline, d.Succeeded, want["hang"], want["ok"])
		}
	})
}

// TestRunDeadlineCases checks, in fake time, when Run returns and how each
// probe is reported: probes still queued at the deadline, a context
// deadline earlier than Options.Deadline, a caller's cancellation, and
// answers just before and just after the deadline.
func TestRunDeadlineCases(t *testing.T) {
	type want struct {
		outcome string
		queued  bool // never started: reported in "queued"
		err     string
	}
	ok, cut, queued := want{"ok", false, ""}, want{"deadline", false, "deadline"}, want{"deadline", true, "deadline"}
	canceled := want{"canceled", false, "canceled"}
	tests := []struct {
		name     string
		paths    []string
		opts     Options
		ctxAfter time.Duration // a context deadline this long after the start
		cancelAt time.Duration // the caller cancels this long after the start
		took     time.Duration
		wantErr  error
		want     []want
	}{
		{"queued behind hanging probes", []string{"/hang/1", "/hang/2", "/ok/3", "/ok/4"},
			Options{Deadline: time.Second, Concurrency: 2, PerHost: -1}, 0, 0, time.Second, nil,
			[]want{cut, cut, queued, queued}},
		{"context deadline first", []string{"/hang/1", "/ok/2"},
			Options{Deadline: time.Minute, Concurrency: 1}, 500 * time.Millisecond, 0, 500 * time.Millisecond, nil,
			[]want{cut, queued}},
		{"caller cancels", []string{"/hang/1", "/ok/2"},
			Options{Deadline: time.Minute, Concurrency: 2, PerHost: -1}, 0, 300 * time.Millisecond, 300 * time.Millisecond, ErrCanceled,
			[]want{canceled, ok}},
		{"answers on either side of the deadline", []string{"/slow/1999/a", "/slow/2001/b", "/ok/c"},
			Options{Deadline: 2 * time.Second, Concurrency: 3, PerHost: -1}, 0, 0, 2 * time.Second, nil,
			[]want{ok, cut, ok}},
		{"everything answers: no wait for the deadline", []string{"/slow/300/a", "/ok/b"},
			Options{Deadline: 2 * time.Second, Concurrency: 2, PerHost: -1}, 0, 0, 300 * time.Millisecond, nil,
			[]want{ok, ok}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				if tt.ctxAfter > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(ctx, tt.ctxAfter)
					defer cancel()
				}
				if tt.cancelAt > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithCancel(ctx)
					defer cancel()
					time.AfterFunc(tt.cancelAt, cancel)
				}
				rep, took, err := fakeRun(t, ctx, tt.paths, tt.opts)
				if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
					t.Fatalf("Run error = %v, want %v", err, tt.wantErr)
				}
				if took != tt.took {
					t.Errorf("Run returned after %v of fake time, want %v", took, tt.took)
				}
				for i, r := range rep.Results {
					w := tt.want[i]
					queuedOK := w.queued == (r.Stage == "queued")
					if r.OutcomeName() != w.outcome || r.Err != w.err || !queuedOK || r.Deadline != (w.outcome == "deadline") {
						t.Errorf("Results[%d] (%s) = outcome %s, err %q, stage %v, deadline %v; want %s, %q, queued %v",
							i, tt.paths[i], r.OutcomeName(), r.Err, r.Stage, r.Deadline, w.outcome, w.err, w.queued)
					}
				}
			})
		})
	}
}
