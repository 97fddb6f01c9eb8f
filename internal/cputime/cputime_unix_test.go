//go:build unix

package cputime

import (
	"testing"
	"time"
)

// TestProcessGrowsWithWork: spinning for a while adds CPU time.
func TestProcessGrowsWithWork(t *testing.T) {
	before := Process()
	if before <= 0 {
		t.Fatalf("Process() = %v before any work, want > 0", before)
	}
	x := 0
	for start := time.Now(); time.Since(start) < 50*time.Millisecond; {
		x++
	}
	if after := Process(); after-before < 10*time.Millisecond {
		t.Fatalf("Process() grew by %v over 50ms of spinning (%d loops), want at least 10ms", after-before, x)
	}
}
