package main

import (
	"os"
	"strings"
)

// The closing note of a run in which the chain and the bare client were
// measured in memory and over loopback.
func Example() {
	in := `BenchmarkOverhead/body=text-128B/impl=bare-2  100000  2000 ns/op  1224 B/op  12 allocs/op
BenchmarkOverhead/body=text-128B/impl=chain-2 100000  2800 ns/op  2000 B/op  20 allocs/op
BenchmarkLoopback/body=text-128B/impl=bare-2   10000 50000 ns/op 20000 req/s
BenchmarkLoopback/body=text-128B/impl=chain-2  10000 52000 ns/op 19200 req/s
`
	if err := run([]string{"-part", "closing"}, strings.NewReader(in), os.Stdout); err != nil {
		panic(err)
	}
	// Output:
	// On text-128B in memory the chain costs +800 ns and +8 allocations per request over the bare client (targets: 1 µs, 10). Over loopback at 64 concurrent requests on text-128B the chain keeps 0.96× of the bare client's throughput (target 0.95); the Redis contender did not run. 0 of 13 targets missed.
}
