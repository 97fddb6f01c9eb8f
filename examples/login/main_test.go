package main

import (
	"bytes"
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/egresskit/egresskit/internal/redistest"
	"github.com/egresskit/egresskit/session"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(redistest.Main(m))
}

func TestRunMemory(t *testing.T) {
	checkRun(t, options{})
}

// TestRunRedis runs the example with the session store and the per-host
// state in Redis, one client per worker.
func TestRunRedis(t *testing.T) {
	addr := redistest.Addr(t)
	prefix := redistest.Prefix(t)
	checkRun(t, options{redis: addr, prefix: prefix})

	// The session was deleted at the end: none of its keys is left.
	keys, err := redistest.Dial(t, addr).Keys(context.Background(), prefix+":session:*").Result()
	if err != nil || len(keys) != 0 {
		t.Errorf("session keys left in Redis: %q, %v; want none", keys, err)
	}
}

var hexToken = regexp.MustCompile(`[0-9a-f]{32}`)

func checkRun(t *testing.T, o options) {
	t.Helper()
	var out bytes.Buffer
	res, err := run(context.Background(), &out, o)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	got := out.String()
	t.Logf("output:\n%s", got)

	// One login across the fleet, and every page fetched with the session.
	const pages, perPage = 5, 2
	want := siteStats{Forms: 1, Logins: 1, Served: pages * (1 + perPage)}
	if res.Site != want {
		t.Errorf("the site saw %+v, want %+v", res.Site, want)
	}
	loggedIn, found := 0, 0
	for w, note := range res.Notes {
		switch {
		case strings.Contains(note, "logged in with the form's CSRF token"):
			loggedIn++
		case strings.Contains(note, "found the session logged in"):
			found++
		default:
			t.Errorf("worker %s: %q, want a login or a logged-in session found", w, note)
		}
	}
	if loggedIn != 1 || found != 1 {
		t.Errorf("%d workers logged in and %d found the session logged in, want 1 and 1", loggedIn, found)
	}

	// Both workers paged through.
	if res.Pages["A"] == 0 || res.Pages["B"] == 0 || res.Pages["A"]+res.Pages["B"] != pages*(1+perPage) {
		t.Errorf("pages fetched: %v, want both workers, %d in all", res.Pages, pages*(1+perPage))
	}

	// Every request of the session left through the bound endpoint; the
	// one robots.txt disallows was not sent.
	disallowed := 0
	for _, f := range res.Fetches {
		switch {
		case f.disallowed():
			disallowed++
			if f.Path != "/admin/export" {
				t.Errorf("%s %s disallowed, want only /admin/export", f.Method, f.Path)
			}
		case f.Err != nil || f.Status != 200 || f.Egress != endpoint || f.Reason != "sticky":
			t.Errorf("worker %s %s %s: status %d via %q (%s), %v; want 200 via %s (sticky)", f.Worker, f.Method, f.Path, f.Status, f.Egress, f.Reason, f.Err, endpoint)
		}
	}
	if disallowed != 1 || len(res.Fetches) != 2+pages*(1+perPage)+1 {
		t.Errorf("%d requests, %d disallowed; want %d, 1", len(res.Fetches), disallowed, 2+pages*(1+perPage)+1)
	}
	if len(res.Egress) != 1 || res.Egress[endpoint] != 2+pages*(1+perPage) {
		t.Errorf("attempts by endpoint %v, want only %s, %d", res.Egress, endpoint, 2+pages*(1+perPage))
	}

	// With its endpoint gone, the session is not moved to another one.
	if !errors.Is(res.Lost.Err, session.ErrEgressLost) || res.SiteAfter != res.Site {
		t.Errorf("request after %s was removed: %v, site %+v → %+v; want ErrEgressLost and nothing sent", endpoint, res.Lost.Err, res.Site, res.SiteAfter)
	}

	for _, line := range []string{
		"summary: 15 pages fetched with the session (worker A ",
		"; logins 1; site saw 0 requests without the session, 0 under /admin/; attempts by egress endpoint: exit-b 17\n",
		"GET  /admin/export    not sent: disallowed by robots.txt\n",
		"POST /login           200  via exit-b (sticky)\n",
		"B  GET  /items?page=1     not sent: the session's egress endpoint is gone (session.ErrEgressLost)",
	} {
		if !strings.Contains(got, line) {
			t.Errorf("output lacks %q", line)
		}
	}
	// Neither the password nor a CSRF or session cookie value is printed.
	if strings.Contains(got, sitePassword) || hexToken.MatchString(got) {
		t.Errorf("the output holds a secret:\n%s", got)
	}
}
