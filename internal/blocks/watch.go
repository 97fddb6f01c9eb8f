// Package blocks is the chain's block detector (see package blockwatch
// for the rules it applies): a Watch keeps, per host, the recent answers
// and flags a host whose answers show a block.
package blocks

import (
	"container/list"
	"fmt"
	"hash/maphash"
	"iter"
	"maps"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/egresskit/egresskit/blockwatch"
	"github.com/egresskit/egresskit/classify"
)

// answer is one counted response.
type answer struct {
	refusal bool
	status  int
	url     uint64 // hash of path and query; only of a refusal-like answer
	at      time.Time
}

// hostRecord is the record of one host.
type hostRecord struct {
	host string
	run  run // refusal-like answers since the last success
	// window holds the last Window answers, a ring once full: the oldest
	// is at window[head]. refusals counts its refusal-like answers.
	window   []answer
	head     int
	refusals int
}

// push adds a to the window, dropping the oldest answer of a full window
// of size n.
func (rec *hostRecord) push(a answer, n int) {
	if a.refusal {
		rec.refusals++
	}
	if len(rec.window) < n {
		rec.window = append(rec.window, a)
		return
	}
	if rec.window[rec.head].refusal {
		rec.refusals--
	}
	rec.window[rec.head] = a
	rec.head = (rec.head + 1) % len(rec.window)
}

// answers yields the window's answers, oldest first.
func (rec *hostRecord) answers() iter.Seq[*answer] {
	return func(yield func(*answer) bool) {
		for i := range rec.window {
			if !yield(&rec.window[(rec.head+i)%len(rec.window)]) {
				return
			}
		}
	}
}

// run summarises the refusal-like answers since the last success: what the
// run rule and its blockwatch.Evidence need, and no more, so that a host that refuses
// the same few URLs forever keeps a record of bounded size.
type run struct {
	n        int         // refusal-like answers
	urls     []uint64    // their distinct URLs, at most blockwatch.Config.Run
	statuses map[int]int // their statuses
	since    time.Time   // when the first was seen
}

func (r *run) add(a answer) {
	if r.n == 0 {
		r.since = a.at
	}
	r.n++
	if !slices.Contains(r.urls, a.url) {
		r.urls = append(r.urls, a.url)
	}
	if r.statuses == nil {
		r.statuses = map[int]int{}
	}
	r.statuses[a.status]++
}

func (r *run) reset() {
	r.n, r.urls, r.since = 0, r.urls[:0], time.Time{}
	clear(r.statuses)
}

// Watch flags hosts that refuse. It is safe for concurrent use; a nil
// *Watch flags nothing.
type Watch struct {
	cfg  blockwatch.Config
	seed maphash.Seed

	mu    sync.Mutex               // guards hosts, order and seen
	hosts map[string]*list.Element // of *hostRecord, in order
	order *list.List               // most recently seen first
	seen  map[uint64]struct{}      // scratch set of distinct URLs for judge
}

// DefaultConfig returns the configuration the zero blockwatch.Config
// means.
func DefaultConfig() blockwatch.Config {
	return blockwatch.Config{Run: 10, Window: 20, Share: 0.8, Statuses: []int{401, 403}, MaxHosts: 10000}
}

// New returns a Watch for cfg, or nil when cfg.Disabled.
func New(cfg blockwatch.Config) *Watch {
	if cfg.Disabled {
		return nil
	}
	d := DefaultConfig()
	if cfg.Run == 0 {
		cfg.Run = d.Run
	}
	cfg.Run = max(cfg.Run, 2)
	if cfg.Window == 0 {
		cfg.Window = d.Window
	}
	cfg.Window = max(cfg.Window, cfg.Run)
	if !(cfg.Share > 0) { // 0, negative or NaN
		cfg.Share = d.Share
	}
	if cfg.Statuses == nil {
		cfg.Statuses = d.Statuses
	}
	cfg.Statuses = slices.Clone(cfg.Statuses)
	if cfg.MaxHosts <= 0 {
		cfg.MaxHosts = d.MaxHosts
	}
	return &Watch{cfg: cfg, seed: maphash.MakeSeed(), hosts: map[string]*list.Element{}, order: list.New(), seen: map[uint64]struct{}{}}
}

