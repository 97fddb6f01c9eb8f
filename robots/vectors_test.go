package robots_test

import (
	"encoding/json"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/egresskit/egresskit/robots"
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

// TestGoogleVectors checks Parse and Rules.Allowed against every matcher
// vector; the parser comparison in bench/robots runs the same file against
// other parsers.
func TestGoogleVectors(t *testing.T) {
	vs := loadVectors(t)
	if len(vs) != 148 {
		t.Fatalf("loaded %d vectors, want 148", len(vs))
	}
	failed := 0
	for _, v := range vs {
		u, err := url.Parse(v.url)
		if err != nil {
			t.Fatalf("%s: url.Parse: %v", v.name, err)
		}
		got := true
		for _, agent := range v.agents {
			got = got && robots.Parse([]byte(v.robots), agent).Allowed(u)
		}
		if got != v.allowed {
			failed++
			t.Errorf("%s: Allowed(%.80q) for %q = %v, want %v", v.name, v.url, v.agents, got, v.allowed)
		}
	}
	t.Logf("google vectors: %d/%d passed", len(vs)-failed, len(vs))
}
