package classify_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/egresskit/egresskit/classify"
)

// sucuriChallenge is a challenge served with 200 (Sucuri's JS cookie
// challenge): only its body says so.
func sucuriChallenge(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(corpusDir, "block/sucuri/cloudscraper-js_js_challenge_cookie.html"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// pipeTransport answers every request with status and contentType and a
// body fed through the returned writer: RoundTrip returns as soon as the
// headers are in, before any byte of the body is written.
func pipeTransport(status int, contentType string) (http.RoundTripper, *io.PipeWriter) {
	pr, pw := io.Pipe()
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		h := http.Header{}
		if contentType != "" {
			h.Set("Content-Type", contentType)
		}
		return &http.Response{StatusCode: status, Header: h, ContentLength: -1, Body: pr, Request: r}, nil
	}), pw
}

// TestLazyRoundTripDoesNotWait: a 2xx answer whose body has not begun is
// returned at once (no fake time passes in the bubble: no timer is
// waited on, no byte is read), and judged when the caller reads it; a
// refusal status is still peeked in RoundTrip, within PeekTimeout.
func TestLazyRoundTripDoesNotWait(t *testing.T) {
	const page = "<html><head><title>catalogue</title></head><body>items</body></html>"
	for _, tc := range []struct {
		name        string
		status      int
		contentType string
		body        string
		wait        time.Duration // fake time RoundTrip takes
		want        classify.Outcome
		wantCut     bool // Of says PeekCut
	}{
		{"200 html", 200, "text/html", page, 0, classify.OK, false},
		{"200 untyped", 200, "", page, 0, classify.OK, false},
		{"206 html", 206, "text/html; charset=utf-8", page, 0, classify.OK, false},
		{"200 challenge", 200, "text/html", string(sucuriChallenge(t)), 0, classify.Refused, false},
		{"403 html: eager", 403, "text/html", page, classify.DefaultPeekTimeout, classify.Permanent, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				next, pw := pipeTransport(tc.status, tc.contentType)
				req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1/p", nil)
				start := time.Now()
				// A Classifier of the bubble's own: its pooled timers belong to it.
				resp, err := classify.NewTransport(next, classify.New(classify.Config{})).RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				if took := time.Since(start); took != tc.wait {
					t.Errorf("RoundTrip took %v of fake time, want %v", took, tc.wait)
				}
				var wg sync.WaitGroup
				wg.Go(func() {
					for b := []byte(tc.body); len(b) > 0; { // a page in fragments
						n := min(len(b), 17)
						pw.Write(b[:n])
						b = b[n:]
					}
					pw.Close()
				})
				got, err := io.ReadAll(resp.Body)
				wg.Wait()
				resp.Body.Close()
				if err != nil || string(got) != tc.body {
					t.Errorf("ReadAll = %d bytes, %v; want the %d bytes written", len(got), err, len(tc.body))
				}
				if r := classify.Of(resp, nil); r.Outcome != tc.want || r.PeekCut != tc.wantCut || r.Status != tc.status {
					t.Errorf("Of = %v %d (PeekCut %v), want %v %d (PeekCut %v)", r.Outcome, r.Status, r.PeekCut, tc.want, tc.status, tc.wantCut)
				}
			})
		})
	}
}

