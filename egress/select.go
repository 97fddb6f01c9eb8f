package egress

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Rendezvous hashing. The hash functions are fixed (FNV-1a and the
// SplitMix64 finaliser), not seeded per process, so that every worker of a
// fleet maps a host to the same subset. Each endpoint's seed is computed
// once; a host's weight for an endpoint is then one 64-bit mix.

func fnv1a(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// mix64 is the SplitMix64 finaliser, a bijection with full avalanche.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

func hostHash(host string) uint64 { return mix64(fnv1a(host)) }

func endpointSeed(id string) uint64 { return mix64(fnv1a(id) ^ 0x9e3779b97f4a7c15) }

// weight is the rendezvous weight of an endpoint for a host.
func weight(hostHash, seed uint64) uint64 { return mix64(hostHash ^ seed) }

// topK returns the k members with the highest weights for the host,
// highest first.
func topK(members []*endpoint, hh uint64, k int) []*endpoint {
	k = min(k, len(members))
	out := make([]*endpoint, 0, k)
	ws := make([]uint64, 0, k)
	for _, e := range members {
		w := weight(hh, e.seed)
		if len(out) == k {
			if k == 0 || w <= ws[k-1] {
				continue
			}
			out, ws = out[:k-1], ws[:k-1] // drop the lowest
		}
		out, ws = append(out, e), append(ws, w)
		for i := len(out) - 1; i > 0 && ws[i-1] < ws[i]; i-- {
			out[i-1], out[i] = out[i], out[i-1]
			ws[i-1], ws[i] = ws[i], ws[i-1]
		}
	}
	return out
}

// hostKey normalises a host for affinity: lower case, without port or
// IPv6 brackets. It does not allocate for an already lower-case name.
func hostKey(host string) string {
	if strings.HasPrefix(host, "[") {
		if i := strings.IndexByte(host, ']'); i > 0 {
			host = host[1:i]
		}
	} else if i := strings.IndexByte(host, ':'); i >= 0 && strings.IndexByte(host[i+1:], ':') < 0 {
		host = host[:i]
	}
	return strings.ToLower(host)
}

// hostCache maps hosts to their subsets. It keeps two generations of at
// most limit entries each: lookups promote entries from the old generation
// to the new one, and when the new one is full it becomes the old one. It
// is bounded, O(1), and close to LRU. Guarded by Pool.mu.
type hostCache struct {
	limit     int
	hot, cold map[string][]*endpoint
}

func (c *hostCache) init(size int) {
	if size > 0 {
		c.limit = max(1, size/2)
	}
	c.reset()
}

func (c *hostCache) reset() {
	if c.limit == 0 {
		return
	}
	c.hot, c.cold = make(map[string][]*endpoint), nil
}

func (c *hostCache) get(host string) ([]*endpoint, bool) {
	if s, ok := c.hot[host]; ok {
		return s, true
	}
	if s, ok := c.cold[host]; ok {
		c.put(host, s)
		return s, true
	}
	return nil, false
}

func (c *hostCache) put(host string, s []*endpoint) {
	if c.limit == 0 {
		return
	}
	if len(c.hot) >= c.limit {
		c.cold, c.hot = c.hot, make(map[string][]*endpoint, c.limit)
	}
	c.hot[strings.Clone(host)] = s
}

// subsetLocked returns the host's subset of members, highest weight first.
func (p *Pool) subsetLocked(host string) []*endpoint {
	if s, ok := p.cache.get(host); ok {
		return s
	}
	s := topK(p.members, hostHash(host), p.set.subsetSize)
	p.cache.put(host, s)
	return s
}

// decision is a selection: the endpoint, why, and whether the request is
// the endpoint's half-open probe.
type decision struct {
	e      *endpoint
	choice Choice
	probe  bool
}

// errFull means every usable candidate is at capacity: RoundTrip waits,
// Select reports ErrAtCapacity.
var errFull = errors.New("egress: full")

func (e *endpoint) hasSlot() bool { return e.ep.Capacity == 0 || e.inFlight < e.ep.Capacity }

func (e *endpoint) decide(r Reason, probe bool) decision {
	return decision{e: e, choice: Choice{EndpointID: e.ep.ID, Reason: r}, probe: probe}
}

// decideLocked picks the endpoint for a request to host at now. It returns
// errFull when the request should wait for a slot.
func (p *Pool) decideLocked(now time.Time, host, forced, bound string) (decision, error) {
	c := &p.set.health
	if forced != "" {
		e := p.byID[forced]
		switch {
		case e == nil:
			return decision{}, fmt.Errorf("%w %q", ErrUnknownEndpoint, forced)
		case !e.hasSlot():
			return decision{}, errFull
		}
		return e.decide(ReasonForced, false), nil
	}
	if bound != "" {
		e := p.byID[bound]
		if e == nil || e.draining {
			return decision{}, fmt.Errorf("%w: %q", ErrBindingUnavailable, bound)
		}
		probe := false
		switch e.h.state(now) {
		case stateQuarantined, stateProbing:
			return decision{}, fmt.Errorf("%w: %q is quarantined", ErrBindingUnavailable, bound)
		case stateHalfOpen:
			probe = true
		}
		if !e.hasSlot() {
			return decision{}, errFull
		}
		return e.decide(ReasonSticky, probe), nil
	}

	subset := p.subsetLocked(host)
	// A subset endpoint whose quarantine is over gets its probe first.
	for _, e := range subset {
		if e.h.state(now) == stateHalfOpen && e.hasSlot() {
			return e.decide(ReasonProbe, true), nil
		}
	}
	// The healthiest subset endpoint with a slot, in rendezvous order
	// within a tier.
	var best *endpoint
	bestDegraded, usable := true, false
	for _, e := range subset {
		if e.h.state(now) != stateActive {
			continue
		}
		usable = true
		if !e.hasSlot() {
			continue
		}
		if d := e.h.degraded(now, c); best == nil || (bestDegraded && !d) {
			best, bestDegraded = e, d
		}
	}
	if best != nil {
		return best.decide(ReasonAffinity, false), nil
	}
	reason := ReasonAffinityUnhealthy
	if usable {
		reason = ReasonCapacity
	}

	// Outside the subset: the best tier, then the host's rendezvous order.
	// A half-open endpoint is probed only if no active one has a slot.
	hh := hostHash(host)
	var out, probe *endpoint
	var outW, probeW uint64
	outDegraded := true
	for _, e := range p.members {
		if inSubset(subset, e) {
			continue
		}
		switch e.h.state(now) {
		case stateActive:
			usable = true
			if !e.hasSlot() {
				continue
			}
			d := e.h.degraded(now, c)
			w := weight(hh, e.seed)
			if out == nil || (outDegraded && !d) || (outDegraded == d && w > outW) {
				out, outW, outDegraded = e, w, d
			}
		case stateHalfOpen:
			if !e.hasSlot() {
				continue
			}
			if w := weight(hh, e.seed); probe == nil || w > probeW {
				probe, probeW = e, w
			}
		}
	}
	switch {
	case out != nil:
		return out.decide(reason, false), nil
	case probe != nil:
		return probe.decide(ReasonProbe, true), nil
	case usable:
		return decision{}, errFull
	}
	return decision{}, ErrNoEndpoint
}

func inSubset(subset []*endpoint, e *endpoint) bool {
	for _, s := range subset {
		if s == e {
			return true
		}
	}
	return false
}

// Select returns the endpoint RoundTrip would choose now for a request to
// host carrying ctx's values (WithForced, WithBinding), without taking a
// slot or waiting: for observability, tests and benchmarks. host is the
// target's host name; a port is ignored. Where RoundTrip would wait for a
// slot, Select returns ErrAtCapacity. Other errors: ErrUnknownEndpoint for
// a forced endpoint that is absent, ErrBindingUnavailable, ErrNoEndpoint,
// ErrClosed.
func (p *Pool) Select(ctx context.Context, host string) (Choice, error) {
	forced, bound := forcedFrom(ctx), bindingFrom(ctx)
	key := hostKey(host)
	now := p.lockWithTime()
	if p.closed {
		p.mu.Unlock()
		return Choice{}, ErrClosed
	}
	d, err := p.decideLocked(now, key, forced, bound)
	p.mu.Unlock()
	if err == errFull {
		err = ErrAtCapacity
	}
	return d.choice, err
}
