package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// scrape fetches url over HTTP and returns its samples keyed by series
// ("name{labels}" as exposed) and the set of metric names.
func scrape(t *testing.T, url string) (map[string]float64, map[string]bool) {
	t.Helper()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: status %d, %v", resp.StatusCode, err)
	}
	samples, names := map[string]float64{}, map[string]bool{}
	for _, line := range strings.Split(string(body), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("scrape line %q: %v", line, err)
		}
		series := line[:i]
		samples[series] = v
		name, _, _ := strings.Cut(series, "{")
		names[name] = true
	}
	return samples, names
}

// sum adds the samples of name whose series contain every one of labels.
func sum(samples map[string]float64, name string, labels ...string) float64 {
	total := 0.0
	for series, v := range samples {
		n, rest, _ := strings.Cut(series, "{")
		if n != name {
			continue
		}
		ok := true
		for _, l := range labels {
			ok = ok && strings.Contains(rest, l)
		}
		if ok {
			total += v
		}
	}
	return total
}

// TestScrapeAfterCrawl crawls once, scrapes /metrics over HTTP and checks
// the key series against what the targets themselves served; then checks
// that the Grafana dashboard only queries metrics the scrape exposes.
func TestScrapeAfterCrawl(t *testing.T) {
	c, err := start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	results := c.crawl(context.Background())
	samples, names := scrape(t, c.metricsURL())

	const hosts = 5
	if got := results["status 200"]; got != 3*pagesPerHost {
		t.Errorf("crawl results %v: want %d pages of status 200 (healthy, flaky, throttled)", results, 3*pagesPerHost)
	}
	served := float64(c.targets.served.Load())
	// Attempts counts what was sent; the requests the chain refused
	// before sending (the halted host, the open one) are counted apart.
	sent := sum(samples, "egresskit_attempts_total")
	requests, unsent := sum(samples, "egresskit_requests_total"), sum(samples, "egresskit_unsent_total")
	// Every attempt sent is a request's first or a retry; a request's
	// first attempt was sent unless the request was refused unsent.
	if unsent == 0 {
		t.Error("no request refused unsent: the halted and the open host should refuse some")
	}
	firsts := sent - sum(samples, "egresskit_retries_total")
	if firsts < requests || firsts > requests+unsent {
		t.Errorf("attempts sent %v minus retries %v = %v, want between the requests sent (%v) and all requests (%v)",
			sent, sent-firsts, firsts, requests, requests+unsent)
	}
	for _, tt := range []struct {
		what      string
		got, want float64
	}{
		{"attempts sent", sent, served},
		{"requests sent and refused unsent", requests + unsent, hosts * pagesPerHost},
		{"requests refused unsent (halted or open)", sum(samples, "egresskit_unsent_total", `reason="halted"`) +
			sum(samples, "egresskit_unsent_total", `reason="open"`), unsent},
		{"ok requests", sum(samples, "egresskit_requests_total", `outcome="ok"`), 3 * pagesPerHost},
		{"refused requests", sum(samples, "egresskit_requests_total", `outcome="refused"`), 1},
		{"latency observations", sum(samples, "egresskit_attempt_duration_seconds_count"), served},
		{"token waits", sum(samples, "egresskit_token_wait_seconds_count"), sent},
		{"closed hosts", sum(samples, "egresskit_breaker_hosts", `state="closed"`), 3},
		{"open hosts", sum(samples, "egresskit_breaker_hosts", `state="open"`), 1},
		{"halted hosts", sum(samples, "egresskit_breaker_hosts", `state="halted"`), 1},
		{"watched host halted", sum(samples, "egresskit_host_breaker_state", `state="halted"`), 1},
		{"watched host open", sum(samples, "egresskit_host_breaker_state", `state="open"`), 1},
		{"watched series", float64(seriesOf(samples, "egresskit_host_breaker_state")), 2 * 4},
		{"direct endpoint score", samples[`egresskit_egress_endpoint_score{endpoint="direct"}`], 1},
		{"direct endpoint quarantined", samples[`egresskit_egress_endpoint_quarantined{endpoint="direct"}`], 0},
	} {
		if tt.got != tt.want {
			t.Errorf("%s = %v, want %v", tt.what, tt.got, tt.want)
		}
	}
	if _, ok := samples[`egresskit_egress_endpoint_quarantined{endpoint="direct"}`]; !ok {
		t.Error("no quarantine series for the direct endpoint")
	}

	t.Run("dashboard", func(t *testing.T) { checkDashboard(t, names) })
}

func seriesOf(samples map[string]float64, name string) int {
	n := 0
	for series := range samples {
		if strings.HasPrefix(series, name+"{") {
			n++
		}
	}
	return n
}

var metricName = regexp.MustCompile(`\begresskit_[a-zA-Z0-9_]+`)

