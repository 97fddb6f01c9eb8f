//go:build race

package probe_test

// raceEnabled reports whether the race detector is on: it slows the
// probes' work several times over, so timing tests give the healthy
// probes a longer deadline (the bound past the deadline stays the same).
const raceEnabled = true
