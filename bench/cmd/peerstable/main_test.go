package main

import (
	"bytes"
	"strings"
	"testing"
)

// twoRounds is go test -bench output of two interleaved rounds, the second
// with the chain slower, and a renamed contender of an older commit.
const twoRounds = `goos: linux
BenchmarkPeers/body=html-32KiB/impl=bare-2     	 1000	      1000 ns/op	      900 cpu-ns/op	    1224 B/op	      12 allocs/op
BenchmarkPeers/body=html-32KiB/impl=failsafe-2 	 1000	      3000 ns/op	     2900 cpu-ns/op	    2042 B/op	      34 allocs/op
BenchmarkPeers/body=html-32KiB/impl=chain-2    	 1000	      2000 ns/op	     1900 cpu-ns/op	    1865 B/op	      13 allocs/op
BenchmarkPeers/body=html-32KiB/impl=chain@adc6676-2 	 1000	      4000 ns/op	     3900 cpu-ns/op	    2282 B/op	      16 allocs/op
BenchmarkPeersLoopback/impl=bare-2             	 1000	     50000 ns/op	    90000 cpu-ns/op	    20000 req/s	    5836 B/op	      68 allocs/op
BenchmarkPeersLoopback/impl=chain-redis-2      	 1000	     60000 ns/op	    99000 cpu-ns/op	    18000 req/s	    7396 B/op	      80 allocs/op
BenchmarkPeers/body=html-32KiB/impl=bare-2     	 1000	      2000 ns/op	     900 cpu-ns/op	    1224 B/op	      12 allocs/op
BenchmarkPeers/body=html-32KiB/impl=failsafe-2 	 1000	      4000 ns/op	     2900 cpu-ns/op	    2042 B/op	      34 allocs/op
BenchmarkPeers/body=html-32KiB/impl=chain-2    	 1000	      5000 ns/op	     1900 cpu-ns/op	    1865 B/op	      13 allocs/op
BenchmarkPeers/body=html-32KiB/impl=chain@adc6676-2 	 1000	      5000 ns/op	     3900 cpu-ns/op	    2282 B/op	      16 allocs/op
BenchmarkPeersLoopback/impl=bare-2             	 1000	     50000 ns/op	    90000 cpu-ns/op	    10000 req/s	    5836 B/op	      68 allocs/op
BenchmarkPeersLoopback/impl=chain-redis-2      	 1000	     60000 ns/op	    99000 cpu-ns/op	    10000 req/s	    7396 B/op	      80 allocs/op
PASS
`

// TestTables: overheads are medians of the per-round differences from the
// bare client (chain: +1 and +3 µs, median +2; failsafe-go: +2 each), the
// best round is each contender's fastest, throughput ratios are medians
// of the per-round ratios (0.9 and 1.0), and contender names keep their
// dashes and commit.
func TestTables(t *testing.T) {
	var out bytes.Buffer
	if err := run(nil, strings.NewReader(twoRounds), &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| chain | 3500 | +2.00 µs | 1.00× | 2000 | +1.00 µs | 1900 | +1.00 µs | 0.50× | 1865 | 13 |",
		"| failsafe | 3500 | +2.00 µs | 1.00× | 3000 | +2.00 µs | 2900 | +2.00 µs | 1.00× | 2042 | 34 |",
		"| chain@adc6676 | 4500 | +3.00 µs | 1.50× | 4000 | +3.00 µs | 3900 | +3.00 µs | 1.50× | 2282 | 16 |",
		"| chain-redis | 60000 | 14000 | 0.95× | 99000 | 7396 | 80 |",
		"medians of 2 rounds",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestNoResults: input without a BenchmarkPeers line is an error.
func TestNoResults(t *testing.T) {
	if err := run(nil, strings.NewReader("goos: linux\nPASS\n"), &bytes.Buffer{}); err == nil {
		t.Error("run on no results = nil error, want one")
	}
}

func TestParseLine(t *testing.T) {
	cases := []struct {
		line, name, impl string
		ok               bool
	}{
		{"BenchmarkPeers/body=text-128B/impl=chain-redis-2 1 5 ns/op", "BenchmarkPeers/body=text-128B", "chain-redis", true},
		{"BenchmarkPeers/body=text-128B/impl=chain-redis 1 5 ns/op", "BenchmarkPeers/body=text-128B", "chain-redis", true},
		{"BenchmarkPeersLoopback/impl=bare-8 1 5 ns/op 7 req/s", "BenchmarkPeersLoopback", "bare", true},
		{"BenchmarkOverhead/body=x/impl=bare-2 1 5 ns/op", "", "", false},
		{"BenchmarkPeers/body=x/impl=bare-2 1 five ns/op", "", "", false},
		{"BenchmarkPeers/body=x-2 1 5 ns/op", "", "", false},
	}
	for _, c := range cases {
		name, impl, _, ok := parseLine(c.line)
		if name != c.name || impl != c.impl || ok != c.ok {
			t.Errorf("parseLine(%q) = %q, %q, %v; want %q, %q, %v", c.line, name, impl, ok, c.name, c.impl, c.ok)
		}
	}
}