// lazyResponse returns a response to a GET, classified by a Transport over
// a body reading from r.
func lazyResponse(t testing.TB, c *classify.Classifier, status int, h http.Header, r io.Reader) *http.Response {
	t.Helper()
	next := roundTripFunc(func(req *http.Request) (*http.Response, error) {
		return &http.Response{StatusCode: status, Header: h, ContentLength: -1, Body: io.NopCloser(r), Request: req}, nil
	})
	req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1/x", nil)
	resp, err := classify.NewTransport(next, c).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestLazySettle: a 200 challenge page is Refused however its Result is
// asked for — after reading (Read or WriteTo), before reading (Of and
// Head settle it with the eager peek), or through OnSettle; a body closed
// unread is judged on its status and headers alone (OK). Every hook runs
// once, before the first byte is handed out, and may read Of and Head.
func TestLazySettle(t *testing.T) {
	page := sucuriChallenge(t)
	html := http.Header{"Content-Type": {"text/html; charset=UTF-8"}}
	for _, tc := range []struct {
		name string
		do   func(resp *http.Response) ([]byte, error) // what the caller does first; returns what it read
		want classify.Outcome
		read bool // the caller receives the page
	}{
		{"Read", func(resp *http.Response) ([]byte, error) {
			return io.ReadAll(struct{ io.Reader }{resp.Body})
		}, classify.Refused, true},
		{"WriteTo", func(resp *http.Response) ([]byte, error) {
			var b bytes.Buffer
			_, err := io.Copy(&b, resp.Body)
			return b.Bytes(), err
		}, classify.Refused, true},
		{"Of first", func(resp *http.Response) ([]byte, error) {
			if r := classify.Of(resp, nil); r.Outcome != classify.Refused {
				return nil, errors.New("Of before reading: " + r.Outcome.String())
			}
			return io.ReadAll(resp.Body)
		}, classify.Refused, true},
		{"Head first", func(resp *http.Response) ([]byte, error) {
			if h := classify.New(classify.Config{}).Head(t.Context(), resp, 64); !bytes.Equal(h, page[:64]) {
				return nil, errors.New("Head before reading: " + string(h))
			}
			return io.ReadAll(resp.Body)
		}, classify.Refused, true},
		{"Close unread", func(resp *http.Response) ([]byte, error) {
			return nil, resp.Body.Close()
		}, classify.OK, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := lazyResponse(t, nil, 200, html, &chunkReader{r: bytes.NewReader(page), cuts: []byte{7, 0, 200}})
			if _, settled := classify.OnSettle(resp, nil); settled {
				t.Fatal("OnSettle: settled before the body was read, want pending")
			}
			var (
				calls   int
				hookRes classify.Result
				head    []byte
			)
			for range 2 {
				classify.OnSettle(resp, func(r classify.Result) {
					calls++
					hookRes = r
					if of := classify.Of(resp, nil); of.Outcome != r.Outcome {
						t.Errorf("Of in the hook = %v, want %v", of.Outcome, r.Outcome)
					}
					head = classify.New(classify.Config{}).Head(t.Context(), resp, 1024)
				})
			}
			got, err := tc.do(resp)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if tc.read && !bytes.Equal(got, page) {
				t.Errorf("read %d bytes, want the %d of the page", len(got), len(page))
			}
			if calls != 2 || hookRes.Outcome != tc.want {
				t.Errorf("hooks ran %d times with %v, want 2 with %v", calls, hookRes.Outcome, tc.want)
			}
			if tc.read && !bytes.Equal(head, page[:1024]) {
				t.Errorf("Head in the hook = %d bytes, want the page's first 1024", len(head))
			}
			r, settled := classify.OnSettle(resp, func(classify.Result) { t.Error("a hook added once settled was run") })
			if !settled || r.Outcome != tc.want || classify.Of(resp, nil).Outcome != tc.want {
				t.Errorf("OnSettle = %v, %v; want %v, settled", r.Outcome, settled, tc.want)
			}
			if tc.want == classify.Refused && !slices.Equal(r.Markers, []string{"sucuri"}) {
				t.Errorf("Markers = %v, want [sucuri]", r.Markers)
			}
		})
	}
}

