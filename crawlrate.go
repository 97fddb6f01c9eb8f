package egresskit

import (
	"context"
	"fmt"
	"math"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/internal/firstsend"
	"golang.org/x/time/rate"
)

// crawlLimiter returns the limiter of Config.CrawlRate, perSecond
// requests a second with a burst of a tenth of a second's worth (at least
// 1), or nil for no cap (0, or a value check refuses).
func crawlLimiter(perSecond float64) *rate.Limiter {
	if !(perSecond > 0) || math.IsInf(perSecond, 0) {
		return nil
	}
	burst := max(1, int(min(perSecond/10, math.MaxInt32)))
	return rate.NewLimiter(rate.Limit(perSecond), burst)
}

// crawlWait waits for the crawl-wide cap's token of one attempt, after the
// host layers admitted it. A retry's wait is not counted against its
// attempt timeout (first is set for a first attempt on the caller's
// context). The error, when ctx ends first or its deadline comes before the
// token, wraps ctx's error or context.DeadlineExceeded.
func (t *Transport) crawlWait(ctx context.Context, first bool) error {
	resume := noResume
	if !first {
		resume = firstsend.HoldAttemptTimer(ctx)
	}
	err := t.crawl.Wait(ctx)
	resume()
	if err == nil {
		return nil
	}
	r := classify.Result{Outcome: classify.Permanent, Reason: "crawl rate wait exceeds deadline"}
	err = context.DeadlineExceeded // rate: the wait would pass the deadline
	if ctx.Err() != nil {
		err = ctx.Err()
		if err == context.Canceled {
			r = classify.Result{Outcome: classify.Canceled, Reason: "canceled"}
		}
	}
	return &classify.Error{Result: r, Err: fmt.Errorf("egresskit: waiting for the crawl rate: %w", err)}
}
