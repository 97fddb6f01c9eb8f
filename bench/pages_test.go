package bench

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// A page is a response body the benchmarks send, with its Content-Type.
type page struct {
	name        string // as in the benchmark name: body=NAME
	contentType string
	body        []byte
	err         error // why the page could not be read; body is nil then
}

// textPage is the canned 128-byte text/plain body. The classifier does not
// read text/plain answers, so it measures the chain without a peek.
var textPage = page{name: "text-128B", contentType: "text/plain; charset=utf-8", body: cannedBody}

// The real HTML pages, read once. A crawler fetches HTML, which the
// classifier peeks at for challenge markers (its first 4 KiB).
//
//   - html-32KiB: an article page, the first 32 KiB of the Wikipedia
//     article "Go (programming language)" as kept in goquery v1.11.0
//     (testdata/gowiki.html), from the classifier's refusal corpus
//     (classify/testdata/corpus/benign/goquery/gowiki.html, whose manifest
//     entry records that provenance).
//   - html-256KiB: a long document, the first 256 KiB of The Go Programming
//     Language Specification as the Go distribution ships it
//     ($GOROOT/doc/go_spec.html, of the toolchain running the benchmarks:
//     the page's body, which go.dev serves inside its site's <html> shell).
var (
	htmlPagesOnce   sync.Once
	html32, html256 page
)

func loadHTMLPages() {
	html32 = readPage("html-32KiB", filepath.Join("..", "classify", "testdata", "corpus", "benign", "goquery", "gowiki.html"), 32<<10)
	html256 = readPage("html-256KiB", filepath.Join(goroot(), "doc", "go_spec.html"), 256<<10)
}

// readPage returns the first n bytes of the HTML file at path as a page;
// a file shorter than n is an error, so that a page is always its size.
func readPage(name, path string, n int) page {
	p := page{name: name, contentType: "text/html; charset=utf-8"}
	b, err := os.ReadFile(path)
	switch {
	case err != nil:
		p.err = err
	case len(b) < n:
		p.err = fmt.Errorf("%s has %d bytes, fewer than %d", path, len(b), n)
	default:
		p.body = b[:n]
	}
	return p
}

// goroot returns the Go root of the toolchain: $GOROOT, else what
// `go env GOROOT` says.
func goroot() string {
	if r := os.Getenv("GOROOT"); r != "" {
		return r
	}
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// pages returns the bodies of BenchmarkOverhead and BenchmarkLoopback, in
// the order of the results tables.
func pages() []*page {
	htmlPagesOnce.Do(loadHTMLPages)
	return []*page{&textPage, &html32, &html256}
}

// pageNamed returns the page called name, or nil.
func pageNamed(name string) *page {
	for _, p := range pages() {
		if p.name == name {
			return p
		}
	}
	return nil
}

// need skips tb when p could not be read.
func (p *page) need(tb testing.TB) {
	tb.Helper()
	if p.err != nil {
		tb.Skipf("page %s: %v", p.name, p.err)
	}
}

// TestPages checks that every page is there and of its size, and that the
// loopback server and memTransport serve it as it is.
func TestPages(t *testing.T) {
	for _, p := range pages() {
		if p.err != nil {
			t.Errorf("page %s: %v", p.name, p.err)
			continue
		}
		if want := map[string]int{"text-128B": 128, "html-32KiB": 32 << 10, "html-256KiB": 256 << 10}[p.name]; len(p.body) != want {
			t.Errorf("page %s has %d bytes, want %d", p.name, len(p.body), want)
		}
		// The specification is served as a fragment (the site adds the
		// <html> shell); both start with HTML markup.
		if head := strings.ToLower(string(p.body[:min(len(p.body), 4096)])); strings.HasPrefix(p.contentType, "text/html") &&
			!strings.Contains(head, "<html") && !strings.Contains(head, "<h2") {
			t.Errorf("page %s does not start like HTML: %q", p.name, p.body[:80])
		}
	}
}
