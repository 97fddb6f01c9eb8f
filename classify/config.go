package classify

import (
	"github.com/egresskit/egresskit/internal/settle"

	"slices"
	"strings"
	"sync"
	"time"
)

// The defaults of Config, kept with the hooks the chain's layers share.
const (
	defaultPeekSize    = settle.DefaultPeekSize
	defaultOKPeekSize  = settle.DefaultOKPeekSize
	defaultPeekTimeout = settle.DefaultPeekTimeout
)

// maxPeekSize caps Config.PeekSize.
const maxPeekSize = 1 << 20

// Config configures how the chain classifies responses; a crawler author
// sets it as egresskit.Config.Classify. The zero value is ready to use.
type Config struct {
	// AgentToken is the crawler's product token, as in its User-Agent and
	// robots.txt group. A 401 or 403 whose body head contains it (ASCII
	// case-insensitive) is Refused: the site is talking about us. Empty
	// disables the check.
	AgentToken string
	// Markers are added to DefaultMarkers.
	Markers []Marker
	// PeekSize is how many bytes at the start of a body are inspected.
	// 0 means 4096; a negative value disables body
	// inspection; values above 1 MiB are capped at 1 MiB.
	PeekSize int
	// OKPeekSize is how many bytes of a 2xx answer's body are inspected,
	// at most PeekSize. A challenge or block page served with a success
	// status says so in its first bytes (DefaultMarkers states how many
	// each family needs), so an ordinary page is read and searched no
	// further than that. Markers whose Statuses name a 2xx status (AWS
	// WAF's 202) read PeekSize bytes of answers with that status. The
	// chain reads these bytes when the caller first reads the body, not in
	// RoundTrip (see Of). 0 means 1024; a negative value means PeekSize.
	OKPeekSize int
	// PeekTimeout bounds how long the body head is waited for once the
	// response headers are in: past it, the response is classified on the
	// head that arrived (Result.PeekCut); the caller still receives every
	// byte. It bounds RoundTrip, and Of asked about an unread 2xx answer,
	// not the caller's own first read of a 2xx body. 0 means 1s; negative,
	// no time bound (the request's context still bounds it).
	PeekTimeout time.Duration
	// Now returns the current time; HTTP-date and Unix-time waits are
	// measured from it. Nil means time.Now.
	Now func() time.Time
}

// A classifier turns one attempt's response or error into a Result. It is
// safe for concurrent use.
type classifier struct {
	headers   []matcher  // markers without a body condition, in table order
	bodies    []matcher  // markers with a body condition, in table order
	ac        *automaton // every needle of bodies, the token and secondaryRateLimit
	needles   int        // how many needles ac finds
	token     int        // needle id of the agent token; noNeedle when none
	secondary int        // needle id of secondaryRateLimit
	bodyAny   bool       // some body marker applies to every status
	jsonAny   bool       // some body marker applies to JSON bodies
	skip      *skipScan  // for statuses not in fullScan (see compileSkip); may be nil
	fullScan  []int      // 401, 403 and the statuses body markers name
	peekSize  int
	okPeek    int   // bytes of a 2xx body inspected, at most peekSize
	fullOK    []int // 2xx statuses named by a marker: PeekSize bytes read
	// peekTimeout bounds the wait for the body head; <= 0: no bound.
	peekTimeout time.Duration
	now         func() time.Time
	heads       sync.Pool // *[]byte of peekSize: peeked heads handed to bodies
	decoded     sync.Pool // *[]byte of peekSize: decoded heads of gzip and deflate bodies
	timers      sync.Pool // *time.Timer: stopped peek budget timers
}

// defaultClassifier serves Of and nil Classifiers; it is never modified.
var defaultClassifier = newClassifier(Config{})

// New returns a classifier for cfg. Markers with neither Header nor Body
// are ignored.
func newClassifier(cfg Config) *classifier {
	c := &classifier{
		peekSize:    cfg.PeekSize,
		peekTimeout: cfg.PeekTimeout,
		now:         cfg.Now,
	}
	var ns needles
	for _, m := range compile(append(DefaultMarkers(), cfg.Markers...), &ns) {
		if m.body == noNeedle {
			c.headers = append(c.headers, m)
			continue
		}
		c.bodies = append(c.bodies, m)
		c.bodyAny = c.bodyAny || len(m.statuses) == 0
		for _, st := range m.statuses {
			if st >= 200 && st < 300 && !slices.Contains(c.fullOK, st) {
				c.fullOK = append(c.fullOK, st)
			}
		}
		c.jsonAny = c.jsonAny || m.json
	}
	c.token = ns.id(strings.TrimSpace(cfg.AgentToken))
	c.secondary = ns.id(secondaryRateLimit)
	c.ac = newAutomaton(ns.list)
	c.skip, c.fullScan = c.compileSkip(ns.list)
	c.needles = len(ns.list)
	switch {
	case c.peekSize == 0:
		c.peekSize = defaultPeekSize
	case c.peekSize > maxPeekSize:
		c.peekSize = maxPeekSize
	}
	switch {
	case cfg.OKPeekSize == 0:
		c.okPeek = min(defaultOKPeekSize, c.peekSize)
	case cfg.OKPeekSize < 0:
		c.okPeek = c.peekSize
	default:
		c.okPeek = min(cfg.OKPeekSize, c.peekSize)
	}
	if c.now == nil {
		c.now = time.Now
	}
	if c.peekTimeout == 0 {
		c.peekTimeout = defaultPeekTimeout
	}
	size := max(c.peekSize, 0)
	c.heads.New = func() any { b := make([]byte, size); return &b }
	c.decoded.New = func() any { b := make([]byte, size); return &b }
	return c
}

// compileSkip builds the search scan uses for a status no body marker
// names: a marker that applies to every status matches only when both of
// its needles occur, so it is enough to look for one of them, the longer
// (its Body on a tie), and to run the automaton only when one is found.
// It returns nil when those needles are too short for a skipScan.
func (c *classifier) compileSkip(list []string) (*skipScan, []int) {
	full := []int{401, 403}
	var ids []int
	for _, m := range c.bodies {
		for _, st := range m.statuses {
			if !slices.Contains(full, st) {
				full = append(full, st)
			}
		}
		if len(m.statuses) > 0 {
			continue
		}
		id := m.body
		if m.also != noNeedle && len(list[m.also]) > len(list[id]) {
			id = m.also
		}
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	gates := make([]string, len(ids))
	for i, id := range ids {
		gates[i] = list[id]
	}
	return newSkipScan(gates, ids), full
}
