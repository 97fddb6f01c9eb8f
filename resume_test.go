package egresskit_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/egresskit/egresskit"
)

// TestResumeForgetsRefusals: refusals seen before a halt do not count
// after the operator resumes the host. Five plain 403s, then a 403 naming
// the bot halts the host; after Resume, five more plain 403s are five, not
// ten, and do not halt it again.
func TestResumeForgetsRefusals(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusForbidden)
		if strings.HasPrefix(r.URL.Path, "/named") {
			io.WriteString(w, "<html><body>TestBot is not welcome here.</body></html>")
			return
		}
		io.WriteString(w, "<html><head><title>403 Forbidden</title></head><body>403 Forbidden</body></html>")
	}))
	defer srv.Close()
	tr := mustChain(watchConfig(func(egresskit.Escalation) {}))
	c := &http.Client{Transport: tr}
	get := func(path string) *http.Response {
		t.Helper()
		resp, err := c.Get(srv.URL + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	for i := range 5 {
		if resp := get(fmt.Sprintf("/item/%d", i)); egresskit.Halted(resp) {
			t.Fatalf("/item/%d halted the host", i)
		}
	}
	if resp := get("/named"); !egresskit.Halted(resp) {
		t.Fatal("a 403 naming the bot did not halt the host")
	}
	key, _ := tr.HostKey(srv.URL)
	if err := tr.Resume(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if resp := get(fmt.Sprintf("/other/%d", i)); egresskit.Halted(resp) {
			t.Fatalf("after Resume, /other/%d halted the host: refusals from before the halt were counted", i)
		}
	}
}
