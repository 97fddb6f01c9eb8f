package probe

import (
	"fmt"
	"net/url"
	"strconv"

	"github.com/egresskit/egresskit/egress"
	"github.com/egresskit/egresskit/internal/probeinput"
)

// direct is the ID of the egress without a proxy.
const direct = probeinput.Direct

// exit is one egress of a Run.
type exit struct {
	id     string
	raw    string            // the proxy URL as given, or "direct"
	proxy  *url.URL          // nil for direct
	shown  string            // proxy URL without credentials; "" for direct
	labels map[string]string // the endpoint's labels, for Options.Rules
}

// job is one probe to send.
type job struct {
	url   string // as given, for the request
	shown string // redacted, for the report
	host  string
	exit  *exit
	rule  string // the egress rule governing host, "" for none
}

// plan is a validated Run: its egresses and its probes. Building it does
// no I/O; every input error surfaces here, before any request.
type plan struct {
	exits []*exit
	jobs  []job
	scrub scrubber
}

// newPlan validates targets and proxies and lays out the probes.
func newPlan(targets []Target, s settings) (*plan, error) {
	if len(targets) == 0 {
		return nil, ErrNoTargets
	}
	p := &plan{}
	rp, err := newRulePlan(s)
	if err != nil {
		return nil, err
	}
	byID := map[string]*exit{}
	byURL := map[string]*exit{}
	var pool []*exit // Options.Proxies, in order

	add := func(e *exit) {
		p.exits = append(p.exits, e)
		byID[e.id] = e
	}
	for _, ep := range s.Proxies {
		if ep.ID == "" {
			return nil, &InvalidProxyError{Err: fmt.Errorf("%w: empty endpoint ID", probeinput.ErrSyntax)}
		}
		if byID[ep.ID] != nil {
			return nil, &InvalidProxyError{ID: ep.ID, Err: fmt.Errorf("%w: duplicate endpoint ID", probeinput.ErrSyntax)}
		}
		e, err := newExit(ep.ID, ep.Proxy)
		if err != nil {
			return nil, &InvalidProxyError{ID: ep.ID, Err: err}
		}
		if ep.ID == direct && e.proxy != nil {
			return nil, &InvalidProxyError{ID: ep.ID, Err: fmt.Errorf("%w: ID %q is reserved for no proxy", probeinput.ErrSyntax, direct)}
		}
		e.labels = ep.Labels
		p.scrub.add(e.proxy)
		add(e)
		pool = append(pool, e)
	}
	directExit := func() *exit {
		if e := byID[direct]; e != nil {
			return e
		}
		e := &exit{id: direct, raw: direct}
		add(e)
		return e
	}
	// exitFor resolves a Target.Egress that is not empty.
	exitFor := func(i int, eg string) (*exit, error) {
		switch {
		case !probeinput.IsProxyURL(eg):
			if e := byID[eg]; e != nil {
				return e, nil
			}
			return nil, &TargetError{Index: i, Err: fmt.Errorf("%w %q", probeinput.ErrUnknownEgress, eg)}
		case eg == direct:
			return directExit(), nil
		case byURL[eg] != nil:
			return byURL[eg], nil
		}
		e, err := newExit("", eg)
		if err != nil {
			return nil, &InvalidProxyError{Err: fmt.Errorf("target %d: %w", i, err)}
		}
		// An ad-hoc proxy is named by its redacted URL, made unique.
		e.id = e.shown
		for n := 2; byID[e.id] != nil; n++ {
			e.id = e.shown + "#" + strconv.Itoa(n)
		}
		p.scrub.add(e.proxy)
		byURL[eg] = e
		add(e)
		return e, nil
	}

	type checked struct {
		t     Target
		u     *url.URL
		key   string
		shown string
		exit  *exit // nil: decided below
		rule  *egress.Rule
	}
	cs := make([]checked, len(targets))
	for i, t := range targets {
		u, key, err := probeinput.TargetURL(t.URL)
		if err != nil {
			return nil, &TargetError{Index: i, URL: showURL(t.URL), Err: err}
		}
		p.scrub.add(u)
		cs[i] = checked{t: t, u: u, key: key, shown: redactURL(u), rule: rp.match(u.Hostname())}
		if t.Egress != "" {
			if cs[i].exit, err = exitFor(i, t.Egress); err != nil {
				return nil, err
			}
			if !s.Matrix && !allows(cs[i].rule, cs[i].exit) {
				return nil, excluded(i, cs[i].shown, cs[i].rule, cs[i].exit)
			}
		}
	}
	mk := func(c checked, e *exit) job {
		j := job{url: c.t.URL, shown: c.shown, host: c.key, exit: e}
		if c.rule != nil {
			j.rule = c.rule.Name
		}
		return j
	}
	if s.Matrix {
		if len(p.exits) == 0 {
			directExit()
		}
		if n := len(cs) * len(p.exits); n > probeinput.MaxProbes {
			return nil, fmt.Errorf("%w: %d targets x %d egresses = %d (limit %d)", ErrTooManyProbes, len(cs), len(p.exits), n, probeinput.MaxProbes)
		}
		for _, c := range cs {
			for _, e := range p.exits {
				if allows(c.rule, e) { // never through an excluded egress
					p.jobs = append(p.jobs, mk(c, e))
				}
			}
		}
		return p, nil
	}
	if len(cs) > probeinput.MaxProbes {
		return nil, fmt.Errorf("%w: %d targets (limit %d)", ErrTooManyProbes, len(cs), probeinput.MaxProbes)
	}
	next := 0
	for i, c := range cs {
		e := c.exit
		switch {
		case e != nil:
		case len(pool) > 0:
			// The next of the pool in turn that the host's rule allows.
			for range pool {
				cand := pool[next%len(pool)]
				next++
				if allows(c.rule, cand) {
					e = cand
					break
				}
			}
			if e == nil {
				return nil, excluded(i, c.shown, c.rule, nil)
			}
		default:
			e = directExit()
			if !allows(c.rule, e) {
				return nil, excluded(i, c.shown, c.rule, e)
			}
		}
		p.jobs = append(p.jobs, mk(c, e))
	}
	return p, nil
}

// newExit validates a proxy URL ("direct", or "" for an Endpoint, meaning
// no proxy, as in package egress).
func newExit(id, raw string) (*exit, error) {
	if raw == "" && id != "" {
		raw = direct
	}
	u, err := probeinput.ProxyURL(raw)
	if err != nil {
		return nil, err
	}
	e := &exit{id: id, raw: raw, proxy: u}
	if u == nil {
		e.raw = direct
	}
	if u != nil {
		e.shown = redactURL(u)
	}
	return e, nil
}
