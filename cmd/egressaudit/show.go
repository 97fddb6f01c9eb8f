package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/egresskit/egresskit/telemetry"
)

// provenanceKinds are the kinds of the provenance records.
var provenanceKinds = []string{"consent", "minimisation", "deletion"}

// filter selects lines.
type filter struct {
	host         string
	kinds        []string
	since, until time.Time
}

func (f filter) keep(r record) bool {
	if f.host != "" && r.str("host") != f.host && r.str("subject") != f.host {
		return false
	}
	if len(f.kinds) > 0 && !slices.Contains(f.kinds, r.kind) {
		return false
	}
	if !f.since.IsZero() && r.time.Before(f.since) {
		return false
	}
	if !f.until.IsZero() && !r.time.Before(f.until) {
		return false
	}
	return true
}

// field is one field of a line, in the order it was written.
type field struct {
	key string
	val json.RawMessage
}

// record is one decoded line.
type record struct {
	seq    json.RawMessage
	time   time.Time
	kind   string
	fields []field // without seq, time, kind, prev and hash
}

func (r record) str(k string) string {
	for _, f := range r.fields {
		if f.key == k {
			var s string
			if json.Unmarshal(f.val, &s) == nil {
				return s
			}
		}
	}
	return ""
}

// decode reads one line, keeping the order of its fields.
func decode(line []byte) (record, error) {
	var r record
	dec := json.NewDecoder(bytes.NewReader(line))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return r, errors.New("not a JSON object")
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return r, err
		}
		k, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return r, err
		}
		switch k {
		case "seq":
			r.seq = v
		case "time":
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return r, err
			}
			if r.time, err = time.Parse(time.RFC3339Nano, s); err != nil {
				return r, err
			}
		case "kind":
			if err := json.Unmarshal(v, &r.kind); err != nil {
				return r, err
			}
		case "prev", "hash":
		default:
			r.fields = append(r.fields, field{k, v})
		}
	}
	return r, nil
}

// parseTime reads an RFC 3339 time or a date.
func parseTime(flagName, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Time{}, usagef("-%s %q: want an RFC 3339 time (2026-01-02T15:04:05Z) or a date (2026-01-02)", flagName, s)
}

func showCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("show")
	host := fs.String("host", "", "keep lines whose host or subject is `H`")
	kinds := fs.String("kind", "", "keep lines of these `KINDS` (comma-separated: attempt, halt, consent, ...)")
	prov := fs.Bool("provenance", false, "keep the provenance records: consent, minimisation, deletion")
	since := fs.String("since", "", "keep lines at or after `T` (RFC 3339 or a date)")
	until := fs.String("until", "", "keep lines before `T` (RFC 3339 or a date)")
	asJSON := fs.Bool("json", false, "print the kept lines as they are")
	path, err := parse(fs, args)
	if err != nil {
		return err
	}
	f := filter{host: *host}
	if *kinds != "" {
		for k := range strings.SplitSeq(*kinds, ",") {
			if k = strings.TrimSpace(k); k != "" {
				f.kinds = append(f.kinds, k)
			}
		}
	}
	if *prov {
		f.kinds = append(f.kinds, provenanceKinds...)
	}
	if f.since, err = parseTime("since", *since); err != nil {
		return err
	}
	if f.until, err = parseTime("until", *until); err != nil {
		return err
	}
	paths, err := files(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(stdout)
	for _, p := range paths {
		if err := showFile(w, p, f, *asJSON); err != nil {
			w.Flush()
			return err
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	// What was shown is only as good as the chain.
	if _, err := (telemetry.Verifier{}).VerifyFiles(paths...); err != nil {
		var ve *telemetry.VerifyError
		if errors.As(err, &ve) {
			fmt.Fprintln(stderr, "egressaudit: the log does not verify; the lines shown may have been altered:")
		}
		return err
	}
	return nil
}

func showFile(w *bufio.Writer, path string, f filter, asJSON bool) error {
	file, err := os.Open(path)
	if err != nil {
		return err
	}
	defer file.Close()
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for n := 1; sc.Scan(); n++ {
		r, err := decode(sc.Bytes())
		if err != nil {
			fmt.Fprintf(w, "%s:%d: not an audit line: %v\n", path, n, err)
			continue
		}
		if !f.keep(r) {
			continue
		}
		if asJSON {
			w.Write(sc.Bytes())
			w.WriteByte('\n')
			continue
		}
		fmt.Fprintf(w, "%s %6s %-12s", r.time.UTC().Format(time.RFC3339), r.seq, r.kind)
		for _, fl := range r.fields {
			fmt.Fprintf(w, " %s=%s", fl.key, fl.val)
		}
		w.WriteByte('\n')
	}
	return sc.Err()
}
