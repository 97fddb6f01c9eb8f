package blocks

import (
	"net/url"
	"testing"
	"time"

	"github.com/egresskit/egresskit/blockwatch"
	"github.com/egresskit/egresskit/classify"
)

// A host that refuses the same few URLs forever never makes a run of
// distinct URLs; its record must still stay the size of blockwatch.Config.Run.
func TestRunRecordBounded(t *testing.T) {
	w := New(blockwatch.Config{Run: 4, Window: 8, Share: 2})
	refused := classify.Result{Outcome: classify.Permanent, Status: 403}
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for i := range 10000 {
		u := &url.URL{Path: "/private/" + string(rune('a'+i%3))}
		if ev := w.Observe("h", u, refused, at); ev != nil {
			t.Fatalf("flagged after %d refusals to 3 URLs: %s", i+1, ev.Reason)
		}
	}
	rec := w.hosts["h"].Value.(*hostRecord)
	if rec.run.n != 10000 || len(rec.run.urls) != 3 || rec.run.statuses[403] != 10000 {
		t.Errorf("run = %d answers, %d URLs, %v; want 10000, 3, map[403:10000]", rec.run.n, len(rec.run.urls), rec.run.statuses)
	}
	if len(rec.window) != 8 {
		t.Errorf("window holds %d answers, want 8", len(rec.window))
	}
}
