package main

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want samples
	}{
		{
			name: "runs and units",
			in: `goos: linux
pkg: github.com/egresskit/egresskit/bench
BenchmarkOverhead/impl=bare-2   	  100	  3000 ns/op	  1224 B/op	  12 allocs/op
BenchmarkOverhead/impl=bare-2   	  100	  2000 ns/op	  1224 B/op	  12 allocs/op
BenchmarkHosts-16   1   5 live-B/host   -0.5 evicted-B/host
PASS
ok  	github.com/egresskit/egresskit/bench	2.264s
`,
			want: samples{
				"Overhead/impl=bare": {"sec/op": {3e-6, 2e-6}, "B/op": {1224, 1224}, "allocs/op": {12, 12}},
				"Hosts":              {"live-B/host": {5}, "evicted-B/host": {-0.5}},
			},
		},
		{
			name: "log lines and names without procs",
			in:   "BenchmarkHosts\nBenchmarkHosts: hosts_test.go:60: something\nBenchmarkProbe 3 1e8 ns/op\n",
			want: samples{"Probe": {"sec/op": {0.1}}},
		},
		{
			name: "dash in a sub-benchmark name",
			in:   "BenchmarkSelect/a-b 10 7 ns/op\n",
			want: samples{"Select/a-b": {"sec/op": {7e-9}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parse(strings.NewReader(tt.in))
			if err != nil {
				t.Fatalf("parse(%q) error = %v", tt.in, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("parse(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		in       string
		wantLine int // 0: ErrNoResults
	}{
		{"", 0},
		{"PASS\nok x 1s\n", 0},
		{"BenchmarkX 10 5\n", 1},
		{"goos: linux\nBenchmarkX 10 5 ns/op 7\n", 2},
		{"BenchmarkX 10 abc ns/op\n", 1},
		{"BenchmarkX 10 NaN ns/op\n", 1},
		{"BenchmarkX 10 +Inf ns/op\n", 1},
		{"Benchmark 10 1 ns/op\n", 1},
		{"Benchmark-4 10 1 ns/op\n", 1},
	}
	for _, tt := range tests {
		_, err := parse(strings.NewReader(tt.in))
		if tt.wantLine == 0 {
			if !errors.Is(err, ErrNoResults) {
				t.Errorf("parse(%q) error = %v, want ErrNoResults", tt.in, err)
			}
			continue
		}
		var le *LineError
		if !errors.As(err, &le) || le.Line != tt.wantLine {
			t.Errorf("parse(%q) error = %v, want a *LineError on line %d", tt.in, err, tt.wantLine)
		}
	}
}

func TestMedian(t *testing.T) {
	s := samples{"X": {"u": {5, 1, 3}, "v": {4, 1, 3, 2}}}
	tests := []struct {
		name, unit string
		want       float64
		ok         bool
	}{
		{"X", "u", 3, true},
		{"X", "v", 2.5, true},
		{"X", "w", 0, false},
		{"Y", "u", 0, false},
	}
	for _, tt := range tests {
		got, ok := s.median(tt.name, tt.unit)
		if got != tt.want || ok != tt.ok {
			t.Errorf("median(%q, %q) = %v, %v, want %v, %v", tt.name, tt.unit, got, ok, tt.want, tt.ok)
		}
	}
	if v := s["X"]["u"]; v[0] != 5 {
		t.Errorf("median sorted the samples in place: %v", v)
	}
}

// FuzzParse checks that parse never panics, and that what it accepts has
// finite values and names without the Benchmark prefix.
func FuzzParse(f *testing.F) {
	f.Add("BenchmarkOverhead/impl=bare-2 100 3000 ns/op 1224 B/op 12 allocs/op\n")
	f.Add("goos: linux\nBenchmarkHosts 1 5 live-B/host\nPASS\n")
	f.Add("BenchmarkX 10 5\n")
	f.Add("Benchmark-1 1 1e400 x\n")
	f.Fuzz(func(t *testing.T, in string) {
		s, err := parse(strings.NewReader(in))
		if err != nil {
			if s != nil {
				t.Errorf("parse(%q) = %v with error %v, want nil", in, s, err)
			}
			return
		}
		for name, units := range s {
			if name == "" {
				t.Errorf("parse(%q) has an empty name", in)
			}
			for unit, vals := range units {
				if len(vals) == 0 {
					t.Errorf("parse(%q)[%q][%q] is empty", in, name, unit)
				}
			}
		}
	})
}
