package egresskit_test

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/egresskit/egresskit"
)

// stallingRefusal answers robots.txt with 404 and every page with a 403
// that names the bot in its first bytes and then sends nothing more until
// the test closes it.
type stallingRefusal struct{ pw *io.PipeWriter }

func (s *stallingRefusal) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Path == "/robots.txt" {
		return &http.Response{StatusCode: http.StatusNotFound, Header: http.Header{}, Body: http.NoBody, Request: req}, nil
	}
	pr, pw := io.Pipe()
	s.pw = pw
	go io.WriteString(pw, "<html>TestBot is not welcome here.")
	return &http.Response{StatusCode: http.StatusForbidden, Status: "403 Forbidden",
		Header: http.Header{"Content-Type": {"text/html"}}, Body: pr, Request: req}, nil
}

// TestEscalationDoesNotWaitForTheBody: a refusal whose body stalls after
// its first bytes halts the host and is returned once the peek's time
// budget has passed; the escalation holds the bytes the peek read. Were
// RoundTrip to wait for more of the body, every goroutine of the bubble
// would block and synctest would fail the test.
func TestEscalationDoesNotWaitForTheBody(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		base := &stallingRefusal{}
		var escalations []egresskit.Escalation
		cfg := egresskit.Config{
			Base:       base,
			UserAgent:  "TestBot/1.0",
			OnEscalate: func(e egresskit.Escalation) { escalations = append(escalations, e) },
		}
		resp, err := (&http.Client{Transport: mustChain(cfg)}).Get("http://blocked.test/a")
		if err != nil {
			t.Fatalf("Get: %v, want the real 403", err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || !egresskit.Halted(resp) {
			t.Errorf("response = %d, halted %v; want 403, halted", resp.StatusCode, egresskit.Halted(resp))
		}
		if len(escalations) != 1 || !strings.Contains(string(escalations[0].BodyHead), "not welcome") {
			t.Fatalf("escalations = %+v, want one with the body's head", escalations)
		}
		base.pw.Write([]byte(" Bye.</html>"))
		base.pw.Close()
		body, _ := io.ReadAll(resp.Body)
		if want := "<html>TestBot is not welcome here. Bye.</html>"; string(body) != want {
			t.Errorf("body = %q, want %q", body, want)
		}
	})
}
