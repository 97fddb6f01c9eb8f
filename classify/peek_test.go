package classify_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/egresskit/egresskit/classify"
)

// TestOKPeekSize: a 2xx answer is inspected in its first OKPeekSize bytes,
// other statuses (and a 2xx status a marker names) in PeekSize bytes; the
// caller receives the whole body in every case.
func TestOKPeekSize(t *testing.T) {
	pad := func(n int, tail string) []byte {
		return []byte("<!doctype html><html><body>" + strings.Repeat("<p>shop</p>", n/11) + tail)
	}
	early := pad(500, `<div id="px-captcha"></div>`)
	late := pad(2000, `<div id="px-captcha"></div>`)
	aws := pad(2000, `<script>window.gokuProps = {}</script>`)
	cases := []struct {
		name   string
		cfg    classify.Config
		status int
		body   []byte
		want   classify.Outcome
	}{
		{"200 marker in the first KiB", classify.Config{}, 200, early, classify.Refused},
		{"200 marker past the first KiB", classify.Config{}, 200, late, classify.OK},
		{"404 marker past the first KiB", classify.Config{}, 404, late, classify.Refused},
		{"403 marker past the first KiB", classify.Config{}, 403, late, classify.Refused},
		{"202 named by a marker reads PeekSize", classify.Config{}, 202, aws, classify.Refused},
		{"OKPeekSize -1 means PeekSize", classify.Config{OKPeekSize: -1}, 200, late, classify.Refused},
		{"OKPeekSize 4096", classify.Config{OKPeekSize: 4096}, 200, late, classify.Refused},
		{"OKPeekSize 64", classify.Config{OKPeekSize: 64}, 200, early, classify.OK},
		{"OKPeekSize above PeekSize is PeekSize", classify.Config{OKPeekSize: 1 << 20, PeekSize: 1024}, 200, late, classify.OK},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := classify.New(tc.cfg)
			r, got := classifyBody(t, c, tc.status, http.Header{"Content-Type": {"text/html"}}, tc.body)
			if r.Outcome != tc.want {
				t.Errorf("Classify(%d, %d bytes) = %v %q, want %v", tc.status, len(tc.body), r.Outcome, r.Reason, tc.want)
			}
			if !bytes.Equal(got, tc.body) {
				t.Errorf("caller read %d bytes, want the %d given", len(got), len(tc.body))
			}
			// The same body gzip-encoded decides the same.
			gr, gotz := classifyBody(t, c, tc.status, http.Header{"Content-Type": {"text/html"}, "Content-Encoding": {"gzip"}}, gzipBytes(tc.body))
			if gr.Outcome != tc.want || !bytes.Equal(gotz, gzipBytes(tc.body)) {
				t.Errorf("gzip-encoded: Classify = %v, caller read %d bytes; want %v and the %d bytes given", gr.Outcome, len(gotz), tc.want, len(gzipBytes(tc.body)))
			}
		})
	}
}

// TestPeekNeeds measures, for every block page of the corpus, how many
// leading bytes of its body the default Classifier needs to refuse it, and
// checks that a page served with a 2xx status needs no more than
// DefaultOKPeekSize and any other no more than DefaultPeekSize: the bounds
// Config.OKPeekSize rests on. The per-family maxima are logged (go test -v)
// and quoted in DefaultMarkers' documentation.
func TestPeekNeeds(t *testing.T) {
	c := classify.New(classify.Config{AgentToken: "CorpusBot", OKPeekSize: -1})
	type family struct{ vendor, statuses string }
	need := map[family]int{}
	for _, s := range loadCorpus(t) {
		if s.Class != "block" {
			continue
		}
		body, err := os.ReadFile(filepath.Join(corpusDir, s.File))
		if err != nil {
			t.Fatal(err)
		}
		h := http.Header{}
		for k, v := range s.Headers {
			h.Set(k, v)
		}
		refusedAt := func(n int) bool {
			resp := &http.Response{StatusCode: s.Status, Header: h, Body: io.NopCloser(bytes.NewReader(body[:n]))}
			return c.Classify(resp, nil).Outcome == classify.Refused
		}
		if !refusedAt(len(body)) {
			continue // TestCorpus reports a block page not refused
		}
		// A longer head can only find more: search the shortest.
		lo, hi := 0, len(body)
		for lo < hi {
			if mid := (lo + hi) / 2; refusedAt(mid) {
				hi = mid
			} else {
				lo = mid + 1
			}
		}
		limit, class := classify.DefaultPeekSize, "refusal status"
		if s.Status >= 200 && s.Status < 300 {
			limit, class = classify.DefaultOKPeekSize, "2xx"
		}
		if lo > limit {
			t.Errorf("%s (%s, status %d) needs %d bytes, more than the %d read of a %s answer", s.File, s.Vendor, s.Status, lo, limit, class)
		}
		f := family{s.Vendor, class}
		need[f] = max(need[f], lo)
	}
	var lines []string
	for f, n := range need {
		lines = append(lines, fmt.Sprintf("%s, %s: %d bytes", f.vendor, f.statuses, n))
	}
	slices.Sort(lines)
	t.Log("bytes needed per family:\n" + strings.Join(lines, "\n"))
	if len(need) == 0 {
		t.Error("no block page refused")
	}
}
