package main

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// The contenders, as named by the benchmarks (impl=NAME), baseline first.
var impls = []string{"bare", "chain", "redis", "retryablehttp", "failsafe"}

// The targets of the chain.
const (
	maxOverheadNs     = 1000 // chain over bare, in memory
	maxOverheadAllocs = 10
	minMemoryRatio    = 0.95 // loopback throughput, chain / bare
	minRedisRatio     = 0.5  // loopback throughput, redis / bare
	maxBytesPerHost   = 1024
)

// Verdicts.
const (
	met    = "met"
	missed = "**missed**"
	notRun = "not run"
)

// target is one target of the chain, as measured.
type target struct {
	what, measured, goal, verdict string
}

// report is what the ratios of one run say.
type report struct {
	targets []target
	// rows compare every contender with the bare client.
	rows    [][]string
	closing []string
}

func overheadName(impl string) string { return "Overhead/impl=" + impl }
func loopbackName(impl string) string { return "Loopback/impl=" + impl }

// overhead returns how much more of unit impl needs per request than the
// bare client, in memory: the median of the per-round differences (see
// paired).
func (s samples) overhead(impl, unit string) (float64, bool) {
	return s.paired(overheadName(impl), overheadName("bare"), unit, func(v, b float64) (float64, bool) { return v - b, true })
}

// throughput returns impl's loopback throughput over the bare client's:
// the median of the per-round ratios (see paired).
func (s samples) throughput(impl string) (float64, bool) {
	return s.paired(loopbackName(impl), loopbackName("bare"), "req/s", func(v, b float64) (float64, bool) { return v / b, b > 0 })
}

// paired compares name with base in unit. run.sh runs the benchmarks in
// rounds, every contender once per round, so the i-th value of each comes
// from the same round and saw about the same load on the machine; when
// both have as many values, paired returns the median of f over the
// rounds, which a load that changes between rounds does not skew.
// Otherwise it applies f to the two medians.
func (s samples) paired(name, base, unit string, f func(v, b float64) (float64, bool)) (float64, bool) {
	vs, bs := s[name][unit], s[base][unit]
	if len(vs) == 0 || len(bs) == 0 {
		return 0, false
	}
	if len(vs) != len(bs) {
		v, _ := s.median(name, unit)
		b, _ := s.median(base, unit)
		return f(v, b)
	}
	d := samples{"": {"": make([]float64, 0, len(vs))}}
	for i := range vs {
		x, ok := f(vs[i], bs[i])
		if !ok {
			return 0, false
		}
		d[""][""] = append(d[""][""], x)
	}
	return d.median("", "")
}

func judge(ok, good bool) string {
	switch {
	case !ok:
		return notRun
	case good:
		return met
	}
	return missed
}

