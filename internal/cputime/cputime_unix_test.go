//go:build unix

package cputime

import (
	"testing"
	"time"
)

// TestProcessGrowsWithWork: spinning adds CPU time, and Process never goes
// back. The spin lasts until Process has grown by 10ms, however long a
// loaded machine takes to give this process that much CPU; the minute is
// only a bound against hanging when Process does not grow at all.
func TestProcessGrowsWithWork(t *testing.T) {
	before := Process()
	if before <= 0 {
		t.Fatalf("Process() = %v before any work, want > 0", before)
	}
	hang := time.NewTimer(time.Minute)
	defer hang.Stop()
	last, x := before, 0
	for last-before < 10*time.Millisecond {
		for range 1 << 16 {
			x++
		}
		now := Process()
		if now < last {
			t.Fatalf("Process() went back from %v to %v", last, now)
		}
		last = now
		select {
		case <-hang.C:
			t.Fatalf("Process() grew by %v over %d loops of spinning, want at least 10ms", last-before, x)
		default:
		}
	}
}
