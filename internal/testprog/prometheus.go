package testprog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Prometheus is a running Prometheus server scraping one target.
type Prometheus struct {
	*Proc
	// URL is "http://127.0.0.1:PORT", the server's web and API address.
	URL string
	// Version is the server's version ("2.42.0+ds").
	Version string
}

// StartPrometheus starts a real Prometheus server (tested with Debian's
// 2.42) on a free loopback port, scraping target ("127.0.0.1:PORT", path
// /metrics) every interval, with its configuration and storage in a
// directory of its own. It returns when the server is ready to answer
// queries. The server is killed when the test ends; the test is skipped
// when prometheus is missing, unless EGRESSKIT_REQUIRE_PROGRAMS is set.
func StartPrometheus(t testing.TB, target string, interval time.Duration) *Prometheus {
	t.Helper()
	if interval <= 0 {
		t.Fatalf("testprog: bad scrape interval %v", interval)
	}
	path := Need(t, "prometheus")
	dir := programDir(t)
	conf := WriteFile(t, dir, "prometheus.yml", fmt.Sprintf(`global:
  scrape_interval: %[1]s
  scrape_timeout: %[1]s
scrape_configs:
  - job_name: crawl
    static_configs:
      - targets: [%[2]q]
`, model(interval), target))
	p := &Prometheus{Version: version(path, []string{"--version"}, "prometheus, version ", "")}
	if i := strings.IndexByte(p.Version, ' '); i > 0 {
		p.Version = p.Version[:i]
	}
	p.Proc = startOwned(t, dir, func(port int) Spec {
		return Spec{Path: path, Dir: dir, Args: []string{
			"--config.file=" + conf,
			"--storage.tsdb.path=" + filepath.Join(dir, "data"),
			"--web.listen-address=127.0.0.1:" + strconv.Itoa(port),
			"--log.level=warn",
		}}
	})
	p.URL = "http://" + p.Addr
	deadline := time.Now().Add(startTimeout)
	for {
		resp, err := http.Get(p.URL + "/-/ready")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("testprog: prometheus not ready after %v: %v\n%s", startTimeout, err, p.Output())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// model spells d as a Prometheus duration ("500ms", "2s").
func model(d time.Duration) string {
	if d%time.Second == 0 {
		return strconv.FormatInt(int64(d/time.Second), 10) + "s"
	}
	return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
}

// Query evaluates the instant PromQL query q now and returns its vector's
// samples by their labels, spelled "name=value,..." in name order without
// the metric name ("" for a sample without labels).
func (p *Prometheus) Query(q string) (map[string]float64, error) {
	resp, err := http.Get(p.URL + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("testprog: prometheus query %q: %w", q, err)
	}
	if body.Status != "success" || body.Data.ResultType != "vector" {
		return nil, fmt.Errorf("testprog: prometheus query %q: status %q (%s), result type %q", q, body.Status, body.Error, body.Data.ResultType)
	}
	out := make(map[string]float64, len(body.Data.Result))
	for _, r := range body.Data.Result {
		var labels []string
		for k, v := range r.Metric {
			if k != "__name__" {
				labels = append(labels, k+"="+v)
			}
		}
		sort.Strings(labels)
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("testprog: prometheus query %q: value %v: %w", q, r.Value[1], err)
		}
		out[strings.Join(labels, ",")] = v
	}
	return out, nil
}

// CheckMetrics runs `promtool check metrics` (Debian's prometheus package)
// on an exposition in the text format and returns what it reported, ""
// when it found no problem. A test is skipped when promtool is missing,
// unless EGRESSKIT_REQUIRE_PROGRAMS is set.
func CheckMetrics(t testing.TB, exposition []byte) string {
	t.Helper()
	path := Need(t, "promtool")
	cmd := exec.Command(path, "check", "metrics")
	cmd.Stdin = bytes.NewReader(exposition)
	out, err := cmd.CombinedOutput()
	if err != nil && len(out) == 0 {
		return err.Error()
	}
	return strings.TrimSpace(string(out))
}
