package main

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Decision is what the orchestrator does with one preflight run. The
// Airflow DAG (preflight_decision.py) and the CronJob (decide.sh) apply the
// same rules and print the same JSON; the test checks that all three agree
// on real preflight output.
type Decision struct {
	// Action is "crawl", "halt" or "error".
	Action string `json:"action"`
	// Status is preflight's verdict, "" when there is none.
	Status string `json:"status"`
	// MaxConcurrency is the number of requests in flight to start the
	// crawl with (diagnosis.recommendation.max_concurrency); 0 unless
	// crawling.
	MaxConcurrency int `json:"max_concurrency"`
	// InitialDelaySec is the retry backoff's first delay
	// (diagnosis.recommended_backoff.initial_delay_sec); 0 unless crawling.
	InitialDelaySec float64 `json:"initial_delay_sec"`
	// SkipHosts are hosts not to crawl (diagnosis.recommendation.halt_hosts:
	// they refused a probe); empty unless crawling.
	SkipHosts []string `json:"skip_hosts"`
	// Reason explains a halt or an error.
	Reason string `json:"reason"`
}

// report is the part of preflight's JSON the decision reads.
type report struct {
	Diagnosis *struct {
		Status             string `json:"status"`
		RecommendedBackoff struct {
			InitialDelaySec float64 `json:"initial_delay_sec"`
		} `json:"recommended_backoff"`
		Reasons        []string `json:"reasons"`
		Recommendation struct {
			Halt           bool     `json:"halt"`
			MaxConcurrency int      `json:"max_concurrency"`
			HaltHosts      []string `json:"halt_hosts"`
		} `json:"recommendation"`
	} `json:"diagnosis"`
}

// exitFor is preflight's exit status for each verdict.
var exitFor = map[string]int{"HEALTHY": 0, "DEGRADED": 3, "CRITICAL": 4}

// decide applies the rules to preflight's exit status and standard output:
//
//  1. An exit status other than 0, 3 or 4 (1 failure, 2 usage, 130
//     interrupted) is an error: fix the input, do not crawl.
//  2. The JSON must parse and its status must match the exit status, and
//     CRITICAL must come with recommendation.halt; otherwise error.
//  3. CRITICAL (exit 4) halts: nothing is crawled, someone looks; the
//     reason names preflight's reasons.
//  4. HEALTHY and DEGRADED crawl with max_concurrency requests in flight,
//     a first retry delay of initial_delay_sec, and without the halt_hosts.
func decide(exitCode int, stdout []byte) Decision {
	fail := func(format string, args ...any) Decision {
		return Decision{Action: "error", SkipHosts: []string{}, Reason: fmt.Sprintf(format, args...)}
	}
	if exitCode != 0 && exitCode != 3 && exitCode != 4 {
		return fail("preflight exited %d: failure, usage error or interrupted", exitCode)
	}
	var r report
	if err := json.Unmarshal(stdout, &r); err != nil || r.Diagnosis == nil {
		return fail("preflight printed no report")
	}
	d := r.Diagnosis
	want, ok := exitFor[d.Status]
	if !ok || want != exitCode {
		return fail("status %q does not match exit %d", d.Status, exitCode)
	}
	if (d.Status == "CRITICAL") != d.Recommendation.Halt {
		return fail("status %s with halt %v", d.Status, d.Recommendation.Halt)
	}
	if d.Status == "CRITICAL" {
		return Decision{Action: "halt", Status: d.Status, SkipHosts: []string{}, Reason: "preflight is CRITICAL: " + strings.Join(d.Reasons, "; ")}
	}
	if d.Recommendation.MaxConcurrency < 1 {
		return fail("max_concurrency %d", d.Recommendation.MaxConcurrency)
	}
	skip := d.Recommendation.HaltHosts
	if skip == nil {
		skip = []string{}
	}
	return Decision{
		Action:          "crawl",
		Status:          d.Status,
		MaxConcurrency:  d.Recommendation.MaxConcurrency,
		InitialDelaySec: d.RecommendedBackoff.InitialDelaySec,
		SkipHosts:       skip,
	}
}
