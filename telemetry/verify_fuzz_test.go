package telemetry_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/egresskit/egresskit/internal/auditrec"
	"github.com/egresskit/egresskit/telemetry"
)

// The tampering FuzzVerify applies to a valid log.
const (
	opEdit     = iota // set one byte of line k to b
	opDelete          // delete line k
	opMove            // move line k to position j
	opInsert          // insert a copy of line k at position j
	opTruncate        // cut the log after byte pos
	numOps
)

// FuzzVerify applies one mutation — an edited byte, a deleted, moved or
// duplicated line, a cut at any byte — to a valid, anchored log and checks
// that Verify rejects it with a *VerifyError at the line where the log
// stops being the one written. The only mutations a chain without an anchor
// cannot see are cuts at a line boundary (lines removed from the end);
// with the anchor those fail at the line after the last.
func FuzzVerify(f *testing.F) {
	path := filepath.Join(f.TempDir(), "audit.jsonl")
	a, err := telemetry.NewAudit(telemetry.AuditConfig{Path: path, Now: fixedClock()})
	if err != nil {
		f.Fatal(err)
	}
	ev := sampleEvent()
	for i := range 8 {
		ev.Attempt = i + 1
		a.Observe(context.Background(), ev)
		if err := auditrec.Robots(a, "example.com", "/p/"+strconv.Itoa(i), i%2 == 0); err != nil {
			f.Fatal(err)
		}
	}
	if err := a.Close(); err != nil {
		f.Fatal(err)
	}
	anchor := a.Head()
	data, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	lines = lines[:len(lines)-1] // after the last newline
	n := len(lines)
	if _, err := (telemetry.Verifier{Anchor: anchor}).Verify(bytes.NewReader(data)); err != nil {
		f.Fatalf("Verify(untouched) = %v", err)
	}

	for op := range uint8(numOps) {
		f.Add(op, uint16(1), uint16(3), uint32(40), byte('x'))
		f.Add(op, uint16(n), uint16(1), uint32(len(data)-1), byte('\n'))
	}
	f.Add(uint8(opEdit), uint16(2), uint16(0), uint32(len(lines[1])-1), byte('}'))
	f.Add(uint8(opTruncate), uint16(0), uint16(0), uint32(len(lines[0])), byte(0))

	f.Fuzz(func(t *testing.T, op uint8, k, j uint16, pos uint32, b byte) {
		op %= numOps
		raw := j
		k = k%uint16(n) + 1 // 1-based line numbers
		j = j%uint16(n) + 1
		var (
			out       []byte
			want      int  // the line Verify must name
			truncated bool // whether the error is a cut-short last line
			chainSees = true
		)
		switch op {
		case opEdit:
			line := lines[k-1]
			i := int(pos) % len(line)
			if line[i] == b {
				return // not a change
			}
			edited := bytes.Clone(line)
			edited[i] = b
			out = join(lines[:k-1], edited, lines[k:])
			want = int(k)
			// Replacing the last newline leaves a last line without one.
			truncated = int(k) == n && i == len(line)-1
		case opDelete:
			out = join(lines[:k-1], nil, lines[k:])
			want = int(k)
			chainSees = int(k) != n
		case opMove:
			if j == k {
				return
			}
			rest := join(lines[:k-1], nil, lines[k:])
			rl := bytes.SplitAfter(rest, []byte("\n"))
			rl = rl[:len(rl)-1]
			out = join(rl[:j-1], lines[k-1], rl[j-1:])
			want = int(min(j, k))
		case opInsert:
			j = raw%uint16(n+1) + 1 // n+1 appends the copy
			out = join(lines[:j-1], lines[k-1], lines[j-1:])
			want = int(j)
			if k == j { // a copy of line j before line j chains; the original no longer does
				want++
			}
		case opTruncate:
			cut := int(pos) % len(data)
			out = data[:cut]
			before := bytes.Count(out, []byte("\n")) // complete lines kept
			want = before + 1
			truncated = cut > 0 && data[cut-1] != '\n'
			chainSees = truncated || before == 0
		}

		check := func(what string, err error) {
			t.Helper()
			var ve *telemetry.VerifyError
			if !errors.As(err, &ve) {
				t.Fatalf("%s: op %d k %d j %d pos %d b %q: Verify = %v, want a *VerifyError at line %d",
					what, op, k, j, pos, b, err, want)
			}
			if ve.Line != want || ve.Truncated != truncated {
				t.Fatalf("%s: op %d k %d j %d pos %d b %q: Verify = %v (line %d, truncated %v), want line %d, truncated %v",
					what, op, k, j, pos, b, err, ve.Line, ve.Truncated, want, truncated)
			}
		}
		_, err := telemetry.Verifier{Anchor: anchor}.Verify(bytes.NewReader(out))
		check("anchored", err)
		err = verify(bytes.NewReader(out))
		if chainSees {
			check("chain only", err)
		} else if err != nil {
			t.Fatalf("op %d k %d: Verify(lines removed from the end) = %v, want nil without an anchor", op, k, err)
		}
	})
}

// join concatenates before, mid and after into a new slice.
func join(before [][]byte, mid []byte, after [][]byte) []byte {
	var out []byte
	for _, l := range before {
		out = append(out, l...)
	}
	out = append(out, mid...)
	for _, l := range after {
		out = append(out, l...)
	}
	return out
}
