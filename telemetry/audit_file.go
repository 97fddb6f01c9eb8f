package telemetry

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// maxLine bounds the length of a line read back when a log is reopened.
const maxLine = 16 << 20

// rotatedSuffixLen is the number of digits after "Path." in a rotated file.
const rotatedSuffixLen = 20

// AuditFiles returns the files of the audit log at path, oldest first: the
// rotated files (path.NNNNNNNNNNNNNNNNNNNN, ordered by number), then path
// itself when it exists: what an operator archives or checks, passing the
// result to Verifier.VerifyFiles.
func AuditFiles(path string) ([]string, error) {
	rotated, err := rotatedFiles(path)
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(path); err == nil {
		rotated = append(rotated, path)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("telemetry: audit files: %w", err)
	}
	return rotated, nil
}

func rotatedFiles(path string) ([]string, error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("telemetry: audit files: %w", err)
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		suffix, ok := strings.CutPrefix(name, base+".")
		if !ok || len(suffix) != rotatedSuffixLen || strings.Trim(suffix, "0123456789") != "" || e.IsDir() {
			continue
		}
		out = append(out, filepath.Join(filepath.Dir(path), name))
	}
	slices.Sort(out) // fixed-width numbers sort as text
	return out, nil
}

// lockWait bounds the wait for another writer's lock on the file.
var lockWait = 10 * time.Second

// open opens cfg.Path for appending, creating it if missing; excl creates
// it, unless another writer created it first.
func (a *Audit) open(excl bool) (*os.File, error) {
	flags := os.O_RDWR | os.O_CREATE | os.O_APPEND
	if excl {
		f, err := os.OpenFile(a.cfg.Path, flags|os.O_EXCL, a.cfg.Perm)
		if err == nil || !errors.Is(err, os.ErrExist) {
			if err != nil {
				return nil, fmt.Errorf("telemetry: open audit log: %w", err)
			}
			return f, nil
		}
	}
	f, err := os.OpenFile(a.cfg.Path, flags, a.cfg.Perm)
	if err != nil {
		return nil, fmt.Errorf("telemetry: open audit log: %w", err)
	}
	return f, nil
}

// lock takes f's exclusive lock, waiting at most lockWait for another
// writer to release it.
func (a *Audit) lock(f *os.File) error {
	deadline := time.Now().Add(lockWait)
	for pause := time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
		ok, err := tryLock(f)
		if err != nil {
			return fmt.Errorf("telemetry: lock audit log %s: %w; nothing written", a.cfg.Path, err)
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%w: %s held for %v; nothing written", errAuditLocked, a.cfg.Path, lockWait)
		}
		time.Sleep(pause)
	}
}

// lockLocked takes the lock of the file now at cfg.Path: when another
// writer rotated (or someone removed) the file a.f is, it opens the new
// one. It returns the file's size. a.mu must be held.
func (a *Audit) lockLocked() (int64, error) {
	for {
		if err := a.lock(a.f); err != nil {
			return 0, err
		}
		size, same, err := fileState(a.f, a.cfg.Path)
		if err != nil {
			unlock(a.f)
			return 0, fmt.Errorf("telemetry: audit log: %w", err)
		}
		if same {
			return size, nil
		}
		unlock(a.f)
		a.f.Close()
		if a.f, err = a.open(false); err != nil {
			return 0, err
		}
		a.size = -1
	}
}

// catchUpLocked loads the chain's end from the file's last line (or the
// newest rotated file's, when the file has none) when another writer
// appended since this one, or when it is not known. A last line cut short
// by a crash is removed, and a "recovered" line records how many bytes
// were discarded. The file's lock must be held.
func (a *Audit) catchUpLocked(size int64) error {
	if size == a.size {
		return nil
	}
	last, end, err := tailScan(a.f, size)
	if err != nil {
		return err
	}
	var discarded int64
	if end < size {
		if err := a.f.Truncate(end); err != nil {
			return fmt.Errorf("telemetry: repair audit log: %w", err)
		}
		discarded = size - end
	}
	if last == nil {
		// No complete line here: continue from the newest rotated file.
		if last, err = lastRotatedLine(a.cfg.Path); err != nil {
			return err
		}
	}
	a.seq = 0
	copy(a.prev[:], genesis)
	if last != nil {
		seq, _, hash, reason := parseLine(last)
		if reason != "" {
			return fmt.Errorf("telemetry: open audit log: %w",
				&VerifyError{File: a.cfg.Path, Reason: "last line: " + reason})
		}
		a.seq = seq
		copy(a.prev[:], hash)
	}
	a.size = end
	if discarded > 0 {
		var rec lineBuilder
		rec.start(a.cfg.Now(), "recovered")
		rec.int("discarded_bytes", discarded)
		return a.putLocked(&rec)
	}
	return nil
}

func lastRotatedLine(path string) ([]byte, error) {
	rotated, err := rotatedFiles(path)
	if err != nil || len(rotated) == 0 {
		return nil, err
	}
	name := rotated[len(rotated)-1]
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("telemetry: open audit log: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("telemetry: open audit log: %w", err)
	}
	last, _, err := tailScan(f, st.Size())
	return last, err
}

// tailScan finds the last complete line of a file of the given size. It
// returns that line (nil when there is none) and end, the offset just past
// its newline; bytes from end to size are a line cut short.
func tailScan(r io.ReaderAt, size int64) (last []byte, end int64, err error) {
	const chunk = 64 << 10
	var buf []byte // the file's bytes from pos to size
	pos := size
	end = -1
	for {
		if end < 0 {
			if i := bytes.LastIndexByte(buf, '\n'); i >= 0 {
				end = pos + int64(i) + 1
			}
		}
		if end >= 0 {
			nl := int(end - 1 - pos) // index of the line's newline in buf
			if i := bytes.LastIndexByte(buf[:nl], '\n'); i >= 0 {
				return buf[i+1 : nl], end, nil
			}
			if pos == 0 {
				return buf[:nl], end, nil
			}
		} else if pos == 0 {
			return nil, 0, nil
		}
		if size-pos > maxLine {
			return nil, 0, errors.New("telemetry: open audit log: last line too long; not an audit log")
		}
		n := min(int64(chunk), pos)
		pos -= n
		next := make([]byte, int(n)+len(buf))
		if _, err := r.ReadAt(next[:n], pos); err != nil {
			return nil, 0, fmt.Errorf("telemetry: open audit log: %w", err)
		}
		copy(next[n:], buf)
		buf = next
	}
}

// rotateLocked moves the current file aside and opens a new one at
// cfg.Path, whose lock it takes before it releases the old one's, so
// that no other writer appends to either meanwhile. The old file's lock
// must be held; the new file's is held on return.
func (a *Audit) rotateLocked() error {
	if err := a.f.Sync(); err != nil {
		return fmt.Errorf("telemetry: rotate audit log: %w", err)
	}
	name := fmt.Sprintf("%s.%0*d", a.cfg.Path, rotatedSuffixLen, a.seq)
	if err := os.Rename(a.cfg.Path, name); err != nil {
		return fmt.Errorf("telemetry: rotate audit log: %w", err)
	}
	f, err := a.open(true)
	if err != nil {
		return fmt.Errorf("telemetry: rotate audit log: %w", err)
	}
	if err := a.lock(f); err != nil {
		f.Close()
		return err
	}
	unlock(a.f)
	a.f.Close()
	a.f = f
	a.size = -1
	return nil
}