// compute derives the targets, the comparison rows and the closing note
// from the samples of one run.
func compute(s samples) report {
	var r report
	add := func(what, measured, goal, verdict string) {
		if verdict == notRun {
			measured = "–"
		}
		r.targets = append(r.targets, target{what, measured, goal, verdict})
	}

	for _, m := range []struct{ unit, label string }{{"sec/op", "wall time"}, {"cpu-ns/op", "CPU time"}} {
		d, ok := s.overhead("chain", m.unit)
		d = toNs(m.unit, d)
		add("chain overhead over bare, in memory ("+m.label+")", "+"+fmtNs(d), "≤ 1 µs", judge(ok, d <= maxOverheadNs))
	}
	da, ok := s.overhead("chain", "allocs/op")
	add("chain overhead over bare, in memory (allocations)", fmt.Sprintf("+%.0f allocs/op", da), fmt.Sprintf("≤ %d", maxOverheadAllocs), judge(ok, da <= maxOverheadAllocs))
	for _, m := range []struct{ unit, label string }{{"sec/op", "wall time"}, {"cpu-ns/op", "CPU time"}} {
		c, ok1 := s.overhead("chain", m.unit)
		f, ok2 := s.overhead("failsafe", m.unit)
		c, f = toNs(m.unit, c), toNs(m.unit, f)
		add("chain overhead below failsafe-go's ("+m.label+")",
			fmt.Sprintf("chain +%s, failsafe-go +%s (%s)", fmtNs(c), fmtNs(f), fmtRatio(c, f)),
			"chain < failsafe-go", judge(ok1 && ok2, c < f))
	}
	tc, ok := s.throughput("chain")
	add("loopback throughput, chain / bare", fmt.Sprintf("%.2f×", tc), fmt.Sprintf("≥ %.2f", minMemoryRatio), judge(ok, tc >= minMemoryRatio))
	tr, ok := s.throughput("redis")
	add("loopback throughput, redis / bare", fmt.Sprintf("%.2f×", tr), fmt.Sprintf("≥ %.2f", minRedisRatio), judge(ok, tr >= minRedisRatio))
	ev, ok := s.median("Hosts", "evicted-B/host")
	add("100,000 hosts: retained per idle host, after eviction", fmt.Sprintf("%.1f B/host", ev), "≤ 1 KiB", judge(ok, ev <= maxBytesPerHost))
	lv, ok := s.median("Hosts", "live-B/host")
	add("100,000 hosts: retained per host while tracked", fmt.Sprintf("%.0f B/host", lv), "≤ 1 KiB", judge(ok, lv <= maxBytesPerHost))

	r.rows = append(r.rows, []string{"contender", "in memory: time", "over bare", "CPU over bare", "B/op over bare", "allocs/op over bare", "loopback req/s", "/ bare"})
	for _, impl := range impls {
		row := []string{impl}
		t, ok := s.median(overheadName(impl), "sec/op")
		row = append(row, orDash(ok, fmtNs(t*1e9)))
		d, ok := s.overhead(impl, "sec/op")
		row = append(row, orDash(ok, signed(fmtNs(d*1e9), d)))
		d, ok = s.overhead(impl, "cpu-ns/op")
		row = append(row, orDash(ok, signed(fmtNs(d), d)))
		d, ok = s.overhead(impl, "B/op")
		row = append(row, orDash(ok, signed(fmt.Sprintf("%.0f", math.Abs(d)), d)))
		d, ok = s.overhead(impl, "allocs/op")
		row = append(row, orDash(ok, signed(fmt.Sprintf("%.0f", math.Abs(d)), d)))
		q, ok := s.median(loopbackName(impl), "req/s")
		row = append(row, orDash(ok, fmt.Sprintf("%.0f", q)))
		q, ok = s.throughput(impl)
		row = append(row, orDash(ok, fmt.Sprintf("%.2f×", q)))
		r.rows = append(r.rows, row)
	}

	r.closing = closing(s, r)
	return r
}

