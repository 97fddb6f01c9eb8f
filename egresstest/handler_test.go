package egresstest_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/egresskit/egresskit/egresstest"
)

func TestHandlerTransportServesRequests(t *testing.T) {
	var seen []string
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		seen = append(seen, fmt.Sprintf("%s %s host=%s uri=%s tls=%t body=%s",
			r.Method, r.URL.Path, r.Host, r.RequestURI, r.TLS != nil, b))
		w.Header().Set("X-Echo", r.Header.Get("X-In"))
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "made")
	})
	ht := egresstest.NewHandlerTransport(h)
	client := &http.Client{Transport: ht}

	req, _ := http.NewRequest("PUT", "https://a.test/items/1?x=y", strings.NewReader("data"))
	req.Header.Set("X-In", "hello")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("Do = %v", err)
	}
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("X-Echo") != "hello" {
		t.Errorf("response = %d X-Echo=%q, want 201 X-Echo=%q", resp.StatusCode, resp.Header.Get("X-Echo"), "hello")
	}
	if got := readAll(t, resp); got != "made" {
		t.Errorf("body = %q, want %q", got, "made")
	}
	want := "PUT /items/1 host=a.test uri=/items/1?x=y tls=true body=data"
	if len(seen) != 1 || seen[0] != want {
		t.Errorf("handler saw %q, want [%q]", seen, want)
	}
	if ht.Requests() != 1 || hostRequests(ht.Calls(), "a.test") != 1 || ht.OpenBodies() != 0 {
		t.Errorf("Requests, requests to a.test, OpenBodies = %d, %d, %d; want 1, 1, 0",
			ht.Requests(), hostRequests(ht.Calls(), "a.test"), ht.OpenBodies())
	}
	if c := ht.Calls(); len(c) != 1 || string(c[0].Body) != "data" {
		t.Errorf("Calls() = %+v, want one call with body %q", c, "data")
	}
}

func TestHandlerTransportFakeTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-time.After(10 * time.Second):
				io.WriteString(w, "late")
			case <-r.Context().Done():
			}
		})
		ht := egresstest.NewHandlerTransport(slow)
		start := time.Now()
		resp, err := get(t, ht, "GET", "http://slow.test/", nil)
		if err != nil {
			t.Fatalf("RoundTrip = %v", err)
		}
		if got := readAll(t, resp); got != "late" {
			t.Errorf("body = %q, want %q", got, "late")
		}
		if got := time.Since(start); got != 10*time.Second {
			t.Errorf("took %v, want 10s of fake time", got)
		}
	})
}

func TestHandlerTransportBadInput(t *testing.T) {
	ht := egresstest.NewHandlerTransport(nil)
	resp, err := get(t, ht, "GET", "http://a.test/", nil)
	if err != nil || resp.StatusCode != http.StatusNotFound {
		t.Fatalf("nil handler: RoundTrip = %v, %v; want 404", resp, err)
	}
	resp.Body.Close()
	if _, err := ht.RoundTrip(nil); !errors.Is(err, egresstest.ErrInvalidRequest) {
		t.Errorf("RoundTrip(nil) = %v, want %v", err, egresstest.ErrInvalidRequest)
	}

	panicky := egresstest.NewHandlerTransport(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic("boom")
	}))
	if _, err := get(t, panicky, "GET", "http://a.test/", nil); err == nil || !strings.Contains(err.Error(), "panicked") {
		t.Errorf("panicking handler: err = %v, want a panic error", err)
	}
}
