package cputime_test

import (
	"fmt"

	"github.com/egresskit/egresskit/internal/cputime"
)

// A benchmark reports the CPU time of its loop per operation.
func Example() {
	start := cputime.Process()
	sum := 0
	for i := range 1000 {
		sum += i
	}
	used := cputime.Process() - start
	fmt.Println(sum, used >= 0)
	// Output: 499500 true
}
