package retrier_test

import (
	"testing"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/internal/settle"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// classifyHooks reaches package classify's transport for the tests.
var classifyHooks = settle.Get[classify.Result, classify.Config]()
