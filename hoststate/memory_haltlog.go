package hoststate

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/egresskit/egresskit/hostkey"
	"github.com/egresskit/egresskit/internal/haltrec"
)

// maxRecorded bounds the hosts whose records a Memory keeps (a few hundred
// MiB at worst, every record of every host at its size bound); past it,
// the records of a host no longer halted make room, and a host halted when
// none can is halted without a record.
const maxRecorded = 4096

// records is a Memory's HaltLog.
type records struct {
	mu    sync.Mutex // guards hosts
	hosts map[string]*history
}

// history is one host's records, oldest first, at most
// haltrec.MaxHistory of each kind.
type history struct {
	halts []Halt
	notes []Note
}

func (h *history) trim() {
	if n := len(h.halts) - haltrec.MaxHistory; n > 0 {
		h.halts = slices.Delete(h.halts, 0, n)
	}
	if n := len(h.notes) - haltrec.MaxHistory; n > 0 {
		h.notes = slices.Delete(h.notes, 0, n)
	}
}

// history returns host's history, making room for it; m.recs.mu is held.
func (m *memory) history(host string) *history {
	r := &m.recs
	if r.hosts == nil {
		r.hosts = make(map[string]*history)
	}
	if h, ok := r.hosts[host]; ok {
		return h
	}
	if len(r.hosts) >= maxRecorded {
		for k := range r.hosts {
			if _, halted := m.breakers.Halted(k); !halted {
				delete(r.hosts, k)
				break
			}
		}
	}
	h := &history{}
	if len(r.hosts) < maxRecorded {
		r.hosts[host] = h
	}
	return h
}

// PutHalt records the evidence of a halt; see HaltLog. It fails only for
// a Host that is not a host (hostkey's errors).
func (m *memory) PutHalt(_ context.Context, h Halt) error {
	key, err := hostkey.Parse(h.Host, hostkey.ByHost)
	if err != nil {
		return err
	}
	h.Host = key
	if h.Time.IsZero() {
		h.Time = time.Now()
	}
	h.Worker = haltrec.Clip(h.Worker, haltrec.MaxBy)
	h.Reason = haltrec.Clip(h.Reason, haltrec.MaxText)
	h.Evidence = haltrec.Clip(h.Evidence, haltrec.MaxText)
	h.URL = haltrec.Clip(h.URL, haltrec.MaxURL)
	h.BodyHead = haltrec.Clip(h.BodyHead, haltrec.MaxBodyHead)
	h.Markers = haltrec.Markers(h.Markers)
	m.recs.mu.Lock()
	defer m.recs.mu.Unlock()
	hist := m.history(key)
	hist.halts = append(hist.halts, h)
	hist.trim()
	return nil
}

// AddNote records an operator's note; see HaltLog. It fails only for a
// Host that is not a host (hostkey's errors).
func (m *memory) AddNote(_ context.Context, n Note) error {
	key, err := hostkey.Parse(n.Host, hostkey.ByHost)
	if err != nil {
		return err
	}
	n.Host = key
	if n.Time.IsZero() {
		n.Time = time.Now()
	}
	n.By = haltrec.Clip(n.By, haltrec.MaxBy)
	n.Text = haltrec.Clip(n.Text, haltrec.MaxText)
	m.recs.mu.Lock()
	defer m.recs.mu.Unlock()
	hist := m.history(key)
	hist.notes = append(hist.notes, n)
	hist.trim()
	return nil
}

// Halts returns the latest record of every host halted now, newest first;
// see HaltLog. A Memory lists only the halted hosts it has a record of. It
// never fails.
func (m *memory) Halts(_ context.Context, limit int) ([]Halt, error) {
	if limit <= 0 {
		limit = 1000
	}
	m.recs.mu.Lock()
	var out []Halt
	for host, h := range m.recs.hosts {
		if len(h.halts) == 0 {
			continue
		}
		if since, halted := m.breakers.Halted(host); halted {
			last := h.halts[len(h.halts)-1]
			if last.Time.IsZero() {
				last.Time = since
			}
			out = append(out, last)
		}
	}
	m.recs.mu.Unlock()
	slices.SortFunc(out, func(a, b Halt) int { return b.Time.Compare(a.Time) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// History returns host's records, newest first; see HaltLog. Its errors
// are hostkey's.
func (m *memory) History(_ context.Context, host string) ([]Halt, []Note, error) {
	key, err := hostkey.Parse(host, hostkey.ByHost)
	if err != nil {
		return nil, nil, err
	}
	m.recs.mu.Lock()
	defer m.recs.mu.Unlock()
	h, ok := m.recs.hosts[key]
	if !ok {
		return nil, nil, nil
	}
	halts, notes := slices.Clone(h.halts), slices.Clone(h.notes)
	slices.Reverse(halts)
	slices.Reverse(notes)
	return halts, notes, nil
}
