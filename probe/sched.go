package probe

import "sync"

// sched hands out the probes of a Run in input order, skipping those whose
// host already has its cap of probes in flight: a probe to a busy host
// waits while probes to other hosts go, and no worker sits idle behind it.
// It is safe for concurrent use.
type sched struct {
	limit int // probes in flight per host; 0 means no cap

	mu       sync.Mutex // guards the fields below
	cond     *sync.Cond // signalled when a slot frees or the run ends
	pending  []int      // indices of the jobs not yet handed out, in order
	inflight map[string]int
	over     bool // the run ended: hand out nothing more
}

func newSched(jobs []job, limit int) *sched {
	s := &sched{limit: limit, pending: make([]int, len(jobs)), inflight: map[string]int{}}
	s.cond = sync.NewCond(&s.mu)
	for i := range jobs {
		s.pending[i] = i
	}
	return s
}

// take returns the next job whose host has a free slot, waiting for one
// while jobs remain; ok is false when none remain or the run is over.
func (s *sched) take(jobs []job) (i int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if s.over || len(s.pending) == 0 {
			return 0, false
		}
		for k, i := range s.pending {
			h := jobs[i].host
			if s.limit > 0 && s.inflight[h] >= s.limit {
				continue
			}
			s.inflight[h]++
			s.pending = append(s.pending[:k], s.pending[k+1:]...)
			return i, true
		}
		s.cond.Wait()
	}
}

// done frees the slot of a job to host.
func (s *sched) done(host string) {
	s.mu.Lock()
	s.inflight[host]--
	s.mu.Unlock()
	s.cond.Broadcast()
}

// end stops the hand-out: take returns false from now on.
func (s *sched) end() {
	s.mu.Lock()
	s.over = true
	s.mu.Unlock()
	s.cond.Broadcast()
}

// rest returns the jobs never handed out, once the workers have returned.
func (s *sched) rest() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	left := s.pending
	s.pending = nil
	return left
}
