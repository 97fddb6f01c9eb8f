package robotstxt_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/internal/robotstxt"
	"github.com/egresskit/egresskit/robots"
)

type closeCounter struct {
	io.Reader
	closed atomic.Int64
}

func (c *closeCounter) Close() error { c.closed.Add(1); return nil }

// TestTransport: a disallowed request never reaches the next transport and
// its body is closed; an allowed one passes through unchanged.
func TestTransport(t *testing.T) {
	srv := newRobotsServer(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			io.WriteString(w, privateRules)
			return
		}
		io.WriteString(w, "page")
	})
	var sent atomic.Int64
	next := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		sent.Add(1)
		return srv.Client().Transport.RoundTrip(r)
	})
	client := &http.Client{Transport: robotstxt.NewTransport(next, srv.checker(robots.Config{}))}

	body := &closeCounter{Reader: strings.NewReader("form")}
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/private/form", body)
	resp, err := client.Do(req)
	var de *robots.DisallowedError
	if resp != nil || !errors.Is(err, egresskit.ErrDisallowed) || !errors.As(err, &de) || de.Path != "/private/form" {
		t.Errorf("POST /private/form = %v, %v; want ErrDisallowed and no response", resp, err)
	}
	if n := body.closed.Load(); n == 0 {
		t.Errorf("request body of a disallowed request not closed")
	}
	if n := sent.Load(); n != 0 {
		t.Errorf("next transport saw %d requests for a disallowed URL, want 0", n)
	}

	resp, err = client.Get(srv.URL + "/public")
	if err != nil {
		t.Fatalf("GET /public: %v", err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(got) != "page" || sent.Load() != 1 {
		t.Errorf("GET /public = %q after %d requests, want \"page\" after 1", got, sent.Load())
	}
}
