package probe

import (
	"container/heap"
	"slices"
	"sync"
)

// sched hands out the probes of a Run in input order, skipping those whose
// host already has its cap of probes in flight: a probe to a busy host
// waits while probes to other hosts go, and no worker sits idle behind it.
// Each host keeps a queue of its probes; the hosts that may take one more
// probe wait in a heap ordered by their next probe's input position, so
// that handing out a probe costs O(log hosts) however many probes wait.
// It is safe for concurrent use.
type sched struct {
	limit int // probes in flight per host; 0 means no cap

	mu     sync.Mutex // guards the fields below
	cond   *sync.Cond // signalled when a slot frees or the run ends
	queues map[string]*hostQueue
	ready  readyHeap // hosts with a queued probe and a free slot
	left   int       // probes not yet handed out
	over   bool      // the run ended: hand out nothing more
}

// hostQueue is one host's probes not yet handed out, in input order.
type hostQueue struct {
	jobs     []int
	inflight int
}

func newSched(jobs []job, limit int) *sched {
	s := &sched{limit: limit, queues: map[string]*hostQueue{}, left: len(jobs)}
	s.cond = sync.NewCond(&s.mu)
	for i, j := range jobs {
		q := s.queues[j.host]
		if q == nil {
			q = &hostQueue{}
			s.queues[j.host] = q
			s.ready = append(s.ready, readyHost{host: j.host, next: i})
		}
		q.jobs = append(q.jobs, i)
	}
	heap.Init(&s.ready)
	return s
}

// eligible reports whether q may take one more probe now.
func (s *sched) eligible(q *hostQueue) bool {
	return len(q.jobs) > 0 && (s.limit == 0 || q.inflight < s.limit)
}

// take returns the next probe whose host has a free slot, waiting for one
// while probes remain; ok is false when none remain or the run is over.
func (s *sched) take() (i int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if s.over || s.left == 0 {
			return 0, false
		}
		if len(s.ready) > 0 {
			h := heap.Pop(&s.ready).(readyHost)
			q := s.queues[h.host]
			i, q.jobs = q.jobs[0], q.jobs[1:]
			q.inflight++
			s.left--
			if s.eligible(q) {
				heap.Push(&s.ready, readyHost{host: h.host, next: q.jobs[0]})
			}
			if s.left == 0 { // the waiting workers have nothing left to wait for
				s.cond.Broadcast()
			}
			return i, true
		}
		s.cond.Wait()
	}
}

// done frees the slot of a probe to host.
func (s *sched) done(host string) {
	s.mu.Lock()
	q := s.queues[host]
	wasFull := s.limit > 0 && q.inflight == s.limit
	q.inflight--
	if wasFull && len(q.jobs) > 0 { // it was out of the heap for lack of a slot
		heap.Push(&s.ready, readyHost{host: host, next: q.jobs[0]})
	}
	s.mu.Unlock()
	s.cond.Signal()
}

// end stops the hand-out: take returns false from now on.
func (s *sched) end() {
	s.mu.Lock()
	s.over = true
	s.mu.Unlock()
	s.cond.Broadcast()
}

// rest returns the probes never handed out, in input order, once the
// workers have returned.
func (s *sched) rest() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var left []int
	for _, q := range s.queues {
		left = append(left, q.jobs...)
		q.jobs = nil
	}
	s.left = 0
	slices.Sort(left)
	return left
}

// readyHost is a host in the ready heap, keyed by its next probe's input
// position.
type readyHost struct {
	host string
	next int
}

type readyHeap []readyHost

func (h readyHeap) Len() int           { return len(h) }
func (h readyHeap) Less(i, j int) bool { return h[i].next < h[j].next }
func (h readyHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *readyHeap) Push(x any)        { *h = append(*h, x.(readyHost)) }
func (h *readyHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
