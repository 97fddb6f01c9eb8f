package robotstxt_test

import (
	"strings"
	"testing"

	"github.com/egresskit/egresskit/internal/robotstxt"
	"github.com/egresskit/egresskit/robots"
)

// TestAllowedPercentEncodingCase: a percent-encoding in the URL matches
// the same octet in a rule whatever the case of its hex digits, for every
// hex digit at the ends of its ranges (0, 9, a, f, A, F).
func TestAllowedPercentEncodingCase(t *testing.T) {
	for _, esc := range []string{"%9f", "%af", "%Fa", "%0a", "%Af", "%f0", "%9a"} {
		rules := robotstxt.Parse([]byte("User-agent: *\nDisallow: /x"+strings.ToUpper(esc)+"\n"), "FooBot")
		if u := mustURL(t, "http://example.com/x"+esc); rules.Allowed(u) {
			t.Errorf("Allowed(/x%s) under Disallow: /x%s = true, want false", esc, strings.ToUpper(esc))
		}
	}
	// Not an encoding: left alone, and matched as written.
	rules := robotstxt.Parse([]byte("User-agent: *\nDisallow: /x%G0\n"), "FooBot")
	if u := mustURL(t, "http://example.com/x%25g0"); !rules.Allowed(u) {
		t.Errorf("Allowed(/x%%25g0) under Disallow: /x%%G0 = false, want true")
	}
}

// TestCheckCacheBytes: beyond MaxCacheBytes the least recently checked
// host is evicted and fetched again, even when MaxHosts is far away.
func TestCheckCacheBytes(t *testing.T) {
	for _, tt := range []struct {
		name     string
		maxBytes int64
		want     int // fetches of a.test, and of b.test
	}{
		{"room for every host", 1 << 20, 1},
		{"room for two hosts", 700, 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := &memoryHosts{}
			c := robotstxt.New(robots.Config{Transport: m, MaxCacheBytes: tt.maxBytes, MaxHosts: 1000})
			for _, h := range []string{"a.test", "b.test", "c.test", "d.test", "a.test", "b.test"} {
				check(t, c, "http://"+h+"/x")
			}
			for _, h := range []string{"a.test", "b.test"} {
				if got := m.count(h); got != tt.want {
					t.Errorf("%s fetched %d times, want %d", h, got, tt.want)
				}
			}
		})
	}
}

// TestCheckMaxHostsExact: MaxHosts hosts fit; the one after them evicts
// the least recently checked.
func TestCheckMaxHostsExact(t *testing.T) {
	m := &memoryHosts{}
	c := robotstxt.New(robots.Config{Transport: m, MaxHosts: 2})
	for _, h := range []string{"a.test", "b.test", "a.test", "b.test"} {
		check(t, c, "http://"+h+"/x")
	}
	if a, b := m.count("a.test"), m.count("b.test"); a != 1 || b != 1 {
		t.Errorf("two hosts under MaxHosts 2 fetched %d and %d times, want 1 and 1", a, b)
	}
	check(t, c, "http://c.test/x") // evicts a.test, the least recently checked
	check(t, c, "http://b.test/x")
	check(t, c, "http://a.test/x")
	if a, b := m.count("a.test"), m.count("b.test"); a != 2 || b != 1 {
		t.Errorf("after a third host: a.test fetched %d times, b.test %d; want 2 and 1", a, b)
	}
}

// TestCheckZeroConfigKeepsHosts: the zero Config caches many hosts, not
// none.
func TestCheckZeroConfigKeepsHosts(t *testing.T) {
	m := &memoryHosts{}
	c := robotstxt.New(robots.Config{Transport: m})
	for _, h := range []string{"a.test", "b.test", "c.test", "a.test", "b.test"} {
		check(t, c, "http://"+h+"/x")
	}
	if a, b := m.count("a.test"), m.count("b.test"); a != 1 || b != 1 {
		t.Errorf("a.test fetched %d times, b.test %d; want 1 and 1", a, b)
	}
}