// checkDashboard parses grafana-dashboard.json and checks that every query
// references only metrics in names, that every exported family is charted,
// and that the panels the example promises are there.
func checkDashboard(t *testing.T, names map[string]bool) {
	b, err := os.ReadFile("grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string  `json:"title"`
		UID    string  `json:"uid"`
		Panels []panel `json:"panels"`
		Templ  struct {
			List []struct {
				Name  string `json:"name"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("dashboard does not parse: %v", err)
	}
	if dash.Title == "" || dash.UID == "" || len(dash.Panels) == 0 {
		t.Fatalf("dashboard lacks title, uid or panels")
	}

	var exprs []string
	ids := map[int]bool{}
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if ids[p.ID] {
				t.Errorf("panel id %d used twice", p.ID)
			}
			ids[p.ID] = true
			if p.Type != "row" && (p.GridPos.W == 0 || p.GridPos.H == 0 || len(p.Targets) == 0) {
				t.Errorf("panel %q: no size or no query", p.Title)
			}
			for _, tg := range p.Targets {
				exprs = append(exprs, tg.Expr)
			}
			walk(p.Panels)
		}
	}
	walk(dash.Panels)
	for _, v := range dash.Templ.List {
		if q, ok := v.Query.(map[string]any); ok {
			if s, ok := q["query"].(string); ok {
				exprs = append(exprs, s)
			}
		}
	}

	used := map[string]bool{}
	for _, e := range exprs {
		found := metricName.FindAllString(e, -1)
		if len(found) == 0 {
			t.Errorf("query %q references no egresskit metric", e)
		}
		for _, m := range found {
			used[m] = true
			if !names[m] {
				t.Errorf("query %q references %s, which /metrics does not expose", e, m)
			}
		}
		if !balanced(e) {
			t.Errorf("query %q has unbalanced brackets", e)
		}
	}
	// Every family the collector exports is on the dashboard.
	families := map[string]bool{}
	for n := range names {
		if !strings.HasPrefix(n, "egresskit_") {
			continue
		}
		families[strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(n, "_bucket"), "_sum"), "_count")] = true
	}
	for f := range families {
		charted := false
		for u := range used {
			charted = charted || strings.HasPrefix(u, f)
		}
		if !charted {
			t.Errorf("metric %s is exported but not charted", f)
		}
	}
	all := strings.Join(exprs, "\n")
	for _, want := range []string{
		"histogram_quantile(0.5, sum by (le) (rate(egresskit_attempt_duration_seconds_bucket",
		"histogram_quantile(0.95, sum by (le) (rate(egresskit_attempt_duration_seconds_bucket",
		"histogram_quantile(0.99, sum by (le) (rate(egresskit_attempt_duration_seconds_bucket",
		"histogram_quantile(0.99, sum by (le) (rate(egresskit_token_wait_seconds_bucket",
		"sum by (outcome) (rate(egresskit_requests_total",
		"sum by (outcome) (rate(egresskit_attempts_total",
		"sum(rate(egresskit_retries_total",
		"sum by (state) (egresskit_breaker_hosts",
		"egresskit_egress_endpoint_score",
		"egresskit_egress_endpoint_quarantined",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("dashboard has no query containing %q", want)
		}
	}
	if t.Failed() {
		sorted := make([]string, 0, len(names))
		for n := range names {
			sorted = append(sorted, n)
		}
		sort.Strings(sorted)
		t.Logf("exposed: %v", sorted)
	}
}

type panel struct {
	ID      int    `json:"id"`
	Type    string `json:"type"`
	Title   string `json:"title"`
	GridPos struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

// balanced reports whether the brackets of a PromQL expression pair up,
// outside string literals.
func balanced(expr string) bool {
	var stack []byte
	inString := false
	for i := 0; i < len(expr); i++ {
		ch := expr[i]
		switch {
		case inString:
			if ch == '\\' {
				i++
			} else if ch == '"' {
				inString = false
			}
		case ch == '"':
			inString = true
		case ch == '(' || ch == '[' || ch == '{':
			stack = append(stack, ch)
		case ch == ')' || ch == ']' || ch == '}':
			open := map[byte]byte{')': '(', ']': '[', '}': '{'}[ch]
			if len(stack) == 0 || stack[len(stack)-1] != open {
				return false
			}
			stack = stack[:len(stack)-1]
		}
	}
	return len(stack) == 0 && !inString
}

// TestRunOnce runs the command as `prometheus -once`.
func TestRunOnce(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out, []string{"-once"}); err != nil {
		t.Fatalf("run -once: %v\n%s", err, out.String())
	}
	got := out.String()
	if !regexp.MustCompile(`(?m)^metrics: http://127\.0\.0\.1:\d+/metrics$`).MatchString(got) {
		t.Errorf("output lacks the metrics address; got:\n%s", got)
	}
	if !regexp.MustCompile(`(?m)^round 1: .*status 200: 24`).MatchString(got) {
		t.Errorf("output lacks the round summary; got:\n%s", got)
	}
	m := regexp.MustCompile(`(?m)^/metrics serves (\d+) egresskit samples$`).FindStringSubmatch(got)
	if m == nil || m[1] == "0" {
		t.Errorf("output lacks a non-empty scrape; got:\n%s", got)
	}
}

func TestRunBadFlag(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out, []string{"-nope"}); err == nil {
		t.Error("run -nope = nil, want an error")
	}
}
