package classify

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/egresskit/egresskit/internal/cputime"
)

// benchHeads are the first KiB of ordinary HTML pages of the corpus: what
// a 2xx answer's scan reads (DefaultOKPeekSize).
var benchHeads = []string{
	"goquery/gowiki.html",
	"goquery/metalreview.html",
	"goquery/gotesting.html",
	"go/doc__go_spec.html",
	"captured/scrapling_cf.solved_page.html",
	"debian/bzip2/manual.html",
}

// BenchmarkScan measures the scan of decide alone on real 1 KiB heads,
// for a 200 (the ordinary answer) and a 403 (every needle, the token
// included).
func BenchmarkScan(b *testing.B) {
	c := New(Config{AgentToken: "CorpusBot"})
	for _, status := range []int{200, 403} {
		for _, name := range benchHeads {
			body, err := os.ReadFile(filepath.Join("testdata/corpus/benign", name))
			if err != nil {
				b.Fatal(err)
			}
			head := body[:min(len(body), DefaultOKPeekSize)]
			b.Run(filepath.Base(name)+"/"+statusReason(status)[len("status "):], func(b *testing.B) {
				found := make([]int32, c.needles)
				b.SetBytes(int64(len(head)))
				b.ReportAllocs()
				cpu := cputime.Process()
				for b.Loop() {
					clear(found)
					c.scan(status, head, found)
				}
				b.ReportMetric(float64(cputime.Process()-cpu)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// benchHead returns the first KiB of a benign corpus page.
func benchHead(t testing.TB, name string) []byte {
	t.Helper()
	body, err := os.ReadFile(filepath.Join("testdata/corpus/benign", name))
	if err != nil {
		t.Fatal(err)
	}
	return body[:min(len(body), DefaultOKPeekSize)]
}

// TestSkipScanPlanted plants each needle of the default Classifier's skip
// search, in upper case, at every offset of a real 1 KiB head (the very
// start and end, and across every lane boundary), and at both ends of
// heads of every length up to 400 bytes (the one-lane path, and heads
// shorter than the needle); the search must agree with bytes.Index each
// time.
func TestSkipScanPlanted(t *testing.T) {
	c := New(Config{})
	k := c.skip
	if k == nil {
		t.Fatal("the default Classifier has no skip search")
	}
	needles := defaultNeedles()
	if len(needles) != c.needles {
		t.Fatalf("defaultNeedles has %d needles, the Classifier %d", len(needles), c.needles)
	}
	// bytes.Index for the skip search's needles only (an empty needle
	// is never found).
	searched := make([]string, len(needles))
	for _, id := range k.ids {
		searched[id] = needles[id]
	}
	head := benchHead(t, "goquery/gowiki.html")
	hay := make([]byte, 0, len(head))
	check := func(h []byte) {
		t.Helper()
		checkSkip(t, k, needles, h, naiveEnds(searched, h))
	}
	for _, n := range k.needles {
		up := bytes.ToUpper([]byte(n))
		for o := 0; o+len(n) <= len(head); o++ {
			hay = append(append(append(hay[:0], head[:o]...), up...), head[o+len(n):]...)
			check(hay)
		}
		for size := range 400 {
			h := head[:size]
			if size >= len(n) {
				check(append(append(hay[:0], up...), h[len(n):]...))
				check(append(append(hay[:0], h[:size-len(n)]...), up...))
			} else {
				check(append(hay[:0], up[:size]...))
			}
		}
	}
	// Overlapping needles, and one needle twice (the first occurrence
	// counts).
	check([]byte("<div id=PX-CAPTCHA-DELIVERY.COM>px-captcha</div>"))
	check([]byte("access denied access denied errors.edgesuite.neterrors.edgesuite.net"))
}

// FuzzScanDecides checks that Classifier.scan, which skips the automaton
// for most statuses when the skip search finds nothing (and then reports
// so, found zero), leaves every decision as the automaton alone would: each body marker that applies to
// the status matches on both or on neither, and for 401 and 403 the agent
// token and the secondary rate limit are found on both or neither.
func FuzzScanDecides(f *testing.F) {
	for _, name := range benchHeads {
		f.Add(200, benchHead(f, name))
	}
	f.Add(200, []byte("<title>Access Denied</title> Reference #18.2"))
	f.Add(404, []byte(`<div id="px-captcha">`))
	f.Add(503, []byte(`<title>Just a moment...</title>`))
	f.Add(403, []byte(`CorpusBot: secondary rate limit`))
	f.Add(202, []byte(`window.gokuProps = {}`))
	c := New(Config{AgentToken: "CorpusBot"})
	f.Fuzz(func(t *testing.T, status int, head []byte) {
		fast := make([]int32, c.needles)
		full := make([]int32, c.needles)
		hit := c.scan(status, head, fast)
		c.ac.scan(head, full)
		if !hit && slices.ContainsFunc(fast, func(e int32) bool { return e > 0 }) {
			t.Errorf("status %d, %q: scan reports nothing found but records %v", status, head, fast)
		}
		for i := range c.bodies {
			m := &c.bodies[i]
			if m.appliesTo(status) && m.matchBody(fast) != m.matchBody(full) {
				t.Errorf("status %d, %q: marker %s body match %v, automaton alone %v", status, head, m.name, m.matchBody(fast), m.matchBody(full))
			}
		}
		if status == 401 || status == 403 {
			for _, id := range []int{c.token, c.secondary} {
				if (fast[id] > 0) != (full[id] > 0) {
					t.Errorf("status %d, %q: needle %d found %v, automaton alone %v", status, head, id, fast[id] > 0, full[id] > 0)
				}
			}
		}
	})
}
