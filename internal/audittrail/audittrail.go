// Package audittrail reads a host's trail from audit logs (package
// telemetry's files) for the review console and egressctl: the newest
// lines whose host is the host's key, each cleaned and bounded for a page
// or a terminal.
package audittrail

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/egresskit/egresskit/internal/haltrec"
)

// Line is one audit line of a trail, as shown.
type Line struct {
	Seq    uint64
	Time   string
	Kind   string
	Fields string // the other fields, key=value separated by spaces; string values quoted
}

// maxFields bounds a Line's Fields, and maxValue each value in them, in
// bytes.
const maxFields, maxValue = 600, 200

// maxLine is the longest audit line read; longer ones are skipped.
const maxLine = 1 << 20

// skipped are the fields of a line not shown in the trail.
var skipped = map[string]bool{"seq": true, "time": true, "kind": true, "prev": true, "hash": true, "host": true}

// Read returns the newest n lines of files (oldest file first) whose host
// is key, newest first. It stops at the first file it cannot read, with
// the lines read so far.
func Read(files []string, key string, n int) ([]Line, error) {
	var out []Line
	needle := []byte(strconv.Quote(key))
	for _, path := range files {
		if err := readFile(path, key, needle, n, &out); err != nil {
			return reverse(out, n), err
		}
	}
	return reverse(out, n), nil
}

func readFile(path, key string, needle []byte, n int, out *[]Line) error {
	f, err := os.Open(path)
	if err != nil {
		return errors.New("the audit log cannot be read")
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	var long bool // in a line longer than maxLine
	var buf []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(buf)+len(chunk) > maxLine {
			long, buf = true, buf[:0]
		} else if !long {
			buf = append(buf, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if !long && bytes.Contains(buf, needle) {
			var m map[string]any
			if json.Unmarshal(buf, &m) == nil && m["host"] == key {
				*out = append(*out, show(m))
				if len(*out) > 2*n {
					*out = append((*out)[:0], (*out)[len(*out)-n:]...)
				}
			}
		}
		long, buf = false, buf[:0]
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return errors.New("the audit log cannot be read")
		}
	}
}

func reverse(out []Line, n int) []Line {
	if len(out) > n {
		out = out[len(out)-n:]
	}
	slices.Reverse(out)
	return out
}

func show(m map[string]any) Line {
	l := Line{Kind: haltrec.Line(fmt.Sprint(m["kind"]), 40)}
	if t, ok := m["time"].(string); ok {
		l.Time = haltrec.Line(t, 40)
	}
	if s, ok := m["seq"].(float64); ok && s >= 0 {
		l.Seq = uint64(s)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		if !skipped[k] {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		if b.Len() > maxFields {
			break
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(haltrec.Line(k, 40))
		b.WriteByte('=')
		switch v := m[k].(type) {
		case string:
			b.WriteString(strconv.QuoteToGraphic(haltrec.Clip(v, maxValue)))
		default:
			j, _ := json.Marshal(v)
			b.WriteString(haltrec.Line(string(j), maxValue))
		}
	}
	l.Fields = haltrec.Line(b.String(), maxFields)
	return l
}
