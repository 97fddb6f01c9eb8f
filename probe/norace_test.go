//go:build !race

package probe_test

// raceEnabled reports whether the race detector is on.
const raceEnabled = false
