package classify_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/ratelimit"
	"github.com/egresskit/egresskit/retry"
)

// corpusResults, when set, is where TestCorpus writes its per-vendor table
// (make corpus sets it to testdata/RESULTS.md).
var corpusResults = flag.String("corpus.results", "", "write the corpus table to this Markdown file")

// corpusDir holds the captured pages and their manifest.
const corpusDir = "testdata/corpus"

// Floors on the corpus size, so that a sample removed by mistake fails the
// test rather than silently raising the recall.
const (
	minBlockPages = 58
	minVendors    = 10
	minBenign     = 316
)

// A sample is one manifest entry: a response body with the status and
// headers it was served with, and where it comes from.
type sample struct {
	File    string            `json:"file"`
	Class   string            `json:"class"` // "block" or "benign"
	Vendor  string            `json:"vendor"`
	Family  string            `json:"family"`
	Status  int               `json:"status"`
	Headers map[string]string `json:"headers"`
	Source  struct {
		Origin  string `json:"origin"`
		Path    string `json:"path"`
		Version string `json:"version"`
		License string `json:"license"`
	} `json:"source"`
	Truncated int    `json:"truncated_from"`
	Note      string `json:"note"`
}

func loadCorpus(t *testing.T) []sample {
	t.Helper()
	f, err := os.Open(filepath.Join(corpusDir, "manifest.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []sample
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for line := 1; sc.Scan(); line++ {
		var s sample
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&s); err != nil {
			t.Fatalf("manifest line %d: %v", line, err)
		}
		switch {
		case s.Class != "block" && s.Class != "benign":
			t.Fatalf("manifest line %d: class %q", line, s.Class)
		case s.Status < 100 || s.Status > 599:
			t.Fatalf("manifest line %d: status %d", line, s.Status)
		case s.Source.Origin == "" || s.Source.License == "" || s.Source.Path == "" || s.Source.Version == "":
			t.Fatalf("manifest line %d: %s has incomplete provenance", line, s.File)
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// outcome of one sample through the chain.
type corpusOutcome struct {
	halted  bool
	markers []string
	reason  string
}

// TestCorpus sends every captured page of testdata/corpus through the whole
// chain, one host per sample, from an httptest server that replays the
// page's status, headers and body, once as stored and once gzip-encoded for
// a caller that asked for gzip (the decision must be the same). Every block page should halt its host
// (at least 95% must), no benign response may, and the caller must read
// every body byte for byte.
func TestCorpus(t *testing.T) {
	samples := loadCorpus(t)
	bodies := make([][]byte, len(samples))
	for i, s := range samples {
		b, err := os.ReadFile(filepath.Join(corpusDir, s.File))
		if err != nil {
			t.Fatal(err)
		}
		bodies[i] = b
	}

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		name, gz := strings.CutSuffix(strings.TrimSuffix(r.Host, ".corpus.test"), "-gz")
		i, err := strconv.Atoi(strings.TrimPrefix(name, "s"))
		if err != nil || i < 0 || i >= len(samples) {
			http.Error(w, "no such sample", http.StatusBadRequest)
			return
		}
		for k, v := range samples[i].Headers {
			w.Header().Set(k, v)
		}
		if gz {
			w.Header().Set("Content-Encoding", "gzip")
			w.WriteHeader(samples[i].Status)
			w.Write(gzipBytes(bodies[i]))
			return
		}
		w.WriteHeader(samples[i].Status)
		w.Write(bodies[i])
	}))
	defer srv.Close()
	// Every sample host resolves to the one server.
	base := srv.Client().Transport.(*http.Transport).Clone()
	base.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, srv.Listener.Addr().String())
	}
	defer base.CloseIdleConnections()

	tr := mustChain(egresskit.Config{
		Base:      base,
		UserAgent: "CorpusBot/1.0",
		Retry:     retry.Policy{BaseDelay: 5 * time.Millisecond, MaxDelay: 50 * time.Millisecond},
		Store:     mustMemory(hoststate.Config{Limit: ratelimit.Config{PerMinute: 600000, Burst: 1000}}),
	})
	client := &http.Client{Transport: tr}

	// Each sample is fetched twice, from two hosts: as served, and gzip-
	// encoded to a caller that set Accept-Encoding itself (so net/http
	// hands over the compressed bytes and the classifier decodes its peek).
	results := make([]corpusOutcome, len(samples))
	encoded := make([]corpusOutcome, len(samples))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range samples {
		wg.Add(2)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			results[i] = runSample(t, client, tr, i, samples[i], bodies[i], false)
		}()
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			encoded[i] = runSample(t, client, tr, i, samples[i], gzipBytes(bodies[i]), true)
		}()
	}
	wg.Wait()
	for i, s := range samples {
		if encoded[i].halted != results[i].halted {
			t.Errorf("%s: gzip-encoded halted=%v, as served halted=%v", s.File, encoded[i].halted, results[i].halted)
		}
	}

	table := corpusTable(samples, results)
	t.Log("\n" + table)
	if *corpusResults != "" {
		if err := os.WriteFile(*corpusResults, []byte(table), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	var blocks, halted int
	for i, s := range samples {
		switch {
		case s.Class == "benign" && results[i].halted:
			t.Errorf("false halt: %s (%s, status %d) halted its host: %s %v", s.File, s.Family, s.Status, results[i].reason, results[i].markers)
		case s.Class == "block":
			blocks++
			if results[i].halted {
				halted++
			}
		}
	}
	// The corpus must not shrink unnoticed: these floors are what it held
	// when they were set (see testdata/corpus/README.md).
	vendors := map[string]bool{}
	for _, s := range samples {
		if s.Class == "block" {
			vendors[s.Vendor] = true
		}
	}
	if blocks < minBlockPages || len(vendors) < minVendors || len(samples)-blocks < minBenign {
		t.Errorf("corpus has %d block pages from %d vendors and %d benign responses; want at least %d, %d and %d",
			blocks, len(vendors), len(samples)-blocks, minBlockPages, minVendors, minBenign)
	}
	if recall := float64(halted) / float64(blocks); recall < 0.95 {
		t.Errorf("block pages halted: %d of %d (%.1f%%), want at least 95%%", halted, blocks, 100*recall)
	}
}

// runSample requests sample i through the chain, checks that the body read
// is the one served, and reports whether the host was halted.
func runSample(t *testing.T, c *http.Client, tr *egresskit.Transport, i int, s sample, want []byte, gz bool) corpusOutcome {
	host := fmt.Sprintf("s%d", i)
	if gz {
		host += "-gz"
	}
	url := fmt.Sprintf("http://%s.corpus.test/%s", host, strings.TrimPrefix(s.Source.Path, "/"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Errorf("%s: %v", s.File, err)
		return corpusOutcome{}
	}
	if gz {
		req.Header.Set("Accept-Encoding", "gzip")
	}
	resp, err := c.Do(req)
	var out corpusOutcome
	if err != nil {
		if !errors.Is(err, egresskit.ErrHalted) {
			t.Errorf("%s: %v", s.File, err)
		}
	} else {
		got, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		if rerr != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: the caller read %d bytes (err %v), want the %d bytes served", s.File, len(got), rerr, len(want))
		}
		if resp.StatusCode != s.Status {
			t.Errorf("%s: status %d, want %d", s.File, resp.StatusCode, s.Status)
		}
	}
	key, err := tr.HostKey(url)
	if err != nil {
		t.Errorf("%s: %v", s.File, err)
		return out
	}
	st, err := tr.Status(ctx, key)
	if err != nil {
		t.Errorf("%s: %v", s.File, err)
		return out
	}
	out.halted = st.Halted
	if resp != nil {
		r := classify.Of(resp, nil)
		out.markers, out.reason = r.Markers, r.Reason
	}
	return out
}

// gzipBytes returns b gzip-compressed (deterministically: no name, no
// modification time).
func gzipBytes(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(b)
	zw.Close()
	return buf.Bytes()
}

// corpusTable renders the per-vendor results as Markdown.
func corpusTable(samples []sample, results []corpusOutcome) string {
	type row struct {
		halted, total int
		missed        []string
	}
	rows := map[string]*row{}
	var blocks, blocksHalted, benign, benignHalted int
	for i, s := range samples {
		k := s.Vendor
		if s.Class == "benign" {
			k = "benign: " + s.Family
		}
		r := rows[k]
		if r == nil {
			r = &row{}
			rows[k] = r
		}
		r.total++
		if results[i].halted {
			r.halted++
		}
		if s.Class == "block" {
			blocks++
			if results[i].halted {
				blocksHalted++
			} else {
				r.missed = append(r.missed, s.File)
			}
		} else {
			benign++
			if results[i].halted {
				benignHalted++
				r.missed = append(r.missed, s.File+" (false halt)")
			}
		}
	}
	keys := make([]string, 0, len(rows))
	for k := range rows {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if ab, bb := strings.HasPrefix(a, "benign: "), strings.HasPrefix(b, "benign: "); ab != bb {
			if ab {
				return 1
			}
			return -1
		}
		return strings.Compare(a, b)
	})
	var b strings.Builder
	b.WriteString("# Corpus results\n\n")
	b.WriteString("Written by `make corpus` (TestCorpus in classify/corpus_test.go): every sample of\n")
	b.WriteString("testdata/corpus/manifest.jsonl sent through the whole egresskit chain, one host per\n")
	b.WriteString("sample, replayed with its status and headers by an httptest server.\n\n")
	fmt.Fprintf(&b, "Block pages halted: **%d of %d (%.1f%%)**. Benign responses halted: **%d of %d**.\n\n",
		blocksHalted, blocks, 100*float64(blocksHalted)/float64(max(blocks, 1)), benignHalted, benign)
	b.WriteString("| vendor / family | halted | total | not halted (block) or halted (benign) |\n|---|---:|---:|---|\n")
	for _, k := range keys {
		r := rows[k]
		fmt.Fprintf(&b, "| %s | %d | %d | %s |\n", k, r.halted, r.total, strings.Join(r.missed, "<br>"))
	}
	return b.String()
}
