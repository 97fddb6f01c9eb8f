package redisstore

import (
	"sync"
	"time"

	"github.com/egresskit/egresskit/hoststate"
)

// leases are the pacing tokens a Store took ahead for fast hosts
// (Config.LeaseWindow): the admit script hands a caller the tokens a host
// has to spare at once, and the Store gives them to its next admissions of
// that host until they run out or the window ends.
type leases struct {
	mu sync.Mutex // guards m
	m  map[string]*lease
}

// lease is one host's tokens taken ahead.
type lease struct {
	n     int                 // tokens left
	until time.Time           // when the lease ends, by the local clock
	adm   hoststate.Admission // what each of its admissions reports
}

// maxLeases bounds the leases a Store keeps; past it, ended ones are swept
// before a new one is added, and when none has ended the new one is not
// kept.
const maxLeases = 4096

// leased takes a token of host's lease, if it has one that has not ended,
// and returns its admission.
func (s *Store) leased(host string) (hoststate.Admission, bool) {
	if s.set.lease <= 0 {
		return hoststate.Admission{}, false
	}
	l := &s.lease
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.m[host]
	if e == nil {
		return hoststate.Admission{}, false
	}
	if !s.localNow().Before(e.until) {
		delete(l.m, host)
		return hoststate.Admission{}, false
	}
	e.n--
	if e.n <= 0 {
		delete(l.m, host)
	}
	return e.adm, true
}

// grant keeps n tokens of host, taken ahead by the admission a, for the
// window.
func (s *Store) grant(host string, n int, a hoststate.Admission) {
	l := &s.lease
	now := s.localNow()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = make(map[string]*lease)
	}
	if _, ok := l.m[host]; !ok && len(l.m) >= maxLeases {
		for h, e := range l.m {
			if !now.Before(e.until) {
				delete(l.m, h)
			}
		}
		if len(l.m) >= maxLeases {
			return
		}
	}
	a.Wait = 0
	if e := l.m[host]; e != nil && now.Before(e.until) {
		// Admissions that found no token went to Redis together: their
		// leases add up, under the latest admission and window.
		e.n, e.until, e.adm = e.n+n, now.Add(s.set.lease), a
		return
	}
	l.m[host] = &lease{n: n, until: now.Add(s.set.lease), adm: a}
}

// dropLease ends host's lease: an outcome other than OK, a halt or a
// change of the host's settings is for the fleet to see first.
func (s *Store) dropLease(host string) {
	if s.set.lease <= 0 {
		return
	}
	l := &s.lease
	l.mu.Lock()
	delete(l.m, host)
	l.mu.Unlock()
}