// TestLazyAttach: Attach on a pending response settles it with the Result
// given and leaves the body whole and unjudged; on a settled one it
// replaces the Result in place.
func TestLazyAttach(t *testing.T) {
	page := sucuriChallenge(t)
	html := http.Header{"Content-Type": {"text/html"}}
	resp := lazyResponse(t, nil, 200, html, bytes.NewReader(page))
	req := resp.Request
	var hooked classify.Result
	classify.OnSettle(resp, func(r classify.Result) { hooked = r })
	classify.Attach(resp, classify.Result{Outcome: classify.Transient, Reason: "reclassified", Status: 200})
	if hooked.Reason != "reclassified" || classify.Of(resp, nil).Reason != "reclassified" || resp.Request != req {
		t.Errorf("after Attach: hook %q, Of %q, Request replaced %v", hooked.Reason, classify.Of(resp, nil).Reason, resp.Request != req)
	}
	got, err := io.ReadAll(resp.Body)
	if err != nil || !bytes.Equal(got, page) {
		t.Errorf("ReadAll = %d bytes, %v; want the page", len(got), err)
	}
	if r := classify.Of(resp, nil); r.Reason != "reclassified" {
		t.Errorf("Of after reading = %q, want the attached Result", r.Reason)
	}
	resp.Body.Close()

	resp = lazyResponse(t, nil, 200, html, bytes.NewReader(page))
	io.ReadAll(resp.Body)
	classify.Attach(resp, classify.Result{Outcome: classify.Refused, Reason: "suspected block", Status: 200})
	if r := classify.Of(resp, nil); r.Reason != "suspected block" {
		t.Errorf("Of after Attach on a settled response = %q, want the attached Result", r.Reason)
	}
	resp.Body.Close()
}

// TestLazyHeadReadError: a read error within the head reaches the caller
// after the bytes read before it, as with an eager peek, and the Result is
// the eager one (Transient, "body read error").
func TestLazyHeadReadError(t *testing.T) {
	boom := errors.New("connection reset")
	html := http.Header{"Content-Type": {"text/html"}}
	resp := lazyResponse(t, nil, 200, html, &errAfter{r: strings.NewReader("<html><body>half"), err: boom})
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(got) != "<html><body>half" || !errors.Is(err, boom) {
		t.Errorf("ReadAll = %q, %v; want the bytes, then %v", got, err, boom)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1/x", nil)
	eager := &http.Response{StatusCode: 200, Header: html, ContentLength: -1, Request: req,
		Body: io.NopCloser(&errAfter{r: strings.NewReader("<html><body>half"), err: boom})}
	want := classify.New(classify.Config{}).Classify(eager, nil)
	eager.Body.Close()
	if r := classify.Of(resp, nil); !sameDecision(r, want) || r.Outcome != classify.Transient {
		t.Errorf("Of = %v %q, want the eager %v %q", r.Outcome, r.Reason, want.Outcome, want.Reason)
	}
}

// TestLazyConcurrentOf: Of (and OnSettle) on one goroutine while the body
// is read on another agree on one Result, and the reader receives every
// byte; run with -race.
func TestLazyConcurrentOf(t *testing.T) {
	page := sucuriChallenge(t)
	html := http.Header{"Content-Type": {"text/html"}}
	for range 50 {
		resp := lazyResponse(t, nil, 200, html, &chunkReader{r: bytes.NewReader(page), cuts: []byte{3, 90}})
		var (
			wg  sync.WaitGroup
			got []byte
			err error
			r   classify.Result
		)
		hooked := make(chan classify.Result, 2)
		classify.OnSettle(resp, func(r classify.Result) { hooked <- r })
		wg.Go(func() { got, err = io.ReadAll(resp.Body) })
		wg.Go(func() {
			classify.OnSettle(resp, nil)
			r = classify.Of(resp, nil)
		})
		wg.Wait()
		resp.Body.Close()
		if err != nil || !bytes.Equal(got, page) {
			t.Fatalf("ReadAll = %d bytes, %v; want the page", len(got), err)
		}
		if h := <-hooked; r.Outcome != classify.Refused || h.Outcome != classify.Refused || len(hooked) != 0 {
			t.Fatalf("Of = %v, hook %v (%d more); want Refused, once", r.Outcome, h.Outcome, len(hooked))
		}
	}
}

// TestLazyLateCaller: a 2xx answer whose body is first read, or whose
// Result is first asked for, after the request's context ended is judged
// on its status and headers alone (the host answered in time; the lateness
// is the caller's): OK, even for a challenge page, and the read fails with
// the context's error rather than handing out a page nobody judged.
func TestLazyLateCaller(t *testing.T) {
	page := sucuriChallenge(t)
	for _, ofFirst := range []bool{false, true} {
		ctx, cancel := context.WithCancel(context.Background())
		pr, pw := io.Pipe()
		next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			go func() {
				<-r.Context().Done()
				pw.CloseWithError(context.Cause(r.Context())) // as net/http does
			}()
			return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/html"}}, ContentLength: -1, Body: pr, Request: r}, nil
		})
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1/x", nil)
		resp, err := classify.NewTransport(next, nil).RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		var hooked classify.Result
		classify.OnSettle(resp, func(r classify.Result) { hooked = r })
		cancel()
		if ofFirst {
			classify.Of(resp, nil)
		}
		go pw.Write(page) // too late: never read
		if _, err := io.ReadAll(resp.Body); !errors.Is(err, context.Canceled) {
			t.Errorf("Of first %v: ReadAll error = %v, want context.Canceled", ofFirst, err)
		}
		resp.Body.Close()
		if r := classify.Of(resp, nil); r.Outcome != classify.OK || hooked.Outcome != classify.OK || r.Reason != "status 200" {
			t.Errorf("Of first %v: Of = %v %q, hook %v; want ok on the status", ofFirst, r.Outcome, r.Reason, hooked.Outcome)
		}
	}
}

