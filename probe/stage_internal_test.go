package probe

import "testing"

// TestStageNames pins the values of TargetResult.Stage, which the report's
// "stage" field carries.
func TestStageNames(t *testing.T) {
	want := []string{"queued", "dns", "connect", "tls", "request", "response", "proxy"}
	for s := stageQueued; s <= stageProxy; s++ {
		if got := s.String(); got != want[s] {
			t.Errorf("stage %d = %q, want %q", s, got, want[s])
		}
	}
	if got := (stageProxy + 1).String(); got != "unknown" {
		t.Errorf("stage past the last = %q, want unknown", got)
	}
	if !(TargetResult{}).notStarted() || !(TargetResult{Stage: "queued"}).notStarted() || (TargetResult{Stage: "dns"}).notStarted() {
		t.Error("notStarted: want true for an empty or queued stage only")
	}
}
