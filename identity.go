package egresskit

import (
	"errors"
	"sync"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/internal/robotstxt"
	"github.com/egresskit/egresskit/internal/settle"
)

// ErrTooManyAgents is returned for a request whose User-Agent would be the
// Transport's (maxAgents+1)-th distinct one. A crawler has one identity
// (see Config.UserAgent); rotating User-Agents to look like many clients is
// not something this chain helps with.
var ErrTooManyAgents = errors.New("egresskit: too many distinct User-Agents")

// maxAgents bounds the identities one Transport keeps.
const maxAgents = 16

// identity is what the chain keeps for one User-Agent that requests are
// sent with: the robots.txt checker that judges for its agent token (and
// fetches robots.txt with it), and the classifier that recognises refusals
// naming that token. Every request is judged for the User-Agent it is
// actually sent with.
type identity struct {
	robots   *robotstxt.Checker // nil with IgnoreRobots
	classify settle.Transport   // classifies over egress or base
}

// classifyHooks reaches package classify's plumbing.
var classifyHooks = settle.Get[classify.Result, classify.Config]()

// identities holds the identities of one Transport: the configured one,
// read without a lock, and up to maxAgents others that requests brought
// (Colly, for one, sets its own User-Agent on every request).
type identities struct {
	defUA string
	def   *identity
	build func(ua string) *identity

	mu sync.Mutex // guards m
	m  map[string]*identity
}

func (ids *identities) of(ua string) (*identity, error) {
	if ua == ids.defUA {
		return ids.def, nil
	}
	ids.mu.Lock()
	defer ids.mu.Unlock()
	if id := ids.m[ua]; id != nil {
		return id, nil
	}
	if len(ids.m) >= maxAgents {
		return nil, ErrTooManyAgents
	}
	if ids.m == nil {
		ids.m = make(map[string]*identity)
	}
	id := ids.build(ua)
	ids.m[ua] = id
	return id, nil
}

// newIdentity builds the identity of ua over the transports of t.
func (t *Transport) newIdentity(ua string) *identity {
	id := &identity{}
	if !t.cfg.IgnoreRobots {
		rc := t.cfg.Robots
		rc.UserAgent = ua
		if rc.Transport == nil {
			rc.Transport = t.base
			if t.cfg.Egress != nil {
				rc.Transport = robotsThroughEgress{t.cfg.Egress}
			}
		}
		id.robots = robotstxt.New(rc)
	}
	cc := t.cfg.Classify
	cc.AgentToken = robotstxt.AgentToken(ua)
	id.classify = classifyHooks.NewTransport(t.send, cc)
	return id
}
