package egress

import (
	"context"
	"errors"
	"fmt"
	"math"
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

// score is the weighted rendezvous score of an endpoint for a host:
// -w/ln(u), with u uniform in (0, 1) drawn from the host and the
// endpoint. An endpoint of weight w then ranks first for a share w/Σw of
// hosts, and adding or removing one endpoint moves only the hosts whose
// top endpoints it enters or leaves. With equal weights the order is that
// of u, plain rendezvous hashing.
func score(hostHash uint64, e *endpoint) float64 {
	u := (float64(mix64(hostHash^e.seed)>>11) + 0.5) / (1 << 53)
	return -e.weight / math.Log(u)
}

// rank orders endpoints as score does. Among endpoints of equal weight
// the order is that of u alone, so the logarithm is skipped.
func rank(hostHash uint64, e *endpoint, uniform bool) float64 {
	if uniform {
		return float64(mix64(hostHash^e.seed) >> 11)
	}
	return score(hostHash, e)
}

// uniformWeight reports whether every endpoint has the same weight.
func uniformWeight(eps []*endpoint) bool {
	for _, e := range eps {
		if e.weight != eps[0].weight {
			return false
		}
	}
	return true
}

// topK returns the k members with the highest scores for the host,
// highest first. uniform says that all members have the same weight.
func topK(members []*endpoint, hh uint64, k int, uniform bool) []*endpoint {
	k = min(k, len(members))
	out := make([]*endpoint, 0, k)
	ws := make([]float64, 0, k)
	for _, e := range members {
		w := rank(hh, e, uniform)
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

// route is what selection needs to know about a host: the rule that
// governs it (nil for none), the endpoints eligible under it, and its
// subset of them.
type route struct {
	rule     *Rule
	eligible []*endpoint
	uniform  bool // every eligible endpoint has the same weight
	subset   []*endpoint
}

// routeLocked returns the host's route; its subset holds the eligible
// endpoints of highest score, highest first.
func (p *Pool) routeLocked(host string) *route {
	if r, ok := p.cache.get(host); ok {
		return r
	}
	r := &route{rule: p.rules.match(host), eligible: p.members, uniform: p.uniform}
	if r.rule != nil {
		el := p.eligible[r.rule]
		r.eligible, r.uniform = el.members, el.uniform
	}
	r.subset = topK(r.eligible, hostHash(host), p.set.subsetSize, r.uniform)
	p.cache.put(host, r)
	return r
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

// hasSlot reports whether e can take a request at now: it is below its
// Capacity and has a token of its Rate.
func (e *endpoint) hasSlot(now time.Time) bool {
	return (e.ep.Capacity == 0 || e.inFlight < e.ep.Capacity) && (e.lim == nil || e.lim.TokensAt(now) >= 1)
}

// rateWaitLocked returns how long until the first endpoint that is out of
// tokens of its Rate has one again; 0 when none is. mu must be held.
func (p *Pool) rateWaitLocked(now time.Time) time.Duration {
	var wait time.Duration
	for _, e := range p.members {
		if e.lim == nil {
			continue
		}
		if tok := e.lim.TokensAt(now); tok < 1 {
			d := time.Duration((1 - tok) / float64(e.lim.Limit()) * float64(time.Second))
			if wait == 0 || d < wait {
				wait = max(d, time.Microsecond)
			}
		}
	}
	return wait
}

// load is the share of the endpoint's capacity in use; an endpoint
// without a capacity limit is never loaded.
func (e *endpoint) load() float64 {
	if e.ep.Capacity == 0 {
		return 0
	}
	return float64(e.inFlight) / float64(e.ep.Capacity)
}

func (e *endpoint) decide(r string, rule *Rule, probe bool) decision {
	c := Choice{EndpointID: e.ep.ID, Reason: r}
	if rule != nil {
		c.Rule = rule.Name
	}
	return decision{e: e, choice: c, probe: probe}
}

// decideLocked picks the endpoint for a request to host at now. It returns
// errFull when the request should wait for a slot.
func (p *Pool) decideLocked(now time.Time, host, forced, bound string) (decision, error) {
	c := &p.set.health
	rt := p.routeLocked(host)
	if forced != "" {
		e := p.byID[forced]
		switch {
		case e == nil:
			return decision{}, fmt.Errorf("%w %q", ErrUnknownEndpoint, forced)
		case rt.rule != nil && !rt.rule.eligible(e.ep):
			return decision{}, &RuleError{Rule: rt.rule.Name, Host: host, EndpointID: forced}
		case !e.hasSlot(now):
			return decision{}, errFull
		}
		return e.decide(reasonForced, rt.rule, false), nil
	}
	if bound != "" {
		e := p.byID[bound]
		if e == nil || e.draining {
			return decision{}, fmt.Errorf("%w: %q", ErrBindingUnavailable, bound)
		}
		if rt.rule != nil && !rt.rule.eligible(e.ep) {
			return decision{}, &RuleError{Rule: rt.rule.Name, Host: host, EndpointID: bound}
		}
		probe := false
		switch e.h.state(now) {
		case stateQuarantined, stateProbing:
			return decision{}, fmt.Errorf("%w: %q is quarantined", ErrBindingUnavailable, bound)
		case stateHalfOpen:
			probe = true
		}
		if !e.hasSlot(now) {
			return decision{}, errFull
		}
		return e.decide(reasonSticky, rt.rule, probe), nil
	}

	subset := rt.subset
	// A subset endpoint whose quarantine is over gets its probe first.
	for _, e := range subset {
		if e.h.state(now) == stateHalfOpen && e.hasSlot(now) {
			return e.decide(reasonProbe, rt.rule, true), nil
		}
	}
	// The healthiest subset endpoint with a slot; within a health tier
	// the least loaded, then the host's rendezvous order.
	var best *endpoint
	var bestLoad float64
	bestDegraded, usable := true, false
	for _, e := range subset {
		if e.h.state(now) != stateActive {
			continue
		}
		usable = true
		if !e.hasSlot(now) {
			continue
		}
		d, l := e.h.degraded(now, c), e.load()
		if best == nil || (bestDegraded && !d) || (bestDegraded == d && l < bestLoad) {
			best, bestLoad, bestDegraded = e, l, d
		}
	}
	if best != nil {
		return best.decide(reasonAffinity, rt.rule, false), nil
	}
	reason := reasonAffinityUnhealthy
	if usable {
		reason = reasonCapacity
	}

	// Outside the subset, among the eligible: the best tier, then the
	// host's rendezvous order. A half-open endpoint is probed only if no
	// active one has a slot.
	hh := hostHash(host)
	var out, probe *endpoint
	var outW, probeW float64
	outDegraded := true
	for _, e := range rt.eligible {
		if inSubset(subset, e) {
			continue
		}
		switch e.h.state(now) {
		case stateActive:
			usable = true
			if !e.hasSlot(now) {
				continue
			}
			d := e.h.degraded(now, c)
			w := rank(hh, e, rt.uniform)
			if out == nil || (outDegraded && !d) || (outDegraded == d && w > outW) {
				out, outW, outDegraded = e, w, d
			}
		case stateHalfOpen:
			if !e.hasSlot(now) {
				continue
			}
			if w := rank(hh, e, rt.uniform); probe == nil || w > probeW {
				probe, probeW = e, w
			}
		}
	}
	switch {
	case out != nil:
		return out.decide(reason, rt.rule, false), nil
	case probe != nil:
		return probe.decide(reasonProbe, rt.rule, true), nil
	case usable:
		return decision{}, errFull
	case rt.rule != nil:
		return decision{}, &RuleError{Rule: rt.rule.Name, Host: host}
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
// a *RuleError when the host's rule leaves no usable endpoint or excludes
// the forced or bound one, ErrClosed.
func (p *Pool) Select(ctx context.Context, host string) (Choice, error) {
	if p == nil {
		return Choice{}, ErrClosed
	}
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
