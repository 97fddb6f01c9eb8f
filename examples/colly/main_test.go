package main

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/egresskit/egresskit"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestRun(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	got := out.String()
	for _, want := range []string{
		"GET site      /               200\n",
		"GET site      /about          200\n",
		"GET site      /private/admin  not sent: disallowed by robots.txt\n",
		"GET busy      /news/1         200\n",
		"GET busy      /news/2         200\n",
		"escalation: challenge halted (status 403, markers [cloudflare])\n",
		"GET challenge /shop           403, host halted: true\n",
		"GET challenge /shop/cart      not sent: host halted\n",
		"robots.txt: site served /private/admin 0 times\n",
		"busy: 3 attempts for 2 pages; after the 429 (Retry-After: 1) the next request came >= 1s later: true; rate 600/min -> ",
		"challenge: served 1 of the 2 pages visited; halted: true\n",
		"egress: 9 requests through the pool's proxies, 0 direct\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q; got:\n%s", want, got)
		}
	}
	// The 429 halved the rate (600 → 300/min); the OK answers since have
	// started its climb back toward the configured rate, not past it.
	m := regexp.MustCompile(`rate 600/min -> ([0-9.]+)/min\n`).FindStringSubmatch(got)
	if m == nil {
		t.Fatalf("output lacks the busy host's rate; got:\n%s", got)
	}
	if r, err := strconv.ParseFloat(m[1], 64); err != nil || r < 300 || r >= 600 {
		t.Errorf("busy host's rate after the 429 = %s/min, want in [300, 600)", m[1])
	}
	// The escalation arrives while the refused request is still in the
	// chain, before Colly reports the 403.
	if i, j := strings.Index(got, "escalation:"), strings.Index(got, "GET challenge /shop "); i < 0 || j < 0 || i > j {
		t.Errorf("escalation not reported before the refused page; got:\n%s", got)
	}
}

// TestOneIdentity: with Colly's own User-Agent cleared, every request the
// hosts see, robots.txt included, carries the chain's Config.UserAgent, the
// identity robots.txt is judged for.
func TestOneIdentity(t *testing.T) {
	w := newWeb()
	defer w.close()
	pool, err := newPool(w)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	chain, err := newChain(pool, &attempts{n: map[string]int{}}, func(egresskit.Escalation) {})
	if err != nil {
		t.Fatal(err)
	}
	c := newCollector(context.Background(), chain)
	for _, u := range []string{w.site.URL + "/", w.site.URL + "/private/admin", w.challenge.URL + "/shop"} {
		c.Visit(u)
	}
	agents := w.userAgents()
	if len(agents) != 1 || agents[userAgent] == 0 {
		t.Errorf("hosts saw User-Agents %v, want only %q", agents, userAgent)
	}
	if got := w.requests("site", "/private/admin"); got != 0 {
		t.Errorf("/private/admin served %d times, want 0", got)
	}
}

// TestSetProxyFuncReplacesTheChain pins down the gotcha documented in the
// package: after SetProxyFunc, Colly no longer sends through the chain, so
// robots.txt and halts are silently ignored.
func TestSetProxyFuncReplacesTheChain(t *testing.T) {
	w := newWeb()
	defer w.close()
	pool, err := newPool(w)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	ctx := context.Background()
	chain, err := newChain(pool, &attempts{n: map[string]int{}}, func(egresskit.Escalation) {})
	if err != nil {
		t.Fatal(err)
	}

	proxyURL, _ := url.Parse(w.proxies["proxy-a"].URL)
	c := newCollector(ctx, chain)
	c.SetProxyFunc(func(*http.Request) (*url.URL, error) { return proxyURL, nil })

	for _, u := range []string{
		w.site.URL + "/private/admin",
		w.challenge.URL + "/shop",
		w.challenge.URL + "/shop/cart",
	} {
		c.Visit(u) // errors (404, 403) are expected
	}
	if got := w.requests("site", "/private/admin"); got != 1 {
		t.Errorf("/private/admin served %d times, want 1: the chain's robots.txt check was bypassed", got)
	}
	if got := w.hostRequests("challenge"); got != 2 {
		t.Errorf("challenge host served %d pages, want 2: the chain's halt was bypassed", got)
	}
	if got := w.requests("site", "/robots.txt"); got != 0 {
		t.Errorf("robots.txt fetched %d times, want 0: nothing consulted it", got)
	}
}
