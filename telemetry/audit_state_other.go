//go:build !unix

package telemetry

import (
	"errors"
	"os"
)

// fileState returns f's size and whether path names the same file
// (false when path is missing).
func fileState(f *os.File, path string) (size int64, same bool, err error) {
	fst, err := f.Stat()
	if err != nil {
		return 0, false, err
	}
	pst, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return fst.Size(), false, nil
	}
	if err != nil {
		return 0, false, err
	}
	return fst.Size(), os.SameFile(fst, pst), nil
}
