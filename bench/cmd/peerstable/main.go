// Command peerstable reads the output of bench/peers's benchmarks, any
// number of interleaved rounds (go test -bench output; each result of a
// benchmark is one round), and writes Markdown tables: for BenchmarkPeers,
// each contender's wall and CPU time per request, its overhead over the
// bare client (the median over rounds of the difference within a round),
// that overhead as a multiple of failsafe-go's, the fastest round's wall
// time (less disturbed by a busy machine than the median), and its bytes
// and allocations; for BenchmarkPeersLoopback, each contender's throughput as
// a share of the bare client's (the median of the ratios within a round).
//
// Usage:
//
//	peerstable [file ...]
//
// With no file it reads standard input. It exits with status 1 when the
// input cannot be read or holds no BenchmarkPeers result.
package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "peerstable:", err)
		os.Exit(1)
	}
}

func run(files []string, stdin io.Reader, w io.Writer) error {
	var rs results
	if len(files) == 0 {
		if err := rs.read(stdin); err != nil {
			return err
		}
	}
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		err = rs.read(f)
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	if len(rs.groups) == 0 {
		return errors.New("no BenchmarkPeers result in the input")
	}
	rs.write(w)
	return nil
}

// A group is the results of one benchmark table: BenchmarkPeers for one
// body, or BenchmarkPeersLoopback.
type group struct {
	name  string   // "BenchmarkPeers/body=html-32KiB", "BenchmarkPeersLoopback"
	impls []string // in order of appearance
	// rounds[impl] holds one map of unit to value per result, in order.
	rounds map[string][]map[string]float64
}

type results struct {
	groups []*group
}

// read adds the results of the benchmark lines of r.
func (rs *results) read(r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		name, impl, vals, ok := parseLine(sc.Text())
		if !ok {
			continue
		}
		g := rs.group(name)
		if _, seen := g.rounds[impl]; !seen {
			g.impls = append(g.impls, impl)
		}
		g.rounds[impl] = append(g.rounds[impl], vals)
	}
	return sc.Err()
}

func (rs *results) group(name string) *group {
	for _, g := range rs.groups {
		if g.name == name {
			return g
		}
	}
	g := &group{name: name, rounds: map[string][]map[string]float64{}}
	rs.groups = append(rs.groups, g)
	return g
}

// parseLine parses a result line of BenchmarkPeers or
// BenchmarkPeersLoopback: the benchmark's name without its impl= part and
// GOMAXPROCS suffix, the contender, and the value of every unit.
func parseLine(line string) (name, impl string, vals map[string]float64, ok bool) {
	f := strings.Fields(line)
	if len(f) < 4 || !strings.HasPrefix(f[0], "BenchmarkPeers") || len(f)%2 != 0 {
		return "", "", nil, false
	}
	full := f[0]
	if i := strings.LastIndexByte(full, '-'); i >= 0 {
		if _, err := strconv.Atoi(full[i+1:]); err == nil {
			full = full[:i] // the -GOMAXPROCS suffix
		}
	}
	i := strings.Index(full, "/impl=")
	if i < 0 {
		return "", "", nil, false
	}
	name, impl = full[:i], full[i+len("/impl="):]
	vals = map[string]float64{}
	for j := 2; j+1 < len(f); j += 2 {
		v, err := strconv.ParseFloat(f[j], 64)
		if err != nil {
			return "", "", nil, false
		}
		vals[f[j+1]] = v
	}
	return name, impl, vals, true
}

// median returns the median of xs, or NaN when there is none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return nan()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

func nan() float64 { v, _ := strconv.ParseFloat("NaN", 64); return v }

// values returns the values of unit of impl, one per round.
func (g *group) values(impl, unit string) []float64 {
	var xs []float64
	for _, r := range g.rounds[impl] {
		if v, ok := r[unit]; ok {
			xs = append(xs, v)
		}
	}
	return xs
}

// paired returns f(x, b) for each round in which impl and "bare" both have
// unit, pairing the k-th result of each.
func (g *group) paired(impl, unit string, f func(x, b float64) float64) []float64 {
	x, b := g.values(impl, unit), g.values("bare", unit)
	var out []float64
	for k := range min(len(x), len(b)) {
		out = append(out, f(x[k], b[k]))
	}
	return out
}

func diff(x, b float64) float64  { return x - b }
func ratio(x, b float64) float64 { return x / b }

func (rs *results) write(w io.Writer) {
	for _, g := range rs.groups {
		if g.name == "BenchmarkPeersLoopback" {
			g.writeLoopback(w)
		} else {
			g.writeMemory(w)
		}
		fmt.Fprintln(w)
	}
}

func (g *group) writeMemory(w io.Writer) {
	fmt.Fprintf(w, "`%s` (medians of %d rounds; overheads are medians of the per-round differences from `bare`; best: the fastest round of each)\n\n", g.name, len(g.rounds["bare"]))
	fmt.Fprintln(w, "| contender | ns/op | over bare | × failsafe's | best ns/op | best over bare | cpu-ns/op | CPU over bare | × failsafe's | B/op | allocs/op |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	fsOver := median(g.paired("failsafe", "ns/op", diff))
	fsCPU := median(g.paired("failsafe", "cpu-ns/op", diff))
	bestBare := minimum(g.values("bare", "ns/op"))
	for _, impl := range g.impls {
		over, times, bestOver, cpuOver, cpuTimes := "—", "—", "—", "—", "—"
		best := minimum(g.values(impl, "ns/op"))
		if impl != "bare" {
			o := median(g.paired(impl, "ns/op", diff))
			c := median(g.paired(impl, "cpu-ns/op", diff))
			over, cpuOver = fmt.Sprintf("%+.2f µs", o/1000), fmt.Sprintf("%+.2f µs", c/1000)
			bestOver = fmt.Sprintf("%+.2f µs", (best-bestBare)/1000)
			if fsOver > 0 {
				times = fmt.Sprintf("%.2f×", o/fsOver)
			}
			if fsCPU > 0 {
				cpuTimes = fmt.Sprintf("%.2f×", c/fsCPU)
			}
		}
		fmt.Fprintf(w, "| %s | %.0f | %s | %s | %.0f | %s | %.0f | %s | %s | %.0f | %.0f |\n", impl,
			median(g.values(impl, "ns/op")), over, times, best, bestOver,
			median(g.values(impl, "cpu-ns/op")), cpuOver, cpuTimes,
			median(g.values(impl, "B/op")), median(g.values(impl, "allocs/op")))
	}
}

// minimum returns the least of xs, or NaN when there is none.
func minimum(xs []float64) float64 {
	if len(xs) == 0 {
		return nan()
	}
	return slices.Min(xs)
}

func (g *group) writeLoopback(w io.Writer) {
	fmt.Fprintf(w, "`%s` (medians of %d rounds; the throughput ratio is the median of the per-round ratios to `bare`)\n\n", g.name, len(g.rounds["bare"]))
	fmt.Fprintln(w, "| contender | ns/op | req/s | × bare's throughput | cpu-ns/op | B/op | allocs/op |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---:|")
	for _, impl := range g.impls {
		r := "—"
		if impl != "bare" {
			r = fmt.Sprintf("%.2f×", median(g.paired(impl, "req/s", ratio)))
		}
		fmt.Fprintf(w, "| %s | %.0f | %.0f | %s | %.0f | %.0f | %.0f |\n", impl,
			median(g.values(impl, "ns/op")), median(g.values(impl, "req/s")), r,
			median(g.values(impl, "cpu-ns/op")), median(g.values(impl, "B/op")), median(g.values(impl, "allocs/op")))
	}
}