// gateReader reads from r, but its first Read first says so on in and
// waits for release.
type gateReader struct {
	r           io.Reader
	in, release chan struct{}
	opened      bool
}

func (g *gateReader) Read(p []byte) (int, error) {
	if !g.opened {
		g.opened = true
		g.in <- struct{}{}
		<-g.release
	}
	return g.r.Read(p)
}

// TestLazyOfDuringRead: Of (and Head) called while the caller's first Read
// is reading the head waits for that read, without a read of its own, and
// settles on it; the reader receives every byte, and the hook runs once.
// (Head returns what the reader has not yet taken of the head.)
func TestLazyOfDuringRead(t *testing.T) {
	page := sucuriChallenge(t)
	html := http.Header{"Content-Type": {"text/html"}}
	synctest.Test(t, func(t *testing.T) {
		c := classify.New(classify.Config{}) // its pooled timers belong to this bubble
		g := &gateReader{r: bytes.NewReader(page), in: make(chan struct{}), release: make(chan struct{})}
		resp := lazyResponse(t, c, 200, html, g)
		hooks := 0
		classify.OnSettle(resp, func(classify.Result) { hooks++ })
		var (
			got  []byte
			err  error
			wg   sync.WaitGroup
			r    classify.Result
			head []byte
		)
		wg.Go(func() { got, err = io.ReadAll(resp.Body) })
		<-g.in // the caller's read of the head is in flight
		wg.Go(func() { r = classify.Of(resp, nil) })
		wg.Go(func() { head = c.Head(context.Background(), resp, 16) })
		synctest.Wait() // Of and Head wait for the caller's read
		close(g.release)
		wg.Wait()
		resp.Body.Close()
		if err != nil || !bytes.Equal(got, page) {
			t.Fatalf("ReadAll = %d bytes, %v; want the page", len(got), err)
		}
		if r.Outcome != classify.Refused || r.PeekCut || hooks != 1 {
			t.Errorf("Of = %v (PeekCut %v), %d hooks; want Refused, not cut, one hook", r.Outcome, r.PeekCut, hooks)
		}
		if !bytes.Contains(page, head) { // what the reader had not taken yet
			t.Errorf("Head = %q, not part of the page", head)
		}
	})
}

