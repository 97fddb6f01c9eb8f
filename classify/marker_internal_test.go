package classify

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// refFold is the obvious ASCII lower-casing.
func refFold(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		out[i] = foldByte(c)
	}
	return out
}

// naiveEnds is the matcher the automaton must agree with: one bytes.Index
// per needle over a lower-cased copy of hay, giving the offset just past
// each needle's first occurrence (0 when absent).
func naiveEnds(needles []string, hay []byte) []int32 {
	folded := refFold(hay)
	ends := make([]int32, len(needles))
	for i, n := range needles {
		if n == "" {
			continue
		}
		if j := bytes.Index(folded, []byte(lowerASCII(n))); j >= 0 {
			ends[i] = int32(j + len(n))
		}
	}
	return ends
}

// checkAutomaton checks the automaton over needles, and the skip search
// over those of them long enough for it, against naiveEnds.
func checkAutomaton(t *testing.T, needles []string, hay []byte) {
	t.Helper()
	a := newAutomaton(needles)
	got := make([]int32, len(needles))
	a.scan(hay, got)
	want := naiveEnds(needles, hay)
	for i := range needles {
		if got[i] != want[i] {
			t.Fatalf("needle %q in %q: automaton ends at %d, bytes.Index at %d", needles[i], hay, got[i], want[i])
		}
	}
	var long []string
	var ids []int
	for i, n := range needles {
		if len(n) >= minSkipWindow {
			long = append(long, lowerASCII(n))
			ids = append(ids, i)
		}
	}
	if k := newSkipScan(long, ids); k != nil {
		checkSkip(t, k, needles, hay, want)
	}
}

// checkSkip checks that k finds in hay exactly the needles (of the whole
// set needles, whose naiveEnds are want) given to it, at their first
// occurrence, and reports whether it found any.
func checkSkip(t *testing.T, k *skipScan, needles []string, hay []byte, want []int32) {
	t.Helper()
	got := make([]int32, len(needles))
	any := k.scan(hay, got)
	wantAny := false
	for i := range needles {
		w := int32(0)
		if slices.Contains(k.ids, i) {
			w = want[i]
		}
		wantAny = wantAny || w > 0
		if got[i] != w {
			t.Fatalf("needle %q in %q (%d bytes): skip search ends at %d, bytes.Index at %d", needles[i], hay, len(hay), got[i], w)
		}
	}
	if any != wantAny {
		t.Fatalf("skip search over %q reports %v, want %v", hay, any, wantAny)
	}
}

// FuzzAutomaton checks that the automaton, and the skip search over the
// needles long enough for it, find exactly what one bytes.Index per needle
// finds in the lower-cased bytes, at the same first occurrence, for the
// default needles and for needles of the fuzzer's own (separated by NUL),
// overlapping, nested or differing only in case; in the hay as given and
// repeated past 2 KiB, which both cut into lanes.
func FuzzAutomaton(f *testing.F) {
	f.Add([]byte("<TITLE>Just A Moment...</TITLE>"), "just a moment...\x00MOMENT\x00t a m")
	f.Add([]byte("\xff\xc0ZZ@[`{AZaz"), "az\x00@[\x00\xc0z")
	f.Add(bytes.Repeat([]byte("_x"), 200), "_y\x00x_x_x_y\x00_x_x_")
	f.Add([]byte("aaaaaaaaab"), "aab\x00aaab\x00ab\x00b\x00aaaaaaaaaaa")
	f.Add([]byte("ushers"), "he\x00she\x00his\x00hers")
	f.Add([]byte("PX-CAPTCHA-captcha-delivery.com"), "px-captcha-c\x00captcha-del\x00y.com")
	f.Add([]byte("abcabcabcabcabcd"), "abcabcabcd\x00bcabca\x00cabcabcd")
	f.Fuzz(func(t *testing.T, hay []byte, custom string) {
		needles := append(defaultNeedles(), strings.Split(custom, "\x00")...)
		checkAutomaton(t, needles, hay)
		if len(hay) > 0 {
			// Long enough for the four lanes of scan, with occurrences
			// across every lane boundary.
			checkAutomaton(t, needles, bytes.Repeat(hay, 2048/len(hay)+1))
		}
	})
}

// defaultNeedles returns the needles of the default Classifier.
func defaultNeedles() []string {
	var ns needles
	compile(DefaultMarkers(), &ns)
	ns.id(secondaryRateLimit)
	return ns.list
}

// TestAutomatonCorpus runs the automaton and the naive matcher over every
// page of the refusal corpus, benign and block, with the default needles.
func TestAutomatonCorpus(t *testing.T) {
	needles := append(defaultNeedles(), "corpusbot")
	n := 0
	err := filepath.WalkDir("testdata/corpus", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		checkAutomaton(t, needles, b)
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 300 {
		t.Errorf("checked %d corpus files, want at least 300", n)
	}
}

// TestAutomatonManyNeedles covers more needles than decide records on its
// stack, and needles sharing prefixes and suffixes.
func TestAutomatonManyNeedles(t *testing.T) {
	var needles []string
	var hay strings.Builder
	for i := range 300 {
		needles = append(needles, fmt.Sprintf("Marker-%03d-End", i))
		if i%7 == 0 {
			fmt.Fprintf(&hay, "<p>MARKER-%03d-end</p>", i)
		}
	}
	checkAutomaton(t, needles, []byte(hay.String()))

	ms := make([]Marker, len(needles))
	for i, n := range needles {
		ms[i] = Marker{Name: fmt.Sprint("m", i), Body: n}
	}
	c := New(Config{Markers: ms})
	if c.needles <= maxStackNeedles {
		t.Fatalf("%d needles, want more than %d", c.needles, maxStackNeedles)
	}
	r := c.Classify(&http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/html"}},
		Body: io.NopCloser(strings.NewReader("<p>marker-294-END</p>"))}, nil)
	if r.Outcome != Refused || len(r.Markers) != 1 || r.Markers[0] != "m294" {
		t.Errorf("Classify = %v %v, want Refused by m294", r.Outcome, r.Markers)
	}
}

// TestAutomatonHostileBody: a head full of near misses costs one pass and
// still finds the needle that follows them.
func TestAutomatonHostileBody(t *testing.T) {
	needles := []string{"_cf_chl_opt"}
	hay := bytes.Repeat([]byte("_cf_chl_op "), 400)
	checkAutomaton(t, needles, hay)
	checkAutomaton(t, needles, append(hay, "_CF_chl_opt"...))
}
