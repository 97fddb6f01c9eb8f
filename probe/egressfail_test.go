package probe_test

import (
	"reflect"
	"testing"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/probe"
)

// TestDiagnoseEgressFailures checks that results that failed on their
// egress route count against the egress and never in their host's
// breakdown, nor make the host a blocking one.
func TestDiagnoseEgressFailures(t *testing.T) {
	ok := func(host, egress string) probe.TargetResult {
		return probe.TargetResult{Host: host, Egress: egress, Status: 200, Outcome: classify.OK, Stage: probe.StageResponse}
	}
	authFail := func(host string) probe.TargetResult {
		return probe.TargetResult{Host: host, Egress: "tinyproxy", Outcome: classify.Transient, Stage: probe.StageProxy,
			EgressFailure: "auth", Reason: "proxy authentication failed", Err: "egress: proxy authentication failed"}
	}
	var results []probe.TargetResult
	for _, h := range []string{"a.example", "b.example"} {
		results = append(results, ok(h, "squid"), ok(h, "microsocks"), authFail(h))
	}
	d := probe.Diagnose(results, probe.Thresholds{})
	for _, h := range d.Hosts {
		if h.Total != 2 || h.Succeeded != 2 || h.Blocked != 0 {
			t.Errorf("host %s: %d of %d succeeded, %d blocked; want 2 of 2, none blocked", h.Name, h.Succeeded, h.Total, h.Blocked)
		}
	}
	for _, e := range d.Egresses {
		if e.Name == "tinyproxy" && (e.Total != 2 || e.Succeeded != 0) {
			t.Errorf("egress tinyproxy: %d of %d succeeded, want 0 of 2", e.Succeeded, e.Total)
		}
	}
	if want := []string{"tinyproxy"}; !reflect.DeepEqual(d.FailingEgresses, want) {
		t.Errorf("FailingEgresses = %v, want %v", d.FailingEgresses, want)
	}
	if len(d.BlockingHosts) != 0 {
		t.Errorf("BlockingHosts = %v, want none", d.BlockingHosts)
	}
}
