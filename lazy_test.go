package egresskit_test

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/telemetry"
)

// sucuri200 is Sucuri's JS cookie challenge, which it serves with 200:
// only the page's body says it is a refusal.
func sucuri200(t *testing.T) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("classify", "testdata", "corpus", "block", "sucuri", "cloudscraper-js_js_challenge_cookie.html"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// stallingPage answers robots.txt with 404 and every page with a 200 HTML
// answer whose body sends nothing until the test writes to it.
type stallingPage struct{ pw *io.PipeWriter }

func (s *stallingPage) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Path == "/robots.txt" {
		return &http.Response{StatusCode: http.StatusNotFound, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
	}
	pr, pw := io.Pipe()
	s.pw = pw
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"text/html"}}, Body: pr, Request: req}, nil
}

// TestOKPageDoesNotHoldRoundTrip: a 2xx page whose server sent the headers
// and nothing more is returned at once (no fake time passes in the
// bubble), and the caller then reads every byte of it.
func TestOKPageDoesNotHoldRoundTrip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &stallingPage{}
		cfg := egresskit.Config{Base: base, UserAgent: "TestBot/1.0", Classify: classify.Config{PeekTimeout: time.Hour}}
		c := &http.Client{Transport: mustChain(cfg)}
		start := time.Now()
		resp, err := c.Get("http://slow.test/a")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if took := time.Since(start); took != 0 {
			t.Errorf("Get took %v of fake time, want none", took)
		}
		page := bytes.Repeat([]byte("<p>item</p>"), 500)
		go func() {
			base.pw.Write(page[:100])
			base.pw.Write(page[100:])
			base.pw.Close()
		}()
		got, err := io.ReadAll(resp.Body)
		if err != nil || !bytes.Equal(got, page) {
			t.Errorf("ReadAll = %d bytes, %v; want the %d bytes sent", len(got), err, len(page))
		}
		if r := classify.Of(resp, nil); r.Outcome != classify.OK || r.PeekCut {
			t.Errorf("Of = %v (PeekCut %v), want ok", r.Outcome, r.PeekCut)
		}
	})
}

// TestChallenge200JudgedWhenRead: a challenge page served with 200 goes
// through the whole chain unjudged by its body until the caller reads it
// (or asks for its Result): then the host is halted, one escalation
// carries the page's head, the response reads as Refused, and the
// observers get the attempt's one, final, event. A caller that closes the
// body unread never has it judged by its content: OK, and no halt.
func TestChallenge200JudgedWhenRead(t *testing.T) {
	page := sucuri200(t)
	for _, tc := range []struct {
		name   string
		do     func(*http.Response) []byte // the caller's first move; returns what it read
		halted bool
	}{
		{"read", func(resp *http.Response) []byte {
			var b bytes.Buffer
			io.Copy(&b, resp.Body)
			return b.Bytes()
		}, true},
		{"read a byte", func(resp *http.Response) []byte {
			b := make([]byte, 1)
			n, _ := resp.Body.Read(b)
			return b[:n]
		}, true},
		{"Of first", func(resp *http.Response) []byte { classify.Of(resp, nil); return nil }, true},
		{"Halted first", func(resp *http.Response) []byte { egresskit.Halted(resp); return nil }, true},
		{"close unread", func(resp *http.Response) []byte { resp.Body.Close(); return nil }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				s := newSite()
				var n atomic.Int32
				s.handle("a.test", func(w http.ResponseWriter, r *http.Request) {
					if n.Add(1) == 1 {
						http.Error(w, "busy", http.StatusServiceUnavailable) // retried
						return
					}
					w.Header().Set("Content-Type", "text/html; charset=UTF-8")
					w.Header().Set("Server", "Sucuri/Cloudproxy")
					w.Write(page)
				})
				rec := &recorder{}
				var escalations []egresskit.Escalation
				cfg := fastConfig(s)
				cfg.Observers = []telemetry.Observer{rec}
				cfg.OnEscalate = func(e egresskit.Escalation) { escalations = append(escalations, e) }
				tr := mustChain(cfg)
				c := &http.Client{Transport: tr}

				resp, err := c.Get("http://a.test/catalogue")
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				if st, _ := tr.Status(t.Context(), "a.test"); st.Halted || len(escalations) != 0 {
					t.Errorf("before the body is touched: halted %v, %d escalations; want neither", st.Halted, len(escalations))
				}
				if len(rec.events) != 1 || rec.events[0].Status != 503 || rec.events[0].Final {
					t.Fatalf("events before the body is touched = %+v, want the 503's, not final", rec.events)
				}

				got := tc.do(resp)
				want := classify.OK
				if tc.halted {
					want = classify.Refused
				}
				if r := classify.Of(resp, nil); r.Outcome != want {
					t.Errorf("Of = %v, want %v", r.Outcome, want)
				}
				st, _ := tr.Status(t.Context(), "a.test")
				if st.Halted != tc.halted || egresskit.Halted(resp) != tc.halted {
					t.Errorf("host halted %v, Halted(resp) %v; want %v", st.Halted, egresskit.Halted(resp), tc.halted)
				}
				switch {
				case !tc.halted && len(escalations) != 0:
					t.Errorf("escalations = %d, want none", len(escalations))
				case tc.halted && (len(escalations) != 1 || !bytes.Equal(escalations[0].BodyHead, page[:1024]) || escalations[0].Status != 200):
					t.Errorf("escalations = %+v, want one with the page's first KiB", escalations)
				}
				finals := 0
				for _, e := range rec.events {
					if e.Final {
						finals++
					}
				}
				if len(rec.events) != 2 || finals != 1 || !rec.events[1].Final || rec.events[1].Outcome != want ||
					rec.events[1].Status != 200 || rec.events[1].Attempt != 2 || (rec.events[1].Breaker == "halted") != tc.halted {
					t.Errorf("events = %+v, want the 503's and one final %v for attempt 2", rec.events, want)
				}

				if tc.halted { // the caller can still read the whole page
					rest, err := io.ReadAll(resp.Body)
					if got = append(got, rest...); err != nil || !bytes.Equal(got, page) {
						t.Errorf("body = %d bytes, %v; want the %d of the page", len(got), err, len(page))
					}
				}
				_, err = c.Get("http://a.test/next")
				if halted := errors.Is(err, egresskit.ErrHalted); halted != tc.halted {
					t.Errorf("next request: %v; want halted %v", err, tc.halted)
				}
			})
		})
	}
}
