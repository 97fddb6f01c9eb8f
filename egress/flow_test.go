package egress_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/egresskit/egresskit/egress"
)

// blockingTarget answers only when release is closed, after signalling
// each arrival; it writes the first half of its body before blocking so a
// response can be in flight with its body half read.
type blockingTarget struct {
	arrived chan struct{}
	release chan struct{}
}

const fullBody = "first half|second half"

func newBlockingTarget(t *testing.T, n int) (*blockingTarget, string) {
	t.Helper()
	b := &blockingTarget{arrived: make(chan struct{}, n), release: make(chan struct{})}
	srv := newTargetHandler(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "first half|")
		w.(http.Flusher).Flush()
		b.arrived <- struct{}{}
		select {
		case <-b.release:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, "second half")
	}), false)
	t.Cleanup(b.open) // never leave a handler blocked
	return b, srv.URL
}

func (b *blockingTarget) open() {
	select {
	case <-b.release:
	default:
		close(b.release)
	}
}

// TestCapacity sends 10 concurrent requests for one host through endpoints
// of capacity 2: no proxy ever has more than 2 in flight, the subset's
// overflow goes outside it with reason capacity, and the rest wait.
func TestCapacity(t *testing.T) {
	target, url := newBlockingTarget(t, 10)
	proxies := map[string]*httpProxy{"a": newHTTPProxy(t, "pa"), "b": newHTTPProxy(t, "pb"), "c": newHTTPProxy(t, "pc")}
	var eps []egress.Endpoint
	for _, id := range []string{"a", "b", "c"} {
		eps = append(eps, egress.Endpoint{ID: id, Proxy: proxies[id].URL(""), Capacity: 2})
	}
	pool := newPool(t, egress.Config{Endpoints: eps})

	results := make([]result, 10)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() { results[i] = fetch(context.Background(), pool, url) })
	}
	for range 6 {
		<-target.arrived
	}
	for _, st := range pool.Endpoints() {
		if st.InFlight != 2 {
			t.Errorf("endpoint %s in flight = %d, want 2 (every slot taken)", st.ID, st.InFlight)
		}
	}
	if _, err := pool.Select(context.Background(), "127.0.0.1"); !errors.Is(err, egress.ErrAtCapacity) {
		t.Errorf("Select with every slot taken = %v, want ErrAtCapacity", err)
	}
	target.open()
	wg.Wait()

	reasons := map[string]int{}
	for i, r := range results {
		if r.err != nil || r.body != fullBody {
			t.Fatalf("request %d = %q, %v; want the full body", i, r.body, r.err)
		}
		reasons[r.choice.Reason]++
	}
	if reasons[egress.ReasonCapacity] == 0 || reasons[egress.ReasonAffinity] == 0 {
		t.Errorf("reasons = %v, want both affinity and capacity", reasons)
	}
	for id, p := range proxies {
		if _, _, _, m := p.counts(); m > 2 {
			t.Errorf("proxy of %s had %d requests in flight, want at most 2", id, m)
		}
	}
}

// waiting returns a channel that receives once each time a request
// through p starts waiting for a slot.
func waiting(p *egress.Pool) <-chan struct{} {
	ch := make(chan struct{}, 16)
	egress.OnWait(p, func() { ch <- struct{}{} })
	return ch
}