// TestLazyHooksBeforeBytes: when another goroutine settles a pending
// Result (Attach or Of, before the caller's first Read or while it reads
// the head), the caller's Read hands out no byte until that goroutine's
// OnSettle hooks have returned, as OnSettle promises.
func TestLazyHooksBeforeBytes(t *testing.T) {
	page := sucuriChallenge(t)
	html := http.Header{"Content-Type": {"text/html"}}
	for _, tc := range []struct {
		name   string
		during bool // settle while the caller's read of the head is in flight
		settle func(*http.Response)
	}{
		{"Attach before the read", false, func(resp *http.Response) { classify.Attach(resp, classify.Result{Outcome: classify.OK}) }},
		{"Of before the read", false, func(resp *http.Response) { classify.Of(resp, nil) }},
		{"Head before the read", false, func(resp *http.Response) { classify.New(classify.Config{}).Head(context.Background(), resp, 8) }},
		{"Attach during the read", true, func(resp *http.Response) { classify.Attach(resp, classify.Result{Outcome: classify.OK}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := classify.New(classify.Config{})
				var r io.Reader = bytes.NewReader(page)
				g := &gateReader{r: r, in: make(chan struct{}), release: make(chan struct{})}
				if tc.during {
					r = g
				}
				resp := lazyResponse(t, c, 200, html, r)
				gate := make(chan struct{})
				var (
					hooks    int
					returned atomic.Bool
					early    bool // a byte was handed out before the hook returned
				)
				classify.OnSettle(resp, func(classify.Result) {
					hooks++
					<-gate
					early = returned.Load()
				})
				var (
					wg  sync.WaitGroup
					got = make([]byte, 64)
					n   int
				)
				read := func() {
					n, _ = resp.Body.Read(got)
					returned.Store(true)
				}
				if tc.during {
					wg.Go(read)
					<-g.in // the caller's read of the head is in flight
					wg.Go(func() { tc.settle(resp) })
					synctest.Wait() // the hook runs on the settling goroutine
					close(g.release)
				} else {
					wg.Go(func() { tc.settle(resp) })
					synctest.Wait() // the hook runs on the settling goroutine
					wg.Go(read)
				}
				synctest.Wait()
				if returned.Load() {
					t.Errorf("Read returned while the hook was running")
				}
				close(gate)
				wg.Wait()
				resp.Body.Close()
				if early || hooks != 1 {
					t.Errorf("hook saw a byte handed out: %v; %d hooks, want 1", early, hooks)
				}
				if n == 0 || !bytes.Equal(got[:n], page[:n]) {
					t.Errorf("Read = %q, want the page's first bytes", got[:n])
				}
			})
		})
	}
}

// TestLazyWriteToFails: a WriteTo of a pending body (the head read and
// judged inside it) whose writer fails part way loses no byte: a Read
// after it hands out the rest, whether the failure came within the head,
// at its end or after it, and for a page shorter than the head.
func TestLazyWriteToFails(t *testing.T) {
	html := http.Header{"Content-Type": {"text/html"}}
	long := bytes.Repeat([]byte("<p>catalogue</p>"), 500)
	short := []byte("<html>short</html>")
	for _, page := range [][]byte{long, short} {
		for _, n := range []int{0, 1, 10, classify.DefaultOKPeekSize - 1, classify.DefaultOKPeekSize, classify.DefaultOKPeekSize + 1, 5000} {
			resp := lazyResponse(t, classify.New(classify.Config{}), 200, html, bytes.NewReader(page))
			w := &shortWriter{n: n}
			resp.Body.(io.WriterTo).WriteTo(w)
			rest, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if got := append(w.buf.Bytes(), rest...); err != nil || !bytes.Equal(got, page) {
				t.Errorf("page of %d bytes, writer failing after %d: %d bytes in all (%v), want the page", len(page), n, len(got), err)
			}
		}
	}
}
