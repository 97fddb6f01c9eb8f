package telemetry

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strconv"
)

// VerifyError reports the first bad line of an audit log, for the
// operator to look at.
type VerifyError struct {
	// File names the file, when verifying files; "" for a reader.
	File string
	// Line is the 1-based line number within the file (or reader). For a
	// log that ends before its anchor, it is the line after the last; 0
	// when NewAudit found the last line of an existing file damaged.
	Line int
	// Reason says what is wrong, e.g. "hash mismatch: the line was
	// edited".
	Reason string
	// Truncated is true when the bad line is a last line without its
	// newline, and the rest of the log is intact: an interrupted write
	// (a crash) rather than tampering. NewAudit repairs such a log when it
	// reopens it.
	Truncated bool
}

// Error says which line is bad and why.
func (e *VerifyError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("telemetry: audit log %s: %s", e.File, e.Reason)
	}
	if e.File != "" {
		return fmt.Sprintf("telemetry: audit log %s line %d: %s", e.File, e.Line, e.Reason)
	}
	return fmt.Sprintf("telemetry: audit log line %d: %s", e.Line, e.Reason)
}

// Verifier checks audit logs: an operator's tool (cmd/egressaudit), or a
// crawler author's check of its own log. The zero Verifier checks a whole
// log from its first line.
type Verifier struct {
	// Start is where the checked lines chain from: the Head of the line
	// just before them. The zero Head means the start of the log (seq 0,
	// and the prev of the log's first line, 64 zeros). Set it to verify
	// only the files written after a Head checked earlier.
	Start Head
	// Anchor, when its Seq is not zero, is a Head recorded earlier
	// (Audit.Head, or the head command of cmd/egressaudit) and kept outside
	// the log; the log must contain that line. It detects lines removed
	// from the end of the log, which the chain alone cannot.
	Anchor Head
}

// Verify checks an audit log read from r: one file, or rotated files
// concatenated in order. It returns the Head of the last line, which
// later checks may take as Start or Anchor, when every line is intact, in
// order, and chains from Start; otherwise the zero Head and a *VerifyError
// naming the first bad line (with Truncated set when the only fault is a
// last line cut short), or an error from r.
func (v Verifier) Verify(r io.Reader) (Head, error) {
	st := v.state()
	if err := st.read(r, ""); err != nil {
		return Head{}, err
	}
	if err := st.done(""); err != nil {
		return Head{}, err
	}
	return st.head(), nil
}

// VerifyFiles checks the files of one audit log, oldest first (see
// AuditFiles), as one chain, as Verify does; errors name the file. The
// Head comes from the same reading as the check: on a log being appended
// to, it is of a verified line, never of one written after.
func (v Verifier) VerifyFiles(paths ...string) (Head, error) {
	st := v.state()
	last := ""
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return Head{}, fmt.Errorf("telemetry: verify audit log: %w", err)
		}
		err = st.read(f, p)
		f.Close()
		if err != nil {
			return Head{}, err
		}
		last = p
	}
	if err := st.done(last); err != nil {
		return Head{}, err
	}
	return st.head(), nil
}

type verifyState struct {
	seq    uint64
	hash   []byte
	anchor Head
	lines  int // lines in the current file
	total  int
}

// head is the Head of the last line checked.
func (st *verifyState) head() Head { return Head{Seq: st.seq, Hash: string(st.hash)} }

func (v Verifier) state() *verifyState {
	st := &verifyState{seq: v.Start.Seq, hash: []byte(v.Start.Hash), anchor: v.Anchor}
	if v.Start == (Head{}) {
		st.hash = []byte(genesis)
	}
	return st
}

func (st *verifyState) read(r io.Reader, file string) error {
	br := bufio.NewReaderSize(r, 64<<10)
	st.lines = 0
	var long []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			if len(long)+len(chunk) > maxLine {
				return &VerifyError{File: file, Line: st.lines + 1, Reason: "line too long"}
			}
			long = append(long, chunk...)
			continue
		}
		line := chunk
		if long != nil {
			long = append(long, chunk...)
			line, long = long, nil
		}
		if err == io.EOF {
			if len(line) > 0 {
				st.lines++
				return &VerifyError{File: file, Line: st.lines,
					Reason: "truncated last line (incomplete write)", Truncated: true}
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("telemetry: verify audit log: %w", err)
		}
		st.lines++
		st.total++
		if reason := st.check(line[:len(line)-1]); reason != "" {
			return &VerifyError{File: file, Line: st.lines, Reason: reason}
		}
	}
}

func (st *verifyState) check(line []byte) string {
	seq, prev, hash, reason := parseLine(line)
	if reason != "" {
		return reason
	}
	if !bytes.Equal(prev, st.hash) {
		if st.total == 1 && string(st.hash) == genesis {
			return "does not chain from the start of the log: earlier lines were deleted"
		}
		return "prev does not match the previous line's hash: a line was deleted, inserted or reordered here"
	}
	if seq != st.seq+1 {
		return fmt.Sprintf("seq %d, want %d", seq, st.seq+1)
	}
	if st.anchor.Seq == seq && string(hash) != st.anchor.Hash {
		return "hash differs from the anchored head"
	}
	st.seq = seq
	st.hash = append(st.hash[:0], hash...)
	return ""
}

func (st *verifyState) done(file string) error {
	if st.total == 0 {
		return &VerifyError{File: file, Line: 1, Reason: "empty log"}
	}
	if st.anchor.Seq > st.seq {
		return &VerifyError{File: file, Line: st.lines + 1, Reason: fmt.Sprintf(
			"log ends at seq %d before the anchored head at seq %d: lines were removed from its end",
			st.seq, st.anchor.Seq)}
	}
	return nil
}

// parseLine checks one line (without its newline) on its own: its layout
// and its hash. It does not decode the JSON: a line whose hash matches was
// written by a writer that computes the hash, which is Audit (whose lines
// are valid JSON) or a forger who could as well have written valid JSON;
// decoding would only slow verification down. It returns the line's seq, prev and hash, or a
// reason why the line is bad.
func parseLine(line []byte) (seq uint64, prev, hash []byte, reason string) {
	if len(line) < minLineLen {
		return 0, nil, nil, "not an audit line: too short"
	}
	n := len(line)
	if string(line[n-hashTail:n-hashTail+len(hashKey)]) != hashKey || string(line[n-2:]) != `"}` {
		return 0, nil, nil, "not an audit line: no hash at its end"
	}
	hash = line[n-hashTail+len(hashKey) : n-2]
	body := line[:n-hashTail]
	b := len(body)
	if string(body[b-prevTail:b-prevTail+len(prevKey)]) != prevKey || body[b-1] != '"' {
		return 0, nil, nil, "not an audit line: no prev before its hash"
	}
	prev = body[b-prevTail+len(prevKey) : b-1]
	sum := sha256.Sum256(body)
	var want [hashLen]byte
	hex.Encode(want[:], sum[:])
	if !bytes.Equal(want[:], hash) {
		return 0, nil, nil, "hash mismatch: the line was edited"
	}
	rest, ok := bytes.CutPrefix(line, []byte(`{"seq":`))
	i := bytes.IndexByte(rest, ',')
	if !ok || i < 0 {
		return 0, nil, nil, "not an audit line: no seq"
	}
	seq, err := strconv.ParseUint(string(rest[:i]), 10, 64)
	if err != nil {
		return 0, nil, nil, "not an audit line: bad seq"
	}
	return seq, prev, hash, ""
}
