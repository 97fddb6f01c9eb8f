package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

// RoundTrip sends req through the endpoint chosen for req.URL's host. It
// takes one of the endpoint's capacity slots — waiting for one while
// req's context allows, unless Config.FailWhenFull — and holds it until
// the response body is closed. It writes its Choice to the context's
// recorder (WithRecorder) before sending.
//
// The target's responses come back untouched, whatever their status. An
// error of the egress path comes back as a *ProxyError: the proxy is
// unreachable, refused our credentials, failed its handshake or answered
// with an error of its own (its 407, or a response whose Proxy-Status
// blames it, is closed and replaced by the error). Other errors: those
// Select returns (ErrAtCapacity only with FailWhenFull), wrapped in an
// error whose NotSent method reports true (the request never left, so it
// says nothing about the target: package classify and the chain's layers
// recognise it by that method), an error wrapping
// the context's error when it ends while waiting for a slot, and the
// endpoint transport's own errors.
func (p *Pool) RoundTrip(req *http.Request) (*http.Response, error) {
	if p == nil {
		closeRequestBody(req)
		return nil, &notSentError{Err: ErrClosed}
	}
	if req.URL == nil {
		closeRequestBody(req)
		return nil, errors.New("egress: request without URL")
	}
	ctx := req.Context()
	d, a, err := p.acquire(ctx, req.URL.Hostname())
	if err != nil {
		closeRequestBody(req)
		if ctx.Err() == nil {
			err = &notSentError{Err: err}
		}
		return nil, err
	}
	if rec := recorderFrom(ctx); rec != nil {
		*rec = d.choice
	}
	resp, err := p.send(d.e, req, a)
	if err != nil {
		p.release(d.e)
		return nil, err
	}
	resp.Body = holdSlot(resp.Body, p, d.e)
	return resp, nil
}

func closeRequestBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// acquire decides and takes a slot, waiting for one if need be. It
// reports whether the request is the endpoint's quarantine probe or its
// readmission trial.
func (p *Pool) acquire(ctx context.Context, host string) (decision, attempt, error) {
	forced, bound := forcedFrom(ctx), bindingFrom(ctx)
	key := hostKey(host)
	for {
		now := p.lockWithTime()
		if p.closed {
			p.mu.Unlock()
			return decision{}, plainAttempt, ErrClosed
		}
		d, err := p.decideLocked(now, key, forced, bound)
		if err == nil {
			if d.e.lim != nil {
				d.e.lim.AllowN(now, 1)
			}
			d.e.inFlight++
			a := plainAttempt
			if d.probe {
				d.e.h.beginProbe()
				a = probeAttempt
			} else if d.e.h.trialDue(now, &p.set.health) {
				d.e.h.beginTrial()
				a = trialAttempt
			}
			p.mu.Unlock()
			return d, a, nil
		}
		if err != errFull {
			if err == ErrNoEndpoint {
				if cause := p.lastCauseLocked(); cause != nil {
					err = &noEndpointError{cause: cause}
				}
			}
			p.mu.Unlock()
			return decision{}, plainAttempt, err
		}
		if p.set.failWhenFull {
			p.mu.Unlock()
			return decision{}, plainAttempt, ErrAtCapacity
		}
		if p.freed == nil {
			p.freed = make(chan struct{})
		}
		freed := p.freed
		var timer *time.Timer
		var tick <-chan time.Time
		if wait := p.rateWaitLocked(now); wait > 0 {
			timer = time.NewTimer(wait) // a token of an endpoint's Rate is due
			tick = timer.C
		}
		p.mu.Unlock()
		if p.onWait != nil {
			p.onWait()
		}
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return decision{}, plainAttempt, fmt.Errorf("egress: waiting for a free endpoint: %w", ctx.Err())
		case <-freed:
		case <-tick:
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// release gives a slot back and wakes the waiting requests. The last
// request of a removed endpoint, or of a closed pool, closes its idle
// connections.
func (p *Pool) release(e *endpoint) {
	p.mu.Lock()
	e.inFlight--
	idle := e.inFlight == 0 && (e.removed || p.closed)
	p.wakeLocked()
	p.mu.Unlock()
	if idle {
		e.rt.CloseIdleConnections()
	}
}

// outcome is what one attempt says about an endpoint.
type outcome uint8

const (
	outcomeNeutral outcome = iota // says nothing: cancelled, or about the target
	outcomeSuccess                // the endpoint carried the request
	outcomeFailure                // an egress failure
)

// send sends req through e's transport and records what the attempt says
// about e. Proxy-generated failure responses become *ProxyError.
func (p *Pool) send(e *endpoint, req *http.Request, probe attempt) (*http.Response, error) {
	resp, err := e.rt.RoundTrip(req)
	if err != nil {
		var pe *ProxyError
		if errors.As(err, &pe) {
			if pe.EndpointFault() {
				p.recordFailure(e, probe, pe)
			} else {
				p.record(e, outcomeSuccess, probe) // the proxy worked; the target did not
			}
			return nil, pe
		}
		p.record(e, outcomeNeutral, probe)
		return nil, err
	}
	if e.proxy.kind.isHTTPProxy() && req.URL.Scheme == "http" {
		if pe := forwardedFailure(e.ep.ID, resp, e.proxy.url.User != nil); pe != nil {
			drainClose(resp.Body)
			p.recordFailure(e, probe, pe)
			return nil, pe
		}
	}
	p.record(e, outcomeSuccess, probe)
	return resp, nil
}

// record feeds one success or neutral outcome into e's health. The clock
// is read only when the outcome changes time-dependent state: not for a
// neutral outcome, nor for a plain success of an endpoint in full health
// (see health.steady), which is every request of a healthy pool.
func (p *Pool) record(e *endpoint, o outcome, probe attempt) {
	c := &p.set.health
	if o != outcomeSuccess {
		p.mu.Lock()
		e.h.neutral(probe)
		p.noteHealthLocked(e)
		p.mu.Unlock()
		return
	}
	var now time.Time
	timed := p.blemished.Load() > 0
	if timed {
		now = p.now()
	}
	p.mu.Lock()
	if !timed && !e.h.steady(probe, c) {
		// The success moves the score: read the clock after all, which
		// must not be read with mu held.
		p.mu.Unlock()
		now, timed = p.now(), true
		p.mu.Lock()
	}
	if timed {
		e.h.success(now, probe, c)
	} else {
		e.h.steadySuccess()
	}
	p.noteHealthLocked(e)
	p.mu.Unlock()
}

// recordFailure feeds an egress failure into e's health and keeps it as
// the endpoint's last cause. A refusal of credentials and an untrusted
// proxy certificate quarantine the endpoint at once: waiting does not
// heal them, and every attempt sent meanwhile would be lost.
func (p *Pool) recordFailure(e *endpoint, probe attempt, pe *ProxyError) {
	now := p.now()
	c := &p.set.health
	p.mu.Lock()
	e.h.failure(now, probe, pe.hard(), c)
	e.lastErr, e.lastErrAt = pe, now
	p.noteHealthLocked(e)
	p.mu.Unlock()
}

// lastCauseLocked returns the most recent failure of a present endpoint
// that is now quarantined, or nil.
func (p *Pool) lastCauseLocked() *ProxyError {
	var last *endpoint
	for _, e := range p.order {
		if e.lastErr != nil && e.h.quarantined && (last == nil || e.lastErrAt.After(last.lastErrAt)) {
			last = e
		}
	}
	if last == nil {
		return nil
	}
	return last.lastErr
}

// drainClose reads a little of a discarded body, so that its connection
// can be reused, and closes it.
func drainClose(b io.ReadCloser) {
	if b == nil {
		return
	}
	io.Copy(io.Discard, io.LimitReader(b, 4<<10))
	b.Close()
}

// slotBody holds an endpoint slot until the response body is closed.
type slotBody struct {
	io.ReadCloser
	p        *Pool
	e        *endpoint
	released atomic.Bool
}

func (b *slotBody) Close() error {
	err := b.ReadCloser.Close()
	if b.released.CompareAndSwap(false, true) {
		b.p.release(b.e)
	}
	return err
}

// slotRWBody keeps the body writable for 101 Switching Protocols responses.
type slotRWBody struct{ *slotBody }

func (b slotRWBody) Write(p []byte) (int, error) {
	return b.ReadCloser.(io.Writer).Write(p)
}

func holdSlot(body io.ReadCloser, p *Pool, e *endpoint) io.ReadCloser {
	if body == nil {
		body = http.NoBody
	}
	b := &slotBody{ReadCloser: body, p: p, e: e}
	if _, ok := body.(io.Writer); ok {
		return slotRWBody{b}
	}
	return b
}
