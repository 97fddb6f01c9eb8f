//go:build !unix && !windows

package telemetry

import (
	"errors"
	"os"
)

// tryLock fails: this platform has no file lock the log can rely on, and
// a log that cannot lock would let two writers fork its chain.
func tryLock(*os.File) (bool, error) {
	return false, errors.New("file locking is not supported on this platform")
}

func unlock(*os.File) error { return nil }