// Observe records the answer r to a request for u on host, received at now,
// and returns the blockwatch.Evidence when it makes the host a suspected block; the
// host's record then starts afresh. It returns nil otherwise.
func (w *Watch) Observe(host string, u *url.URL, r classify.Result, now time.Time) *blockwatch.Evidence {
	if w == nil || r.Status == 0 || r.Egress || r.Outcome == classify.Canceled || r.Outcome == classify.Refused {
		return nil
	}
	// Transient and throttled answers say nothing either way; a 403 that
	// asks to slow down (Throttled) is pacing's business.
	if r.Outcome != classify.OK && r.Outcome != classify.Permanent {
		return nil
	}
	a := answer{refusal: r.Outcome == classify.Permanent && slices.Contains(w.cfg.Statuses, r.Status), status: r.Status, at: now}
	success := r.Outcome == classify.OK
	if a.refusal && u != nil { // only refusals' URLs are counted
		var h maphash.Hash
		h.SetSeed(w.seed)
		h.WriteString(u.EscapedPath())
		h.WriteByte('?')
		h.WriteString(u.RawQuery)
		a.url = h.Sum64()
	}

	w.mu.Lock()
	defer w.mu.Unlock()
	rec := w.record(host)
	switch {
	case a.refusal:
		rec.run.add(a)
	case success:
		rec.run.reset()
	}
	rec.push(a, w.cfg.Window)

	if ev := w.judge(rec); ev != nil {
		rec.run, rec.window, rec.head, rec.refusals = run{}, nil, 0, 0
		return ev
	}
	return nil
}

// judge applies the two rules to rec. It allocates only for the blockwatch.Evidence
// of a host it flags. w.mu must be held.
func (w *Watch) judge(rec *hostRecord) *blockwatch.Evidence {
	if r := &rec.run; len(r.urls) >= w.cfg.Run {
		ev := &blockwatch.Evidence{Rule: "run", Answers: r.n, Refusals: r.n, URLs: len(r.urls), Statuses: maps.Clone(r.statuses), Since: r.since}
		ev.Reason = fmt.Sprintf("%d refusal-like answers (%s) to %d distinct URLs with no success in between",
			ev.Refusals, statusList(ev.Statuses), ev.URLs)
		return ev
	}
	if w.cfg.Share > 1 || len(rec.window) < w.cfg.Window {
		return nil
	}
	refusals := rec.refusals
	if float64(refusals) < w.cfg.Share*float64(len(rec.window)) {
		return nil
	}
	clear(w.seen)
	for a := range rec.answers() {
		if a.refusal {
			w.seen[a.url] = struct{}{}
		}
	}
	urls := len(w.seen)
	if urls < max(2, w.cfg.Run/2) {
		return nil
	}
	ev := &blockwatch.Evidence{Rule: "shift", Answers: len(rec.window), Refusals: refusals, URLs: urls, Statuses: map[int]int{}}
	for a := range rec.answers() {
		if !a.refusal {
			continue
		}
		if len(ev.Statuses) == 0 {
			ev.Since = a.at
		}
		ev.Statuses[a.status]++
	}
	ev.Reason = fmt.Sprintf("%d of the last %d answers refusal-like (%s), to %d distinct URLs",
		ev.Refusals, ev.Answers, statusList(ev.Statuses), urls)
	return ev
}

// statusList renders counts as "403×9, 401×1", statuses in order.
func statusList(m map[int]int) string {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	s := ""
	for i, k := range keys {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%d×%d", k, m[k])
	}
	return s
}

// record returns host's record, creating it (and forgetting the least
// recently seen host beyond MaxHosts). w.mu must be held.
func (w *Watch) record(host string) *hostRecord {
	if e, ok := w.hosts[host]; ok {
		w.order.MoveToFront(e)
		return e.Value.(*hostRecord)
	}
	rec := &hostRecord{host: host}
	w.hosts[host] = w.order.PushFront(rec)
	for w.order.Len() > w.cfg.MaxHosts {
		old := w.order.Back()
		w.order.Remove(old)
		delete(w.hosts, old.Value.(*hostRecord).host)
	}
	return rec
}

// Forget drops host's record, as when an operator resumes it.
func (w *Watch) Forget(host string) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if e, ok := w.hosts[host]; ok {
		w.order.Remove(e)
		delete(w.hosts, host)
	}
}

// Len returns how many hosts the Watch remembers.
func (w *Watch) Len() int {
	if w == nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.hosts)
}
