package classify_test

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"io"
	"net/http"
	"slices"
	"testing"

	"github.com/egresskit/egresskit/classify"
)

func gzipped(t testing.TB, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	w.Write([]byte(s))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func zlibbed(t testing.TB, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	w := zlib.NewWriter(&b)
	w.Write([]byte(s))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func deflated(t testing.TB, s string) []byte {
	t.Helper()
	var b bytes.Buffer
	w, _ := flate.NewWriter(&b, flate.DefaultCompression)
	w.Write([]byte(s))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestBodyKinds pins which bodies the markers read: HTML always, JSON only
// for markers that say so, untyped bodies by their head, and never
// text/plain or other types, where only the agent-token rule applies.
func TestBodyKinds(t *testing.T) {
	pxJSON := `{"appId":"PXabc","jsClientSrc":"/abc/init.js","firstPartyEnabled":true,"vid":"","uuid":"u","hostUrl":"/abc/xhr","blockScript":"/abc/captcha/captcha.js?a=c"}`
	source := "// detect.go: recognise block pages\nvar sigs = []string{\"Incapsula incident ID\", \"Attention Required! | Cloudflare\", \"captcha-delivery.com\"}\n"
	cases := []struct {
		name        string
		status      int
		ctype       string
		body        string
		want        classify.Outcome
		markers     []string
		uninspected bool
	}{
		{"source as text/plain", 403, "text/plain; charset=utf-8", source, classify.Permanent, nil, false},
		{"source as text/plain 200", 200, "text/plain", source, classify.OK, nil, false},
		{"page quoted as javascript", 200, "application/javascript", pxPage, classify.OK, nil, false},
		{"page as text/html", 403, "text/html", pxPage, classify.Refused, []string{"perimeterx"}, false},
		{"page as xhtml", 403, "application/xhtml+xml", pxPage, classify.Refused, []string{"perimeterx"}, false},
		{"untyped html head", 403, "", "\n  <!DOCTYPE html>" + pxPage, classify.Refused, []string{"perimeterx"}, false},
		{"untyped text head", 403, "", "Incapsula incident ID quoted in a README", classify.Permanent, nil, false},
		{"json block response", 403, "application/json", pxJSON, classify.Refused, []string{"perimeterx"}, false},
		{"json datadome", 403, "application/json; charset=utf-8", `{"url":"https://geo.captcha-delivery.com/captcha/?initialCid=x"}`, classify.Refused, []string{"datadome"}, false},
		{"problem+json datadome", 403, "application/problem+json", `{"url":"https://geo.captcha-delivery.com/captcha/"}`, classify.Refused, []string{"datadome"}, false},
		{"json quoting an html-only marker", 403, "application/json", `{"page":"<title>Access to this page has been denied</title> Incapsula incident ID"}`, classify.Permanent, nil, false},
		{"untyped json", 403, "", " " + pxJSON, classify.Refused, []string{"perimeterx"}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			if tc.ctype != "" {
				h.Set("Content-Type", tc.ctype)
			}
			got, body := classifyBody(t, classify.New(classify.Config{}), tc.status, h, []byte(tc.body))
			if got.Outcome != tc.want || !slices.Equal(got.Markers, tc.markers) || got.Uninspected != tc.uninspected {
				t.Errorf("Classify = %v %v uninspected=%v, want %v %v uninspected=%v", got.Outcome, got.Markers, got.Uninspected, tc.want, tc.markers, tc.uninspected)
			}
			if !bytes.Equal(body, []byte(tc.body)) {
				t.Errorf("body read = %d bytes, want the %d sent", len(body), len(tc.body))
			}
		})
	}
}

func TestTextPlainStillNamesAgent(t *testing.T) {
	h := http.Header{"Content-Type": {"text/plain"}}
	got, _ := classifyBody(t, classify.New(classify.Config{AgentToken: agent}), 403, h, []byte("ExampleBot is not allowed here."))
	if got.Outcome != classify.Refused || got.Reason != "agent named" {
		t.Errorf("Classify = %v %q, want refused, agent named", got.Outcome, got.Reason)
	}
}

// TestEncodedPeek: a body the caller asked to receive compressed is
// decoded for matching (gzip, x-gzip, zlib and raw deflate) and handed
// over still compressed; br and zstd are not decoded and the Result says
// the body went uninspected.
func TestEncodedPeek(t *testing.T) {
	page := cloudflarePage
	cases := []struct {
		name        string
		enc         string
		body        []byte
		want        classify.Outcome
		uninspected bool
	}{
		{"gzip", "gzip", gzipped(t, page), classify.Refused, false},
		{"x-gzip", "x-gzip", gzipped(t, page), classify.Refused, false},
		{"deflate zlib", "deflate", zlibbed(t, page), classify.Refused, false},
		{"deflate raw", "deflate", deflated(t, page), classify.Refused, false},
		{"identity listed", "identity", []byte(page), classify.Refused, false},
		{"gzip benign", "gzip", gzipped(t, plainPage), classify.Permanent, false},
		{"gzip header, plain bytes", "gzip", []byte(page), classify.Permanent, false},
		{"truncated gzip", "gzip", gzipped(t, page)[:40], classify.Permanent, false},
		{"br", "br", []byte("\x1b\x00\x00compressed"), classify.Permanent, true},
		{"zstd", "zstd", []byte("\x28\xb5\x2f\xfdcompressed"), classify.Permanent, true},
		{"two codings", "gzip, br", gzipped(t, page), classify.Permanent, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{"Content-Type": {"text/html"}, "Content-Encoding": {tc.enc}}
			got, body := classifyBody(t, classify.New(classify.Config{}), 403, h, tc.body)
			if got.Outcome != tc.want || got.Uninspected != tc.uninspected {
				t.Errorf("Classify = %v uninspected=%v, want %v uninspected=%v", got.Outcome, got.Uninspected, tc.want, tc.uninspected)
			}
			if !bytes.Equal(body, tc.body) {
				t.Errorf("body read = %d bytes, want the %d encoded bytes sent", len(body), len(tc.body))
			}
		})
	}
}

// TestEncodedPeekBounded: a gzip bomb in the head decodes to no more than
// the peek size, and the caller still gets the compressed bytes.
func TestEncodedPeekBounded(t *testing.T) {
	bomb := gzipped(t, string(bytes.Repeat([]byte("A"), 8<<20)))
	h := http.Header{"Content-Type": {"text/html"}, "Content-Encoding": {"gzip"}}
	got, body := classifyBody(t, classify.New(classify.Config{}), 403, h, bomb)
	if got.Outcome != classify.Permanent {
		t.Errorf("Classify = %v, want permanent", got.Outcome)
	}
	if !bytes.Equal(body, bomb) {
		t.Errorf("body read = %d bytes, want the %d sent", len(body), len(bomb))
	}
}

func classifyBody(t testing.TB, c *classify.Classifier, status int, h http.Header, body []byte) (classify.Result, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1/x", nil)
	resp := &http.Response{StatusCode: status, Header: h, ContentLength: -1, Request: req,
		Body: io.NopCloser(bytes.NewReader(body))}
	r := c.Classify(resp, nil)
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return r, got
}

// readSpy records whether anything read from it.
type readSpy struct {
	r    io.Reader
	read bool
}

func (s *readSpy) Read(p []byte) (int, error) { s.read = true; return s.r.Read(p) }

// TestWhatIsPeeked: a JSON API's successful answer and a text/plain file are
// handed over without being read first; a JSON refusal and an HTML page are
// read, since markers may match them.
func TestWhatIsPeeked(t *testing.T) {
	for _, tc := range []struct {
		status int
		ctype  string
		want   bool
	}{
		{200, "application/json", false},
		{404, "application/json", false},
		{403, "application/json", true},
		{429, "application/json", true},
		{200, "text/plain", false},
		{404, "text/plain", false},
		{200, "image/png", false},
		{200, "text/html", true},
		{200, "", true},
	} {
		spy := &readSpy{r: bytes.NewReader([]byte(`{"ok":true}`))}
		req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1/x", nil)
		resp := &http.Response{StatusCode: tc.status, Header: http.Header{}, Request: req, Body: io.NopCloser(spy)}
		if tc.ctype != "" {
			resp.Header.Set("Content-Type", tc.ctype)
		}
		classify.New(classify.Config{}).Classify(resp, nil)
		if spy.read != tc.want {
			t.Errorf("%d %q: body read during Classify = %v, want %v", tc.status, tc.ctype, spy.read, tc.want)
		}
		resp.Body.Close()
	}
}
