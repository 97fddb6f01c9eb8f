package robotstxt_test

import (
	"encoding/json"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/egresskit/egresskit/internal/robotstxt"
)

// vectorFile holds the matcher vectors re-expressed from Google's robots.txt
// test suite; see its "about" field.
type vectorFile struct {
	Cases []struct {
		Name   string
		Ref    string
		Robots string
		Checks [][3]any // agents, url, allowed
	}
}

type vector struct {
	name    string
	robots  string
	agents  []string
	url     string
	allowed bool
}

var repeatRE = regexp.MustCompile(`\{(\d+)\*([^}]*)\}`)

// expand replaces every {N*s} in v with s repeated N times.
func expand(v string) string {
	return repeatRE.ReplaceAllStringFunc(v, func(m string) string {
		sub := repeatRE.FindStringSubmatch(m)
		n, _ := strconv.Atoi(sub[1])
		return strings.Repeat(sub[2], n)
	})
}

func loadVectors(t *testing.T) []vector {
	t.Helper()
	raw, err := os.ReadFile("testdata/google_vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var f vectorFile
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	var vs []vector
	for _, c := range f.Cases {
		for i, ch := range c.Checks {
			vs = append(vs, vector{
				name:    c.Name + "/" + strconv.Itoa(i),
				robots:  expand(c.Robots),
				agents:  strings.Split(ch[0].(string), ","),
				url:     expand(ch[1].(string)),
				allowed: ch[2].(bool),
			})
		}
	}
	return vs
}

// deviations are the vectors on which egresskit answers differently from
// Google's suite on purpose, with the reason. Google's C++ API takes a URL
// that is already percent-encoded, so a raw "ツ" in the URL never matches
// the rule's "%E3%83%84" and the suite expects false; Rules.Allowed takes a
// *url.URL and percent-encodes octets outside US-ASCII before matching, as
// RFC 9309 section 2.2.2 asks, so the same path matches and is allowed.
var deviations = map[string]string{
	"encoding: raw UTF-8 in the rule is percent-encoded/1": "RFC 9309 2.2.2: raw UTF-8 in the URL is percent-encoded before matching",
	"encoding: percent-encoded UTF-8 in the rule/1":        "RFC 9309 2.2.2: raw UTF-8 in the URL is percent-encoded before matching",
}

// TestGoogleVectors checks Parse and Rules.Allowed against every matcher
// vector, with Google's expectations: every vector must pass except the
// deliberate deviations listed above, and each of those must still differ
// (so that the list never outlives its reason). The parser comparison in
// bench/robots runs the same file against other parsers.
func TestGoogleVectors(t *testing.T) {
	vs := loadVectors(t)
	if len(vs) != 148 {
		t.Fatalf("loaded %d vectors, want 148", len(vs))
	}
	passed, deviated := 0, 0
	seen := map[string]bool{}
	for _, v := range vs {
		u, err := url.Parse(v.url)
		if err != nil {
			t.Fatalf("%s: url.Parse: %v", v.name, err)
		}
		got := true
		for _, agent := range v.agents {
			got = got && robotstxt.Parse([]byte(v.robots), agent).Allowed(u)
		}
		reason, deviates := deviations[v.name]
		seen[v.name] = true
		switch {
		case got == v.allowed && !deviates:
			passed++
		case got == v.allowed:
			t.Errorf("%s: listed as a deviation (%s) but now agrees with Google; remove it from the list", v.name, reason)
		case deviates:
			deviated++
			t.Logf("%s: deviation on purpose: Allowed(%.80q) = %v, Google expects %v (%s)", v.name, v.url, got, v.allowed, reason)
		default:
			t.Errorf("%s: Allowed(%.80q) for %q = %v, want %v", v.name, v.url, v.agents, got, v.allowed)
		}
	}
	for name := range deviations {
		if !seen[name] {
			t.Errorf("deviation %q names no vector", name)
		}
	}
	t.Logf("google vectors: %d/%d passed, %d deliberate deviations", passed, len(vs), deviated)
	if want := len(vs) - len(deviations); passed != want {
		t.Errorf("passed %d/%d vectors, want %d/%d", passed, len(vs), want, len(vs))
	}
}
