package classify_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/egresskit/egresskit/classify"
)

// chunkReader hands out r's bytes in reads of the sizes cuts gives (1 to
// 256 bytes each, cycling), as a slow or fragmenting network would.
type chunkReader struct {
	r    io.Reader
	cuts []byte
	i    int
}

func (c *chunkReader) Read(p []byte) (int, error) {
	n := len(p)
	if len(c.cuts) > 0 {
		n = min(n, int(c.cuts[c.i%len(c.cuts)])+1)
		c.i++
	}
	return c.r.Read(p[:n])
}

var fuzzTypes = []string{"text/html; charset=utf-8", "", "application/json", "text/plain", "application/xhtml+xml", "image/png"}

// FuzzSplitAndEncoded checks three properties of classification: a body
// delivered in arbitrary fragments is classified exactly as the same body
// delivered whole; so is a response a Transport returned before reading
// its body (a 2xx answer, judged as the caller reads it, or when the caller
// asks Of first); and a gzip-encoded body (the caller asked for gzip) is
// classified as the plain body whenever the peeked compressed bytes decode
// to at least the plain head; in every case the caller reads the bytes
// that were sent.
func FuzzSplitAndEncoded(f *testing.F) {
	for _, name := range []string{
		"block/cloudflare/cloudscraper_js_challenge_02_11_2021.html",
		"block/distil/commoncrawl_getmein.com.html",
		"block/perimeterx/commoncrawl_adorama.com.html",
		"block/sucuri/cloudscraper-js_sucuri_waf_11_08_2019.html",
		"benign/errors/nginx_403.html",
	} {
		b, err := os.ReadFile(filepath.Join(corpusDir, name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(403, uint8(0), b, []byte{3, 200, 17})
		f.Add(200, uint8(1), b, []byte{0})
	}
	f.Add(403, uint8(2), []byte(`{"url":"https://geo.captcha-delivery.com/captcha/"}`), []byte{1})
	f.Add(429, uint8(3), []byte("Incapsula incident ID"), []byte(nil))
	f.Fuzz(func(t *testing.T, status int, typ uint8, body, cuts []byte) {
		status = 100 + abs(status)%500
		h := http.Header{}
		if ct := fuzzTypes[int(typ)%len(fuzzTypes)]; ct != "" {
			h.Set("Content-Type", ct)
		}
		c := classify.New(classify.Config{AgentToken: agent})
		whole, got := classifyReader(t, c, status, h, bytes.NewReader(body))
		if !bytes.Equal(got, body) {
			t.Fatalf("whole: read %d bytes, want %d", len(got), len(body))
		}
		split, got := classifyReader(t, c, status, h, &chunkReader{r: bytes.NewReader(body), cuts: cuts})
		if !bytes.Equal(got, body) {
			t.Fatalf("split: read %d bytes, want %d", len(got), len(body))
		}
		if !sameDecision(whole, split) {
			t.Fatalf("split delivery = %v %q %v, whole = %v %q %v", split.Outcome, split.Reason, split.Markers, whole.Outcome, whole.Reason, whole.Markers)
		}
		for _, ofFirst := range []bool{false, true} {
			resp := lazyResponse(t, c, status, h, &chunkReader{r: bytes.NewReader(body), cuts: cuts})
			var r classify.Result
			if ofFirst {
				r = classify.Of(resp, nil)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || !bytes.Equal(got, body) {
				t.Fatalf("transport (Of first %v): read %d bytes, %v; want %d", ofFirst, len(got), err, len(body))
			}
			if !ofFirst {
				r = classify.Of(resp, nil)
			}
			if !sameDecision(whole, r) || r.Status != whole.Status {
				t.Fatalf("transport (Of first %v) = %v %q %v, whole = %v %q %v", ofFirst, r.Outcome, r.Reason, r.Markers, whole.Outcome, whole.Reason, whole.Markers)
			}
		}

		var zb bytes.Buffer
		zw := gzip.NewWriter(&zb)
		zw.Write(body)
		zw.Close()
		gz := zb.Bytes()
		hz := h.Clone()
		hz.Set("Content-Encoding", "gzip")
		enc, got := classifyReader(t, c, status, hz, &chunkReader{r: bytes.NewReader(gz), cuts: cuts})
		if !bytes.Equal(got, gz) {
			t.Fatalf("gzip: read %d bytes, want the %d encoded bytes", len(got), len(gz))
		}
		if decodedHead(gz[:min(len(gz), classify.DefaultPeekSize)]) >= min(len(body), classify.DefaultPeekSize) && !sameDecision(whole, enc) {
			t.Fatalf("gzip-encoded = %v %q %v, plain = %v %q %v", enc.Outcome, enc.Reason, enc.Markers, whole.Outcome, whole.Reason, whole.Markers)
		}
	})
}

func abs(n int) int {
	if n < 0 {
		return -(n + 1)
	}
	return n
}

func sameDecision(a, b classify.Result) bool {
	return a.Outcome == b.Outcome && a.Reason == b.Reason && slices.Equal(a.Markers, b.Markers)
}

// decodedHead returns how many plain bytes a gzip prefix decodes to.
func decodedHead(prefix []byte) int {
	zr, err := gzip.NewReader(bytes.NewReader(prefix))
	if err != nil {
		return 0
	}
	n, _ := io.Copy(io.Discard, zr)
	return int(n)
}

func classifyReader(t *testing.T, c *classify.Classifier, status int, h http.Header, r io.Reader) (classify.Result, []byte) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, "http://127.0.0.1/x", nil)
	resp := &http.Response{StatusCode: status, Header: h, ContentLength: -1, Request: req, Body: io.NopCloser(r)}
	res := c.Classify(resp, nil)
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return res, got
}
