package egresskit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// TestSpacing: paced sends to one host go out at least spacingShare of the
// pacing interval apart, even when their timers fire together; other
// hosts, and a rate that is not set, are not held.
func TestSpacing(t *testing.T) {
	tests := []struct {
		name      string
		keys      []string // one attempt each, all starting at once
		perMinute float64
		want      []time.Duration // when they went out, from the start, in order
	}{
		{"one host, three together", []string{"a", "a", "a"}, 600, []time.Duration{0, 90 * time.Millisecond, 180 * time.Millisecond}},
		{"two hosts", []string{"a", "b"}, 600, []time.Duration{0, 0}},
		{"two hosts, two each", []string{"a", "b", "a", "b"}, 60, []time.Duration{0, 0, 900 * time.Millisecond, 900 * time.Millisecond}},
		{"no rate", []string{"a", "a"}, 0, []time.Duration{0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var s spacing
				start := time.Now()
				got := make([]time.Duration, len(tt.keys))
				var wg sync.WaitGroup
				for i, k := range tt.keys {
					wg.Add(1)
					go func() {
						defer wg.Done()
						if err := s.wait(t.Context(), k, tt.perMinute); err != nil {
							t.Error(err)
						}
						got[i] = time.Since(start)
					}()
					synctest.Wait()
				}
				wg.Wait()
				slices.Sort(got) // which of those waiting goes next is not fixed
				if fmt.Sprint(got) != fmt.Sprint(tt.want) {
					t.Errorf("sent at %v, want %v", got, tt.want)
				}
			})
		})
	}
}

// TestSpacingHonoursContext: an attempt held for its turn ends with its
// context's error, and its turn is not taken.
func TestSpacingHonoursContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var s spacing
		if err := s.wait(t.Context(), "a", 60); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		if err := s.wait(ctx, "a", 60); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want the deadline's", err)
		}
		start := time.Now()
		if err := s.wait(t.Context(), "a", 60); err != nil {
			t.Fatal(err)
		}
		// The first send's turn ends 900ms after it; 100ms of it passed.
		if got := time.Since(start); got != 800*time.Millisecond {
			t.Errorf("third attempt waited %v, want 800ms", got)
		}
	})
}

// TestSpacingForgets: past maxSpaced hosts, those not sent to for
// spacingForget are dropped, so the memory follows the hosts in use.
func TestSpacingForgets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var s spacing
		for i := range maxSpaced {
			if err := s.wait(t.Context(), fmt.Sprint("old", i), 6000); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(spacingForget + time.Second)
		if err := s.wait(t.Context(), "new", 6000); err != nil {
			t.Fatal(err)
		}
		if n := len(s.last); n != 1 {
			t.Errorf("%d hosts remembered, want 1", n)
		}
	})
}