// guard is a context that ends a request which would otherwise hang the
// test when a waiter is never woken.
func guard(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestSlotHeldUntilBodyClosed checks that a slot is taken from selection
// until the response body is closed, that a full pool fails fast with
// FailWhenFull, that a request cancelled while it waits returns at once
// with context.Canceled, and that a waiting request proceeds when the
// body is closed. The waits are observed (egress.OnWait), not assumed.
func TestSlotHeldUntilBodyClosed(t *testing.T) {
	target := newTarget(t, http.StatusOK, false)
	for _, failFast := range []bool{false, true} {
		t.Run(fmt.Sprintf("FailWhenFull=%v", failFast), func(t *testing.T) {
			pool := newPool(t, egress.Config{
				Endpoints:    []egress.Endpoint{{ID: "only", Proxy: "direct", Capacity: 1}},
				FailWhenFull: failFast,
			})
			waits := waiting(pool)
			req, _ := http.NewRequest(http.MethodGet, target.URL, nil)
			resp, err := pool.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			if got := stateOf(t, pool, "only").InFlight; got != 1 {
				t.Errorf("in flight with the body open = %d, want 1", got)
			}
			if failFast {
				r := fetch(guard(t), pool, target.URL)
				var ns interface{ NotSent() bool }
				if !errors.Is(r.err, egress.ErrAtCapacity) || !errors.As(r.err, &ns) || !ns.NotSent() {
					t.Errorf("second request = %v, want ErrAtCapacity in a not-sent error", r.err)
				}
				if len(waits) != 0 {
					t.Errorf("a request waited with FailWhenFull")
				}
			} else {
				// Cancelled while it waits.
				ctx, cancel := context.WithCancel(guard(t))
				done := make(chan result, 1)
				go func() { done <- fetch(ctx, pool, target.URL) }()
				<-waits
				cancel()
				if r := <-done; !errors.Is(r.err, context.Canceled) {
					t.Errorf("request cancelled while waiting = %v, want context.Canceled", r.err)
				}
			}

			// A waiting request proceeds once the body is closed.
			done := make(chan result, 1)
			if !failFast {
				go func() { done <- fetch(guard(t), pool, target.URL) }()
				<-waits
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			resp.Body.Close() // a second Close gives nothing back twice
			if !failFast {
				if r := <-done; r.err != nil || r.status != http.StatusOK {
					t.Errorf("waiting request = %d, %v; want 200", r.status, r.err)
				}
			}
			if got := stateOf(t, pool, "only").InFlight; got != 0 {
				t.Errorf("in flight after Close = %d, want 0", got)
			}
		})
	}
}

// TestSlotReleasedOnError: a request that fails to send gives its slot
// back at once: the next one through the same full-capacity endpoint fails
// on its own dial, not for want of a slot.
func TestSlotReleasedOnError(t *testing.T) {
	pool := newPool(t, egress.Config{
		Endpoints:    []egress.Endpoint{{ID: "only", Proxy: "direct", Capacity: 1}},
		FailWhenFull: true,
	})
	for i := range 3 {
		r := fetch(guard(t), pool, "http://127.0.0.1:1/") // nothing listens on port 1
		if r.err == nil || errors.Is(r.err, egress.ErrAtCapacity) {
			t.Fatalf("request %d = %d, %v; want its dial error", i+1, r.status, r.err)
		}
		if got := stateOf(t, pool, "only").InFlight; got != 0 {
			t.Fatalf("in flight after a failed request = %d, want 0", got)
		}
	}
}

// TestRemoveAndDrainMidFlight removes or drains the endpoint carrying a
// request whose body is half read: the request completes, new requests go
// elsewhere, and nothing is dropped.
func TestRemoveAndDrainMidFlight(t *testing.T) {
	for _, op := range []string{"remove", "drain"} {
		t.Run(op, func(t *testing.T) {
			target, url := newBlockingTarget(t, 1)
			pa, pb := newHTTPProxy(t, "pa"), newHTTPProxy(t, "pb")
			pool := newPool(t, egress.Config{Endpoints: []egress.Endpoint{{ID: "a", Proxy: pa.URL("")}, {ID: "b", Proxy: pb.URL("")}}})
			ctx := context.Background()
			first, _ := pool.Select(ctx, "127.0.0.1")
			done := make(chan result, 1)
			go func() { done <- fetch(ctx, pool, url) }()
			<-target.arrived

			var err error
			if op == "remove" {
				err = pool.Remove(first.EndpointID)
			} else {
				err = pool.Drain(first.EndpointID)
			}
			if err != nil {
				t.Fatal(err)
			}
			c, err := pool.Select(ctx, "127.0.0.1")
			if err != nil || c.EndpointID == first.EndpointID || c.Reason != egress.ReasonAffinity {
				t.Errorf("Select after %s = %v, %v; want the other endpoint (affinity)", op, c, err)
			}
			_, err = pool.Select(egress.WithBinding(ctx, first.EndpointID), "127.0.0.1")
			if !errors.Is(err, egress.ErrBindingUnavailable) {
				t.Errorf("bound Select after %s = %v, want ErrBindingUnavailable", op, err)
			}
			listed := false
			for _, st := range pool.Endpoints() {
				if st.ID == first.EndpointID {
					listed = true
					if !st.Draining || st.InFlight != 1 {
						t.Errorf("drained endpoint state = %+v, want draining with 1 in flight", st)
					}
				}
			}
			if listed != (op == "drain") {
				t.Errorf("endpoint listed after %s = %v", op, listed)
			}

			target.open()
			if r := <-done; r.err != nil || r.body != fullBody || r.choice.EndpointID != first.EndpointID {
				t.Fatalf("in-flight request = %v %q, %v; want the full body through %s", r.choice, r.body, r.err, first.EndpointID)
			}
			if op == "remove" {
				if err := pool.Remove(first.EndpointID); !errors.Is(err, egress.ErrUnknownEndpoint) {
					t.Errorf("second Remove = %v, want ErrUnknownEndpoint", err)
				}
			}
		})
	}
}

// TestMembershipChurn adds and removes endpoints while many requests run:
// every request succeeds.
func TestMembershipChurn(t *testing.T) {
	target := newTarget(t, http.StatusOK, false)
	proxy := newHTTPProxy(t, "shared")
	pool := newPool(t, egress.Config{Endpoints: []egress.Endpoint{{ID: "stable", Proxy: proxy.URL("")}}})
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for w := range 8 {
		wg.Go(func() {
			for i := range 25 {
				r := fetch(context.Background(), pool, fmt.Sprintf("%s/w%d/%d", target.URL, w, i))
				if r.err != nil || r.status != http.StatusOK {
					errs <- fmt.Errorf("worker %d request %d: %d %v", w, i, r.status, r.err)
				}
			}
		})
	}
	for round := range 20 {
		id := fmt.Sprintf("churn-%d", round)
		if err := pool.Add(egress.Endpoint{ID: id, Proxy: proxy.URL("")}); err != nil {
			t.Fatal(err)
		}
		if round%2 == 0 {
			pool.Drain(id)
		}
		if err := pool.Remove(id); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestBindingAndForced checks sticky bindings and operator-forced
// endpoints.
func TestBindingAndForced(t *testing.T) {
	target := newTarget(t, http.StatusOK, false)
	proxies := map[string]*httpProxy{"a": newHTTPProxy(t, "pa"), "b": newHTTPProxy(t, "pb")}
	pool := newPool(t, egress.Config{Endpoints: []egress.Endpoint{{ID: "a", Proxy: proxies["a"].URL("")}, {ID: "b", Proxy: proxies["b"].URL("")}}})
	ctx := context.Background()
	first, _ := pool.Select(ctx, "127.0.0.1")
	other := map[string]string{"a": "b", "b": "a"}[first.EndpointID]

	bound := egress.WithBinding(ctx, other)
	for range 3 {
		r := fetch(bound, pool, target.URL)
		if r.err != nil || r.choice != (egress.Choice{EndpointID: other, Reason: egress.ReasonSticky}) {
			t.Fatalf("bound request = %v, %v; want %s (sticky)", r.choice, r.err, other)
		}
		if r.via != "1.1 p"+other {
			t.Fatalf("bound request left through %q, want p%s", r.via, other)
		}
	}
	if r := fetch(egress.WithForced(ctx, other), pool, target.URL); r.err != nil || r.choice.Reason != egress.ReasonForced || r.via != "1.1 p"+other {
		t.Fatalf("forced request = %v via %q, %v; want %s (forced)", r.choice, r.via, r.err, other)
	}
	if _, err := pool.Select(egress.WithForced(ctx, "nope"), "127.0.0.1"); !errors.Is(err, egress.ErrUnknownEndpoint) {
		t.Errorf("forced to an unknown endpoint = %v, want ErrUnknownEndpoint", err)
	}
	if _, err := pool.Select(egress.WithBinding(ctx, "nope"), "127.0.0.1"); !errors.Is(err, egress.ErrBindingUnavailable) {
		t.Errorf("bound to an unknown endpoint = %v, want ErrBindingUnavailable", err)
	}

	// The bound endpoint's proxy dies: the session's requests fail on it,
	// then, once it is quarantined, fail without being sent; they never
	// move to the other endpoint.
	proxies[other].Kill()
	before := proxies[first.EndpointID].carried()
	for range 3 {
		var pe *egress.ProxyError
		if r := fetch(bound, pool, target.URL); !errors.As(r.err, &pe) || pe.EndpointID != other {
			t.Fatalf("bound request through a dead proxy = %v, %v; want its *ProxyError", r.choice, r.err)
		}
	}
	if r := fetch(bound, pool, target.URL); !errors.Is(r.err, egress.ErrBindingUnavailable) {
		t.Fatalf("bound request to a quarantined endpoint = %v, %v; want ErrBindingUnavailable", r.choice, r.err)
	}
	if after := proxies[first.EndpointID].carried(); after != before {
		t.Errorf("the other proxy carried %d bound requests, want 0", after-before)
	}
	// The operator can still force the quarantined endpoint.
	if c, err := pool.Select(egress.WithForced(ctx, other), "127.0.0.1"); err != nil || c.Reason != egress.ReasonForced {
		t.Errorf("forced Select of a quarantined endpoint = %v, %v; want forced", c, err)
	}
}

func TestClosedPool(t *testing.T) {
	p, err := egress.New(egress.Config{Endpoints: []egress.Endpoint{{ID: "d", Proxy: "direct"}}})
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	p.Close()
	if _, err := p.Select(context.Background(), "example.com"); !errors.Is(err, egress.ErrClosed) {
		t.Errorf("Select after Close = %v, want ErrClosed", err)
	}
	if r := fetch(context.Background(), p, "http://127.0.0.1:1/"); !errors.Is(r.err, egress.ErrClosed) {
		t.Errorf("RoundTrip after Close = %v, want ErrClosed", r.err)
	}
	if err := p.Add(egress.Endpoint{ID: "e", Proxy: "direct"}); !errors.Is(err, egress.ErrClosed) {
		t.Errorf("Add after Close = %v, want ErrClosed", err)
	}
}

// TestBoundWaiterReleasedByDrain: a request bound to a full endpoint waits
// for its slot, and fails with ErrBindingUnavailable when the endpoint is
// drained — it is never moved to the free endpoint.
func TestBoundWaiterReleasedByDrain(t *testing.T) {
	target := newTarget(t, http.StatusOK, false)
	pool := newPool(t, egress.Config{Endpoints: []egress.Endpoint{
		{ID: "busy", Proxy: "direct", Capacity: 1},
		{ID: "free", Proxy: "direct"},
	}})
	waits := waiting(pool)
	ctx := egress.WithBinding(guard(t), "busy")
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, target.URL, nil)
	resp, err := pool.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	done := make(chan result, 1)
	go func() { done <- fetch(ctx, pool, target.URL) }()
	<-waits // the bound request waits for its slot
	if err := pool.Drain("busy"); err != nil {
		t.Fatal(err)
	}
	if r := <-done; !errors.Is(r.err, egress.ErrBindingUnavailable) {
		t.Errorf("bound request to a drained, full endpoint = %v, %v; want ErrBindingUnavailable", r.choice, r.err)
	}
}
