package console

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/egresskit/egresskit/internal/haltrec"
)

// line is one audit line of a host's trail, as shown.
type line struct {
	Time   string
	Kind   string
	Fields string // the other fields, "key=value" separated by spaces
}

// skipped are the fields of a line not shown in the trail.
var skipped = map[string]bool{"seq": true, "time": true, "kind": true, "prev": true, "hash": true, "host": true}

// trail reads the newest n lines of files whose host is key.
func trail(files []string, key string, n int) ([]line, string) {
	var out []line
	for _, path := range files {
		f, err := os.Open(path)
		if err != nil {
			return out, "The audit log cannot be read."
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			b := sc.Bytes()
			if !strings.Contains(string(b), key) {
				continue
			}
			var m map[string]any
			if json.Unmarshal(b, &m) != nil || m["host"] != key {
				continue
			}
			out = append(out, show(m))
			if len(out) > 2*n {
				out = append(out[:0], out[len(out)-n:]...)
			}
		}
		f.Close()
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, ""
}

func show(m map[string]any) line {
	l := line{Kind: fmt.Sprint(m["kind"])}
	if t, ok := m["time"].(string); ok {
		l.Time = t
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		if !skipped[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%v", k, m[k])
	}
	l.Fields = haltrec.Clip(b.String(), 600)
	return l
}
