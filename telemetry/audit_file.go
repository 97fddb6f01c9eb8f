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

// openFile opens cfg.Path, repairs a cut-short last line and loads the
// chain's end into a.seq and a.prev. It returns how many bytes it
// discarded.
func (a *Audit) openFile() (discarded int64, err error) {
	f, err := os.OpenFile(a.cfg.Path, os.O_RDWR|os.O_CREATE|os.O_APPEND, a.cfg.Perm)
	if err != nil {
		return 0, fmt.Errorf("telemetry: open audit log: %w", err)
	}
	fail := func(err error) (int64, error) {
		f.Close()
		return 0, err
	}
	st, err := f.Stat()
	if err != nil {
		return fail(fmt.Errorf("telemetry: open audit log: %w", err))
	}
	size := st.Size()
	last, end, err := tailScan(f, size)
	if err != nil {
		return fail(err)
	}
	if end < size {
		if err := f.Truncate(end); err != nil {
			return fail(fmt.Errorf("telemetry: repair audit log: %w", err))
		}
		discarded = size - end
	}
	if last == nil {
		// No complete line here: continue from the newest rotated file.
		last, err = lastRotatedLine(a.cfg.Path)
		if err != nil {
			return fail(err)
		}
	}
	if last != nil {
		seq, _, hash, reason := parseLine(last)
		if reason != "" {
			return fail(fmt.Errorf("telemetry: open audit log: %w",
				&VerifyError{File: a.cfg.Path, Reason: "last line: " + reason}))
		}
		a.seq = seq
		copy(a.prev[:], hash)
	}
	a.f = f
	a.size = end
	return discarded, nil
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
// cfg.Path. a.mu must be held.
func (a *Audit) rotateLocked() error {
	if err := a.f.Sync(); err != nil {
		return fmt.Errorf("telemetry: rotate audit log: %w", err)
	}
	if err := a.f.Close(); err != nil {
		return fmt.Errorf("telemetry: rotate audit log: %w", err)
	}
	name := fmt.Sprintf("%s.%0*d", a.cfg.Path, rotatedSuffixLen, a.seq)
	if err := os.Rename(a.cfg.Path, name); err != nil {
		return fmt.Errorf("telemetry: rotate audit log: %w", err)
	}
	f, err := os.OpenFile(a.cfg.Path, os.O_RDWR|os.O_CREATE|os.O_APPEND|os.O_EXCL, a.cfg.Perm)
	if err != nil {
		return fmt.Errorf("telemetry: rotate audit log: %w", err)
	}
	a.f = f
	a.size = 0
	return nil
}
