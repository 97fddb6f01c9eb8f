//go:build race

package classify_test

// raceEnabled reports whether the race detector is on: it makes sync.Pool
// drop some of what is put back, so pooled objects are made again at
// random and allocation counts vary.
const raceEnabled = true
