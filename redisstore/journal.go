package redisstore

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// ErrJournal: Config.Journal names a file that cannot be read or written,
// or that holds a line this package did not write.
var ErrJournal = errors.New("redisstore: bad halt journal")

// journalError reports a journal that cannot be used.
// errors.Is(err, ErrJournal) is true.
type journalError struct {
	// Path is Config.Journal.
	Path string
	// Line is the number of the bad line (from 1), or 0 when the file
	// itself failed.
	Line int
	// Err is the file's error, or what is wrong with the line.
	Err error
}

// Error returns "redisstore: bad halt journal PATH[:LINE]: ERR".
func (e *journalError) Error() string {
	where := e.Path
	if e.Line > 0 {
		where += ":" + strconv.Itoa(e.Line)
	}
	return "redisstore: bad halt journal " + where + ": " + e.Err.Error()
}

// Unwrap returns ErrJournal and the file's error.
func (e *journalError) Unwrap() []error { return []error{ErrJournal, e.Err} }

// journal is the append-only file of the halts a Store remembers: a line
// "H SINCE HOST" when it learns a halt (SINCE in Unix microseconds), "R
// HOST" when it forgets one (resumed). Hosts hold no control characters
// (checkHost), so a line cannot be forged by a host name.
type journal struct {
	path string
	// turn is held (holds a value) by a Store from a change of its halts
	// to the line that records it, so that the lines keep the order of
	// the changes: a resume and a halt of one host racing each other
	// cannot leave the journal saying the opposite of the Store. A
	// channel rather than a mutex, so that a goroutine waiting its turn
	// is seen as blocked under testing/synctest.
	turn chan struct{}
}

// take waits for the journal's turn; give hands it back.
func (j *journal) take() { j.turn <- struct{}{} }
func (j *journal) give() { <-j.turn }

// loadJournal reads the journal at path into a map of halts (a missing
// file is empty), rewrites the file with only those halts, and returns
// it. A final line without its newline (a write cut short by a crash) is
// ignored; any other bad line is an error wrapping ErrJournal.
func loadJournal(path string) (*journal, map[string]time.Time, error) {
	j := &journal{path: path, turn: make(chan struct{}, 1)}
	data, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, nil, &journalError{Path: path, Err: err}
	}
	halts := make(map[string]time.Time)
	for n := 1; len(data) > 0; n++ {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			break // torn last line
		}
		line := string(data[:i])
		data = data[i+1:]
		kind, rest, _ := strings.Cut(line, " ")
		switch kind {
		case "H":
			us, host, ok := strings.Cut(rest, " ")
			since, err := strconv.ParseInt(us, 10, 64)
			if !ok || err != nil || since <= 0 || checkHost(host) != nil {
				return nil, nil, &journalError{Path: path, Line: n, Err: errors.New("not a halt line")}
			}
			halts[host] = time.UnixMicro(since)
		case "R":
			if checkHost(rest) != nil {
				return nil, nil, &journalError{Path: path, Line: n, Err: errors.New("not a resume line")}
			}
			delete(halts, rest)
		default:
			return nil, nil, &journalError{Path: path, Line: n, Err: errors.New("unknown record")}
		}
	}
	for h := range halts { // keep at most maxKnown, as remember does
		if len(halts) <= maxKnown {
			break
		}
		delete(halts, h)
	}
	// Compact: write the remembered halts alone, then replace the file.
	var b bytes.Buffer
	for h, t := range halts {
		fmt.Fprintf(&b, "H %d %s\n", t.UnixMicro(), h)
	}
	tmp := path + ".tmp"
	if err := writeSynced(tmp, b.Bytes()); err != nil {
		os.Remove(tmp)
		return nil, nil, &journalError{Path: path, Err: err}
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return nil, nil, &journalError{Path: path, Err: err}
	}
	return j, halts, nil
}

// writeSynced writes data to a new file at path and syncs it before
// returning: renamed over the journal unsynced, a crash could leave an
// empty journal in place of the halts it held.
func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// testHookAppend, when set (by tests only), is called with each line
// before it is appended.
var testHookAppend func(line string)

// halt appends that host is halted since t.
func (j *journal) halt(host string, t time.Time) error {
	return j.append("H " + strconv.FormatInt(t.UnixMicro(), 10) + " " + host + "\n")
}

// resume appends that host's halt is forgotten.
func (j *journal) resume(host string) error { return j.append("R " + host + "\n") }

// append writes line at the end of the file and syncs it; the caller
// holds the turn. The file is opened for each line: halts are learnt
// rarely, and a Store has no Close.
func (j *journal) append(line string) error {
	if testHookAppend != nil {
		testHookAppend(line)
	}
	f, err := os.OpenFile(j.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return &journalError{Path: j.path, Err: err}
	}
	_, err = f.WriteString(line)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return &journalError{Path: j.path, Err: err}
	}
	return nil
}
