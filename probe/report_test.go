package probe_test

import (
	"context"
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/egresskit/egresskit/probe"
)

// checkStableSchema checks that doc has every field of the stable report
// schema (the field names and types README promises orchestrators), and
// returns it decoded.
func checkStableSchema(t *testing.T, doc []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(doc, &m); err != nil {
		t.Fatalf("report is not a JSON object: %v", err)
	}
	isNum := func(v any) bool { _, ok := v.(float64); return ok }
	isInt := func(v any) bool { f, ok := v.(float64); return ok && f == math.Trunc(f) }
	isStr := func(v any) bool { _, ok := v.(string); return ok }
	isBool := func(v any) bool { _, ok := v.(bool); return ok }
	nullOr := func(f func(any) bool) func(any) bool { return func(v any) bool { return v == nil || f(v) } }
	check := func(where string, obj map[string]any, fields map[string]func(any) bool) {
		for name, ok := range fields {
			v, present := obj[name]
			if !present {
				t.Errorf("%s: field %q missing", where, name)
			} else if !ok(v) {
				t.Errorf("%s: field %q = %#v has the wrong type", where, name, v)
			}
		}
	}
	check("report", m, map[string]func(any) bool{
		"schema_version": isInt, "timestamp": isNum, "total_probed": isInt,
		"results":   func(v any) bool { _, ok := v.([]any); return ok },
		"diagnosis": func(v any) bool { _, ok := v.(map[string]any); return ok },
	})
	results, _ := m["results"].([]any)
	if n, _ := m["total_probed"].(float64); int(n) != len(results) {
		t.Errorf("total_probed = %v, want len(results) = %d", m["total_probed"], len(results))
	}
	for _, r := range results {
		check("result", r.(map[string]any), map[string]func(any) bool{
			"url": isStr, "proxy": nullOr(isStr), "status_code": nullOr(isInt),
			"latency_ms": isNum, "success": isBool, "error_message": nullOr(isStr),
		})
	}
	d, _ := m["diagnosis"].(map[string]any)
	check("diagnosis", d, map[string]func(any) bool{
		"status":             func(v any) bool { s, _ := v.(string); return s == "HEALTHY" || s == "DEGRADED" || s == "CRITICAL" },
		"success_rate":       isNum,
		"average_latency_ms": isNum,
		"rate_limited_count": isInt,
		"blocked_count":      isInt,
		"recommended_backoff": func(v any) bool {
			b, ok := v.(map[string]any)
			return ok && isNum(b["initial_delay_sec"]) && isNum(b["max_delay_sec"]) && isInt(b["max_retries"])
		},
	})
	return m
}

func TestReportJSON(t *testing.T) {
	site := siteServer(t).URL
	targets := []probe.Target{
		{URL: site + "/ok/"},
		{URL: site + "/throttle/"},
		{URL: site + "/ok/", Egress: newForwardProxy(t, true)},
		{URL: "http://" + deadAddr(t) + "/"},
	}
	clock := time.Date(2024, 3, 31, 23, 40, 0, 123456000, time.UTC)
	rep, err := probe.Run(context.Background(), targets, probe.Options{
		Now: func() time.Time { return clock },
	})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	m := checkStableSchema(t, doc)
	if got := m["timestamp"]; got != 1711928400.123456 {
		t.Errorf("timestamp = %v, want 1711928400.123456 (float Unix seconds)", got)
	}
	if got := m["schema_version"]; got != float64(probe.SchemaVersion) {
		t.Errorf("schema_version = %v, want %d", got, probe.SchemaVersion)
	}
	rs := m["results"].([]any)
	first, throttledR, viaProxy, dead := rs[0].(map[string]any), rs[1].(map[string]any), rs[2].(map[string]any), rs[3].(map[string]any)
	if first["proxy"] != nil || first["error_message"] != nil || first["status_code"] != 200.0 || first["success"] != true {
		t.Errorf("direct success = %v, want proxy null, error_message null, status 200, success", first)
	}
	if throttledR["error_message"] != "HTTP status 429" || throttledR["success"] != false || throttledR["retry_after_sec"] != 7.0 {
		t.Errorf("429 = %v, want error_message \"HTTP status 429\", retry_after_sec 7", throttledR)
	}
	if p, _ := viaProxy["proxy"].(string); p == "" || p != viaProxy["egress"] {
		t.Errorf("proxied result proxy = %v, egress = %v, want the redacted proxy URL in both", viaProxy["proxy"], viaProxy["egress"])
	}
	if dead["status_code"] != nil || dead["error_message"] == nil {
		t.Errorf("connection failure = %v, want status_code null and an error_message", dead)
	}
	d := m["diagnosis"].(map[string]any)
	// One 429 among four, success rate 0.5: DEGRADED, not a halt.
	if d["rate_limited_count"] != 1.0 || d["blocked_count"] != 1.0 || d["status"] != "DEGRADED" {
		t.Errorf("diagnosis = %v, want 1 rate-limited, 1 blocked, DEGRADED", d)
	}
	rec := d["recommendation"].(map[string]any)
	if rec["halt"] != false || rec["max_concurrency"] != float64(probe.Recommendation{Concurrency: rec["concurrency_factor"].(float64)}.Workers(probe.DefaultWorkers)) {
		t.Errorf("recommendation = %v, want no halt and max_concurrency = Workers(%d)", rec, probe.DefaultWorkers)
	}
	if bh := d["blocking_hosts"].([]any); len(bh) != 1 || bh[0] != dead["host"] {
		t.Errorf("blocking_hosts = %v, want only the dead host %v", bh, dead["host"])
	}
	if b := d["recommended_backoff"].(map[string]any); b["initial_delay_sec"] != 7.0 {
		t.Errorf("recommended_backoff = %v, want initial_delay_sec 7", b)
	}
}
