package testprog_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Start watches each program with a goroutine; Kill (run at the end of the
// test) waits for it, so none may outlive the tests.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
