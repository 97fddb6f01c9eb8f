package main

import (
	"bytes"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// TestJurisdiction runs the example and checks every row: the rule named,
// an endpoint the rule allows, the response carried by that endpoint, and
// with the eu proxies drained the eu hosts refused while the others leave.
func TestJurisdiction(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	before, after, ok := strings.Cut(out.String(), "the eu proxies are drained:")
	if !ok {
		t.Fatalf("no drained section:\n%s", out.String())
	}
	region := map[string]string{"fra-1": "eu", "par-1": "eu", "nyc-1": "us", "iad-dc": "us"}
	rows := func(s string) map[string][]string {
		m := map[string][]string{}
		for _, line := range strings.Split(s, "\n") {
			if f := strings.Fields(line); len(f) >= 6 && f[0] != "host" {
				m[f[0]] = f
			}
		}
		return m
	}
	// columns: host rule endpoint reason left-via result...
	type want struct {
		rule    string
		allowed func(ep string) bool
	}
	eu := func(ep string) bool { return region[ep] == "eu" }
	anyEP := func(ep string) bool { return region[ep] != "" }
	usdc := func(ep string) bool { return ep == "iad-dc" }
	first := map[string]want{
		"www.bund.de": {"eu", eu}, "shop.example.fr": {"eu", eu}, "example.fr": {"eu", eu},
		"www.global.de": {"anywhere", anyEP}, "portal.gov.example": {"us-gov", usdc},
		"example.com": {"-", anyEP}, "news.example.org": {"-", anyEP},
	}
	got := rows(before)
	for host, w := range first {
		f := got[host]
		if f == nil {
			t.Errorf("no row for %s:\n%s", host, before)
			continue
		}
		if f[1] != w.rule || !w.allowed(f[2]) || f[3] != "affinity" || f[4] != f[2] || f[len(f)-1] != host {
			t.Errorf("row %v: want rule %s, an allowed endpoint that carried the request to %s", f, w.rule, host)
		}
	}
	got = rows(after)
	for host, w := range first {
		f := got[host]
		if f == nil {
			t.Errorf("no row for %s after the drain:\n%s", host, after)
			continue
		}
		if w.rule == "eu" {
			if f[1] != "eu" || f[2] != "-" || !strings.Contains(strings.Join(f, " "), "refused") {
				t.Errorf("row %v after the drain: want refused under rule eu", f)
			}
			continue
		}
		if f[1] != w.rule || region[f[2]] != "us" || f[4] != f[2] || f[len(f)-1] != host {
			t.Errorf("row %v after the drain: want rule %s through a us endpoint", f, w.rule)
		}
	}
}
