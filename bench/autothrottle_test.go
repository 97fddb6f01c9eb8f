package bench

import (
	"context"
	"io"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"
)

// autothrottleRef is a reference implementation, for this benchmark only,
// of the AutoThrottle algorithm as Scrapy's documentation publishes it,
// together with the retries Scrapy's default settings add beside it. It is
// not Scrapy: it is an http.RoundTripper written from the published
// description, so that the politeness benchmark can set that algorithm
// beside egresskit's pacing on the same rate limiters.
//
// Each host has a slot with a delay, starting at max(minDelay,
// startDelay). Requests leave a slot one at a time, each a randomized
// delay (delay×U(0.5,1.5)) after the previous one left, with at most
// perHost of them in flight; the delay in force is the slot's delay when
// a request looks, so a fall applies to requests already waiting. After
// each response the delay follows autothrottleNext, from the latency (the
// time from the request leaving to its response headers). A response
// answered 408, 429, 500, 502, 503, 504, 522 or 524, or a transport
// error, is retried up to retryTimes times, each retry leaving through the
// slot like a new request; Retry-After is not read.
type autothrottleRef struct {
	next http.RoundTripper
	cfg  autothrottleConfig

	mu    sync.Mutex // guards slots
	slots map[string]*autothrottleSlot
}

// autothrottleConfig holds the settings of autothrottleRef, named after
// the settings they stand for.
type autothrottleConfig struct {
	minDelay          time.Duration // DOWNLOAD_DELAY: the floor
	maxDelay          time.Duration // AUTOTHROTTLE_MAX_DELAY: the ceiling
	startDelay        time.Duration // AUTOTHROTTLE_START_DELAY
	targetConcurrency float64       // AUTOTHROTTLE_TARGET_CONCURRENCY
	perHost           int           // CONCURRENT_REQUESTS_PER_DOMAIN
	retryTimes        int           // RETRY_TIMES
	// jitter draws from U(0,1); nil means math/rand/v2's Float64. Each
	// wait is the delay times 0.5 + jitter() (RANDOMIZE_DOWNLOAD_DELAY).
	jitter func() float64
}

// autothrottleDefaults are the published defaults, with the floor at
// minDelay.
func autothrottleDefaults(minDelay time.Duration) autothrottleConfig {
	return autothrottleConfig{
		minDelay:          minDelay,
		maxDelay:          60 * time.Second,
		startDelay:        5 * time.Second,
		targetConcurrency: 1,
		perHost:           8,
		retryTimes:        2,
	}
}

// autothrottleRetried are the statuses the default retry policy retries.
var autothrottleRetried = map[int]bool{408: true, 429: true, 500: true, 502: true, 503: true, 504: true, 522: true, 524: true}

// autothrottleNext is the published delay rule: the slot's delay after a
// response with status whose headers came latency after its request left,
// when the delay was delay. The target is latency / targetConcurrency; the
// new delay is the mean of the old one and the target, but not below the
// target, within [minDelay, maxDelay]; a response other than 200 may not
// lower the delay.
func autothrottleNext(cfg autothrottleConfig, delay, latency time.Duration, status int) time.Duration {
	target := time.Duration(float64(latency) / cfg.targetConcurrency)
	next := max(target, (delay+target)/2)
	next = min(max(next, cfg.minDelay), cfg.maxDelay)
	if status != http.StatusOK && next <= delay {
		return delay
	}
	return next
}

// newAutothrottleRef returns the reference AutoThrottle over next.
func newAutothrottleRef(next http.RoundTripper, cfg autothrottleConfig) *autothrottleRef {
	if cfg.jitter == nil {
		cfg.jitter = rand.Float64
	}
	return &autothrottleRef{next: next, cfg: cfg, slots: map[string]*autothrottleSlot{}}
}

// autothrottleSlot is one host's slot.
type autothrottleSlot struct {
	inFlight chan struct{} // a token per request in flight, perHost at most

	mu     sync.Mutex    // guards the fields below
	delay  time.Duration // the current delay
	last   time.Time     // when the last request left; zero before the first
	factor float64       // the randomization of the wait after last, 0.5 to 1.5
}

// slot returns host's slot, making it on first use.
func (t *autothrottleRef) slot(host string) *autothrottleSlot {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.slots[host]
	if s == nil {
		s = &autothrottleSlot{
			inFlight: make(chan struct{}, t.cfg.perHost),
			delay:    max(t.cfg.minDelay, t.cfg.startDelay),
		}
		t.slots[host] = s
	}
	return s
}

// delay returns host's current delay (for tests).
func (t *autothrottleRef) delay(host string) time.Duration {
	s := t.slot(host)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.delay
}

// RoundTrip sends req through its host's slot, retrying as the default
// retry policy does.
func (t *autothrottleRef) RoundTrip(req *http.Request) (*http.Response, error) {
	s := t.slot(req.URL.Hostname())
	for attempt := 0; ; attempt++ {
		r := req
		if attempt > 0 {
			r = req.Clone(req.Context())
			if req.GetBody != nil {
				body, err := req.GetBody()
				if err != nil {
					return nil, err
				}
				r.Body = body
			}
		}
		resp, err := t.send(r, s)
		if attempt == t.cfg.retryTimes || req.Context().Err() != nil || !t.retryable(req, resp, err) {
			return resp, err
		}
		if resp != nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
}

// retryable reports whether the attempt that gave resp or err is retried:
// a retried status or a transport error, for a request whose body can be
// sent again.
func (t *autothrottleRef) retryable(req *http.Request, resp *http.Response, err error) bool {
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return false
	}
	return err != nil || autothrottleRetried[resp.StatusCode]
}

// send sends one attempt through s: it takes an in-flight token, waits its
// turn, sends, and adjusts the delay by the response. The token is given
// back when the response's body is closed.
func (t *autothrottleRef) send(req *http.Request, s *autothrottleSlot) (*http.Response, error) {
	ctx := req.Context()
	select {
	case s.inFlight <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	release := sync.OnceFunc(func() { <-s.inFlight })
	if err := t.wait(ctx, s); err != nil {
		release()
		return nil, err
	}
	start := time.Now()
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		release()
		return nil, err
	}
	latency := time.Since(start)
	s.mu.Lock()
	s.delay = autothrottleNext(t.cfg, s.delay, latency, resp.StatusCode)
	s.mu.Unlock()
	resp.Body = &releasingBody{ReadCloser: resp.Body, release: release}
	return resp, nil
}

// wait returns when a request may leave s: at once for the first, else
// when the slot's current delay, randomized, has passed since the last
// left; it marks the request as the last to leave.
func (t *autothrottleRef) wait(ctx context.Context, s *autothrottleSlot) error {
	for {
		s.mu.Lock()
		now := time.Now()
		at := s.last.Add(time.Duration(float64(s.delay) * s.factor))
		if s.last.IsZero() || !now.Before(at) {
			s.last, s.factor = now, 0.5+t.cfg.jitter()
			s.mu.Unlock()
			return nil
		}
		s.mu.Unlock()
		timer := time.NewTimer(at.Sub(now))
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		}
	}
}

// CloseIdleConnections closes the idle connections of the transport
// below.
func (t *autothrottleRef) CloseIdleConnections() {
	if ci, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}

// releasingBody gives back a slot's in-flight token when it is closed.
type releasingBody struct {
	io.ReadCloser
	release func()
}

func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	b.release()
	return err
}
