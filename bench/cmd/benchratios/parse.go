package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// samples holds the values of every benchmark result read, by benchmark
// name (without the "Benchmark" prefix and the -GOMAXPROCS suffix) and
// unit: samples["Overhead/impl=chain"]["allocs/op"] is one value per run.
type samples map[string]map[string][]float64

// ErrNoResults is returned by parse when the input holds no benchmark
// result line.
var ErrNoResults = errors.New("benchratios: no benchmark results in the input")

// LineError reports a line that starts like a benchmark result but is not
// one.
type LineError struct {
	Line   int    // 1-based
	Reason string // what is wrong
}

func (e *LineError) Error() string {
	return fmt.Sprintf("benchratios: line %d: %s", e.Line, e.Reason)
}

// parse reads the output of go test -bench, in the Go benchmark format: a
// result line is "BenchmarkName[-P] N value unit [value unit ...]". Other
// lines (configuration, PASS, ok, logs) are ignored. A line that starts
// with "Benchmark" followed by an iteration count but has unpaired or
// non-numeric values is a *LineError; a name followed by anything other
// than a count is a log line (go test prints the name alone before a
// benchmark's output), and is skipped.
func parse(r io.Reader) (samples, error) {
	s := samples{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	n, found := 0, false
	for sc.Scan() {
		n++
		f := strings.Fields(sc.Text())
		if len(f) < 2 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		if _, err := strconv.ParseUint(f[1], 10, 64); err != nil {
			continue
		}
		name := trimProcs(strings.TrimPrefix(f[0], "Benchmark"))
		if name == "" {
			return nil, &LineError{n, "no benchmark name"}
		}
		vals := f[2:]
		if len(vals) == 0 || len(vals)%2 != 0 {
			return nil, &LineError{n, "values and units do not pair up"}
		}
		units := s[name]
		if units == nil {
			units = map[string][]float64{}
			s[name] = units
		}
		for i := 0; i < len(vals); i += 2 {
			v, err := strconv.ParseFloat(vals[i], 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, &LineError{n, fmt.Sprintf("value %q of unit %q is not a finite number", short(vals[i]), short(vals[i+1]))}
			}
			unit := vals[i+1]
			if unit == "ns/op" { // as benchstat does
				unit, v = "sec/op", v/1e9
			}
			units[unit] = append(units[unit], v)
		}
		found = true
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("benchratios: reading input: %w", err)
	}
	if !found {
		return nil, ErrNoResults
	}
	return s, nil
}

// trimProcs removes the -GOMAXPROCS suffix go test adds to a name.
func trimProcs(name string) string {
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return name
	}
	if _, err := strconv.Atoi(name[i+1:]); err != nil {
		return name
	}
	return name[:i]
}

// short bounds a token quoted in an error.
func short(s string) string {
	if len(s) > 32 {
		return s[:32] + "..."
	}
	return s
}

// median returns the median of the values of name in unit, and whether
// there are any.
func (s samples) median(name, unit string) (float64, bool) {
	v := s[name][unit]
	if len(v) == 0 {
		return 0, false
	}
	v = slices.Clone(v)
	slices.Sort(v)
	m := len(v) / 2
	if len(v)%2 == 1 {
		return v[m], true
	}
	return (v[m-1] + v[m]) / 2, true
}
