package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

// reused lists the top-level exported names that more than one public
// package declares, each with why the reuse is not two meanings under one
// word where a user meets both. A name declared in a second package fails
// TestNoReusedNames until it is renamed or listed here with its reason.
var reused = map[string]string{
	"New":            "each package's constructor",
	"Config":         "each package's configuration",
	"DefaultConfig":  "each package's configuration with its defaults filled in, for printing",
	"Transport":      "each package's http.RoundTripper",
	"Store":          "the store of per-host state (hoststate.Store; redisstore.Store implements it) and of sessions (sessionstore.Store, which redisstore.NewSessionStore returns): one word, one concept",
	"Run":            "probe.Run runs the preflight checks; hoststatetest.Run and sessiontest.Run run a store implementer's conformance suite — a crawler and a store implementer never meet both",
	"ErrInvalidHost": "a host that cannot be keyed: hostkey's, and redisstore's for a key that cannot hold it",
	"Outcomes":       "numbers of results per outcome class: ratelimit's recent outcomes of a host, probe's of a run (with Deadline)",
	"Of":             "classify.Of reads the Result of a response, hostkey.Of the key of a URL: both read a value of their package off what the caller holds",
}

var declRE = regexp.MustCompile(`^pkg ([^,]+), (?:type|func|var|const) ([A-Za-z0-9_]+)`)

// TestNoReusedNames fails when two public packages declare the same
// top-level name and the name is not in reused with its reason, and when
// an entry of reused is no longer reused.
func TestNoReusedNames(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "api", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no API files: %v", err)
	}
	where := map[string][]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			m := declRE.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			if !slices.Contains(where[m[2]], m[1]) {
				where[m[2]] = append(where[m[2]], m[1])
			}
		}
	}
	var names []string
	for name, pkgs := range where {
		if len(pkgs) > 1 {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		if _, ok := reused[name]; !ok {
			t.Errorf("%s is declared in %d packages (%s): rename it, or list it in reused with the reason", name, len(where[name]), strings.Join(where[name], ", "))
		}
	}
	for name := range reused {
		if len(where[name]) < 2 {
			t.Errorf("reused lists %s, which only %v declares: remove the entry", name, where[name])
		}
	}
}
