//go:build unix

package telemetry

import (
	"errors"
	"os"
	"syscall"
)

// tryLock takes an exclusive lock on f without waiting. It reports
// whether it got it; the error is for a file system that cannot lock.
func tryLock(f *os.File) (bool, error) {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return false, nil
		}
		return false, err
	}
}

// unlock releases the lock tryLock took.
func unlock(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }

// fileState returns f's size and whether path names the same file
// (false when path is missing), without allocating.
func fileState(f *os.File, path string) (size int64, same bool, err error) {
	var fs, ps syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &fs); err != nil {
		return 0, false, err
	}
	if err := syscall.Stat(path, &ps); err != nil {
		if errors.Is(err, syscall.ENOENT) {
			return fs.Size, false, nil
		}
		return 0, false, err
	}
	return fs.Size, fs.Dev == ps.Dev && fs.Ino == ps.Ino, nil
}
