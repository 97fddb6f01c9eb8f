package probe

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

func schedJobs(hosts ...string) []job {
	jobs := make([]job, len(hosts))
	for i, h := range hosts {
		jobs[i] = job{host: h}
	}
	return jobs
}

// TestSchedHandsOutEveryJobOnce runs workers against the scheduler inside a
// synctest bubble: every job is handed out once, each host's jobs in input
// order, never more than the cap in flight per host, and every worker
// returns once the jobs are out (a worker left waiting would deadlock the
// bubble and fail the test).
func TestSchedHandsOutEveryJobOnce(t *testing.T) {
	hosts := []string{"a", "a", "b", "a", "c", "a", "b", "a", "b", "c", "a"}
	for _, tt := range []struct{ limit, workers int }{{2, 4}, {1, 8}, {0, 3}, {3, 1}} {
		t.Run(fmt.Sprintf("cap %d, %d workers", tt.limit, tt.workers), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				jobs := schedJobs(hosts...)
				s := newSched(jobs, tt.limit)
				var mu sync.Mutex
				inflight, peak := map[string]int{}, map[string]int{}
				var order []int
				var wg sync.WaitGroup
				for range tt.workers {
					wg.Go(func() {
						for {
							i, ok := s.take()
							if !ok {
								return
							}
							h := jobs[i].host
							mu.Lock()
							inflight[h]++
							peak[h] = max(peak[h], inflight[h])
							order = append(order, i)
							mu.Unlock()
							time.Sleep(time.Millisecond) // fake time: the other workers pile up on the scheduler
							mu.Lock()
							inflight[h]--
							mu.Unlock()
							s.done(h)
						}
					})
				}
				wg.Wait()
				if got := slices.Sorted(slices.Values(order)); !slices.Equal(got, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}) {
					t.Fatalf("jobs handed out %v, want each of 0..10 once", order)
				}
				for h, p := range peak {
					if tt.limit > 0 && p > tt.limit {
						t.Errorf("host %s: %d in flight, cap %d", h, p, tt.limit)
					}
				}
				for _, h := range []string{"a", "b", "c"} {
					var got []int
					for _, i := range order {
						if jobs[i].host == h {
							got = append(got, i)
						}
					}
					if !slices.IsSorted(got) {
						t.Errorf("host %s jobs handed out in order %v, want input order", h, got)
					}
				}
				if rest := s.rest(); len(rest) != 0 {
					t.Errorf("rest() = %v after every job was handed out", rest)
				}
			})
		})
	}
}

// TestSchedEnd: after end, waiting workers return and rest lists the jobs
// never handed out, in input order.
func TestSchedEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		jobs := schedJobs("a", "a", "b", "a", "b")
		s := newSched(jobs, 1)
		first, _ := s.take()  // a: 0
		second, _ := s.take() // b: 2
		var wg sync.WaitGroup
		wg.Go(func() {
			if i, ok := s.take(); ok { // both hosts full: waits until end
				t.Errorf("take after end = %d, want none", i)
			}
		})
		synctest.Wait()
		s.end()
		wg.Wait()
		if first != 0 || second != 2 {
			t.Errorf("first takes = %d, %d; want 0 and 2", first, second)
		}
		if got := s.rest(); !slices.Equal(got, []int{1, 3, 4}) {
			t.Errorf("rest() = %v, want [1 3 4]", got)
		}
	})
}

// BenchmarkSched measures handing out one probe and freeing its slot, with
// 10,000 probes spread over few or many hosts.
func BenchmarkSched(b *testing.B) {
	for _, c := range []struct {
		name         string
		hosts, limit int
	}{{"1 host cap 2", 1, 2}, {"1000 hosts cap 2", 1000, 2}, {"1000 hosts no cap", 1000, 0}} {
		hosts := make([]string, 10_000)
		for i := range hosts {
			hosts[i] = fmt.Sprintf("h%d", i%c.hosts)
		}
		jobs := schedJobs(hosts...)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s := newSched(jobs, c.limit)
				for {
					i, ok := s.take()
					if !ok {
						break
					}
					s.done(jobs[i].host)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(jobs)), "ns/probe")
		})
	}
}
