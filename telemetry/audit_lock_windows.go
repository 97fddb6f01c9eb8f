//go:build windows

package telemetry

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
)

// tryLock takes an exclusive lock on f without waiting. It reports
// whether it got it; the error is for a file system that cannot lock.
func tryLock(f *os.File) (bool, error) {
	err := windows.LockFileEx(windows.Handle(f.Fd()),
		windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, lockRange())
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, windows.ERROR_LOCK_VIOLATION):
		return false, nil
	}
	return false, err
}

// unlock releases the lock tryLock took.
func unlock(f *os.File) error {
	return windows.UnlockFileEx(windows.Handle(f.Fd()), 0, 1, 0, lockRange())
}

// lockRange is the byte the lock covers: far beyond any log's end, since
// Windows locks are mandatory and readers must still read the lines.
func lockRange() *windows.Overlapped { return &windows.Overlapped{OffsetHigh: 0x7fffffff} }
