package bench

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that the tests and benchmarks leave no goroutine
// behind: every server, pool, transport and client they start is closed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
