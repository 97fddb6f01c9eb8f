package telemetry_test

import (
	"io"
	"os"
	"testing"

	"github.com/egresskit/egresskit/telemetry"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if path := os.Getenv(childEnv); path != "" {
		os.Exit(auditChild(path))
	}
	goleak.VerifyTestMain(m)
}

// verify checks the log read from r with the zero Verifier.
func verify(r io.Reader) error {
	_, err := telemetry.Verifier{}.Verify(r)
	return err
}

// verifyFiles checks the files of a log with the zero Verifier.
func verifyFiles(paths ...string) error {
	_, err := telemetry.Verifier{}.VerifyFiles(paths...)
	return err
}