// closing quotes the key ratios in sentences.
func closing(s samples, r report) []string {
	var out []string
	c, ok1 := s.overhead("chain", "sec/op")
	a, ok2 := s.overhead("chain", "allocs/op")
	if ok1 && ok2 {
		line := fmt.Sprintf("In memory the chain costs %s and %s allocations per request over the bare client (targets: 1 µs, 10)",
			signed(fmtNs(c*1e9), c), signed(fmt.Sprintf("%.0f", math.Abs(a)), a))
		if f, ok := s.overhead("failsafe", "sec/op"); ok {
			fa, _ := s.overhead("failsafe", "allocs/op")
			line += fmt.Sprintf("; failsafe-go's retry, breaker and limiter cost %s and %s", signed(fmtNs(f*1e9), f), signed(fmt.Sprintf("%.0f", math.Abs(fa)), fa))
		}
		if g, ok := s.overhead("retryablehttp", "sec/op"); ok {
			ga, _ := s.overhead("retryablehttp", "allocs/op")
			line += fmt.Sprintf(", go-retryablehttp alone %s and %s", signed(fmtNs(g*1e9), g), signed(fmt.Sprintf("%.0f", math.Abs(ga)), ga))
		}
		out = append(out, line+".")
	}
	if tc, ok := s.throughput("chain"); ok {
		line := fmt.Sprintf("Over loopback at 64 concurrent requests the chain keeps %.2f× of the bare client's throughput (target 0.95)", tc)
		if tr, ok := s.throughput("redis"); ok {
			line += fmt.Sprintf(", and %.2f× with its state in Redis (target 0.5)", tr)
		} else {
			line += "; the Redis contender did not run"
		}
		out = append(out, line+".")
	}
	if lv, ok := s.median("Hosts", "live-B/host"); ok {
		ev, _ := s.median("Hosts", "evicted-B/host")
		out = append(out, fmt.Sprintf("100,000 hosts cost %.0f B each while tracked and %.1f B each once idle and evicted (target 1 KiB).", lv, ev))
	}
	if sel, ok := s.median("Select/endpoints=1000/cache=on", "sec/op"); ok {
		line := fmt.Sprintf("Selecting an egress among 1,000 endpoints takes %s", fmtNs(sel*1e9))
		if un, ok := s.median("Select/endpoints=1000/cache=off", "sec/op"); ok {
			line += fmt.Sprintf(" (%s for a host seen for the first time)", fmtNs(un*1e9))
		}
		out = append(out, line+".")
	}
	if p, ok := s.median("Probe", "sec/op"); ok {
		h, _ := s.median("Probe", "peak-heap-MiB")
		out = append(out, fmt.Sprintf("The pre-flight probe of 1,000 loopback targets takes %.0f ms with a peak heap of %.1f MiB.", p*1e3, h))
	}
	n := 0
	for _, t := range r.targets {
		if t.verdict == missed {
			n++
		}
	}
	out = append(out, fmt.Sprintf("%d of %d targets missed.", n, len(r.targets)))
	return out
}

// toNs converts an overhead in unit to nanoseconds.
func toNs(unit string, v float64) float64 {
	if unit == "sec/op" {
		return v * 1e9
	}
	return v
}

// fmtNs formats a duration in nanoseconds with a unit that suits it.
func fmtNs(ns float64) string {
	a := math.Abs(ns)
	switch {
	case a >= 1e6:
		return fmt.Sprintf("%.2f ms", a/1e6)
	case a >= 1e3:
		return fmt.Sprintf("%.2f µs", a/1e3)
	}
	return fmt.Sprintf("%.0f ns", a)
}

// signed prefixes an absolute value's text with the sign of v.
func signed(text string, v float64) string {
	if v < 0 {
		return "−" + text
	}
	return "+" + text
}

// fmtRatio formats a/b.
func fmtRatio(a, b float64) string {
	if b == 0 {
		return "ratio undefined"
	}
	return fmt.Sprintf("ratio %.2f", a/b)
}

func orDash(ok bool, s string) string {
	if !ok {
		return "–"
	}
	return s
}

// markdown writes r as the ratio sections of RESULTS.md.
func (r report) markdown(w io.Writer) error {
	var b strings.Builder
	b.WriteString("## Targets\n\nOverheads and throughput ratios compare each contender with the bare client round by round " +
		"(every round runs all contenders back to back) and give the median over the rounds.\n\n")
	b.WriteString("| target | measured | goal | verdict |\n|---|---|---|---|\n")
	for _, t := range r.targets {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", t.what, t.measured, t.goal, t.verdict)
	}
	b.WriteString("\n## Every contender against the bare client\n\n")
	for i, row := range r.rows {
		b.WriteString("| " + strings.Join(row, " | ") + " |\n")
		if i == 0 {
			b.WriteString("|" + strings.Repeat("---|", len(row)) + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// closingMarkdown writes the closing note of r as one paragraph.
func (r report) closingMarkdown(w io.Writer) error {
	_, err := io.WriteString(w, strings.Join(r.closing, " ")+"\n")
	return err
}
