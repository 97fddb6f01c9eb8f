//go:build !race

package classify_test

// raceEnabled reports whether the race detector is on.
const raceEnabled = false
