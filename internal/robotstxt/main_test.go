package robotstxt_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if any test leaves a goroutine behind: waiting and
// cancelled checks must all return.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
