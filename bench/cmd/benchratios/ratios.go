package main

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// The contenders, as named by the benchmarks (impl=NAME), baseline first.
var impls = []string{"bare", "chain", "redis", "retryablehttp", "failsafe"}

// The pages, as named by the benchmarks (body=NAME), in table order, and
// those the chain has targets on: the canned 128-byte text and a real
// 32 KiB HTML page.
var (
	bodies       = []string{"text-128B", "html-32KiB", "html-256KiB"}
	targetBodies = []string{"text-128B", "html-32KiB"}
)

// canned is the page of the absolute targets (1 µs, Redis) and of the
// closing note's first sentence.
const canned = "text-128B"

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
	// rows compare every contender with the bare client, one table per
	// page (by body name).
	rows    map[string][][]string
	closing []string
}

func overheadName(body, impl string) string { return "Overhead/body=" + body + "/impl=" + impl }
func loopbackName(body, impl string) string { return "Loopback/body=" + body + "/impl=" + impl }

// overhead returns how much more of unit impl needs per request than the
// bare client, in memory, on the page body: the median of the per-round
// differences (see paired).
func (s samples) overhead(body, impl, unit string) (float64, bool) {
	return s.paired(overheadName(body, impl), overheadName(body, "bare"), unit, func(v, b float64) (float64, bool) { return v - b, true })
}

// throughput returns impl's loopback throughput over the bare client's on
// the page body: the median of the per-round ratios (see paired).
func (s samples) throughput(body, impl string) (float64, bool) {
	return s.paired(loopbackName(body, impl), loopbackName(body, "bare"), "req/s", func(v, b float64) (float64, bool) { return v / b, b > 0 })
}

// loopbackCPU returns impl's CPU time per request over loopback (client and
// server) over the bare client's, on the page body.
func (s samples) loopbackCPU(body, impl string) (float64, bool) {
	return s.paired(loopbackName(body, impl), loopbackName(body, "bare"), "cpu-ns/op", func(v, b float64) (float64, bool) { return v / b, b > 0 })
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
	r := report{rows: map[string][][]string{}}
	add := func(what, measured, goal, verdict string) {
		if verdict == notRun {
			measured = "–"
		}
		r.targets = append(r.targets, target{what, measured, goal, verdict})
	}

	units := []struct{ unit, label string }{{"sec/op", "wall time"}, {"cpu-ns/op", "CPU time"}}
	for _, m := range units {
		d, ok := s.overhead(canned, "chain", m.unit)
		d = toNs(m.unit, d)
		add(canned+": chain overhead over bare, in memory ("+m.label+")", "+"+fmtNs(d), "≤ 1 µs", judge(ok, d <= maxOverheadNs))
	}
	for _, body := range targetBodies {
		for _, m := range units {
			c, ok1 := s.overhead(body, "chain", m.unit)
			f, ok2 := s.overhead(body, "failsafe", m.unit)
			c, f = toNs(m.unit, c), toNs(m.unit, f)
			add(body+": chain overhead at most failsafe-go's, in memory ("+m.label+")",
				fmt.Sprintf("chain %s, failsafe-go %s (%s)", signed(fmtNs(c), c), signed(fmtNs(f), f), fmtRatio(c, f)),
				"chain ≤ failsafe-go", judge(ok1 && ok2, c <= f))
		}
		da, ok := s.overhead(body, "chain", "allocs/op")
		add(body+": chain allocations over bare, in memory", fmt.Sprintf("%s allocs/op", signed(fmt.Sprintf("%.0f", math.Abs(da)), da)),
			fmt.Sprintf("≤ %d", maxOverheadAllocs), judge(ok, da <= maxOverheadAllocs))
		tc, ok := s.throughput(body, "chain")
		add(body+": loopback throughput, chain / bare", fmt.Sprintf("%.2f×", tc), fmt.Sprintf("≥ %.2f", minMemoryRatio), judge(ok, tc >= minMemoryRatio))
	}
	tr, ok := s.throughput(canned, "redis")
	add(canned+": loopback throughput, redis / bare", fmt.Sprintf("%.2f×", tr), fmt.Sprintf("≥ %.2f", minRedisRatio), judge(ok, tr >= minRedisRatio))
	ev, ok := s.median("Hosts", "evicted-B/host")
	add("100,000 hosts: retained per idle host, after eviction", fmt.Sprintf("%.1f B/host", ev), "≤ 1 KiB", judge(ok, ev <= maxBytesPerHost))
	lv, ok := s.median("Hosts", "live-B/host")
	add("100,000 hosts: retained per host while tracked", fmt.Sprintf("%.0f B/host", lv), "≤ 1 KiB", judge(ok, lv <= maxBytesPerHost))

	for _, body := range bodies {
		rows := [][]string{{"contender", "in memory: time", "over bare", "CPU over bare", "B/op over bare", "allocs/op over bare", "loopback req/s", "/ bare", "loopback CPU/req / bare"}}
		for _, impl := range impls {
			row := []string{impl}
			t, ok := s.median(overheadName(body, impl), "sec/op")
			row = append(row, orDash(ok, fmtNs(t*1e9)))
			d, ok := s.overhead(body, impl, "sec/op")
			row = append(row, orDash(ok, signed(fmtNs(d*1e9), d)))
			d, ok = s.overhead(body, impl, "cpu-ns/op")
			row = append(row, orDash(ok, signed(fmtNs(d), d)))
			d, ok = s.overhead(body, impl, "B/op")
			row = append(row, orDash(ok, signed(fmt.Sprintf("%.0f", math.Abs(d)), d)))
			d, ok = s.overhead(body, impl, "allocs/op")
			row = append(row, orDash(ok, signed(fmt.Sprintf("%.0f", math.Abs(d)), d)))
			q, ok := s.median(loopbackName(body, impl), "req/s")
			row = append(row, orDash(ok, fmt.Sprintf("%.0f", q)))
			q, ok = s.throughput(body, impl)
			row = append(row, orDash(ok, fmt.Sprintf("%.2f×", q)))
			q, ok = s.loopbackCPU(body, impl)
			row = append(row, orDash(ok, fmt.Sprintf("%.2f×", q)))
			rows = append(rows, row)
		}
		r.rows[body] = rows
	}

	r.closing = closing(s, r)
	return r
}

// closing quotes the key ratios in sentences.
func closing(s samples, r report) []string {
	var out []string
	for _, body := range targetBodies {
		c, ok1 := s.overhead(body, "chain", "sec/op")
		a, ok2 := s.overhead(body, "chain", "allocs/op")
		if !ok1 || !ok2 {
			continue
		}
		line := fmt.Sprintf("On %s in memory the chain costs %s and %s allocations per request over the bare client",
			body, signed(fmtNs(c*1e9), c), signed(fmt.Sprintf("%.0f", math.Abs(a)), a))
		if body == canned {
			line += " (targets: 1 µs, 10)"
		}
		if f, ok := s.overhead(body, "failsafe", "sec/op"); ok {
			fa, _ := s.overhead(body, "failsafe", "allocs/op")
			line += fmt.Sprintf("; failsafe-go's retry, breaker and limiter cost %s and %s", signed(fmtNs(f*1e9), f), signed(fmt.Sprintf("%.0f", math.Abs(fa)), fa))
		}
		if g, ok := s.overhead(body, "retryablehttp", "sec/op"); ok {
			ga, _ := s.overhead(body, "retryablehttp", "allocs/op")
			line += fmt.Sprintf(", go-retryablehttp alone %s and %s", signed(fmtNs(g*1e9), g), signed(fmt.Sprintf("%.0f", math.Abs(ga)), ga))
		}
		out = append(out, line+".")
	}
	for _, body := range targetBodies {
		tc, ok := s.throughput(body, "chain")
		if !ok {
			continue
		}
		line := fmt.Sprintf("Over loopback at 64 concurrent requests on %s the chain keeps %.2f× of the bare client's throughput (target 0.95)", body, tc)
		if body == canned {
			if tr, ok := s.throughput(body, "redis"); ok {
				line += fmt.Sprintf(", and %.2f× with its state in Redis (target 0.5)", tr)
			} else {
				line += "; the Redis contender did not run"
			}
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
	b.WriteString("\n## Every contender against the bare client\n")
	for _, body := range bodies {
		fmt.Fprintf(&b, "\n### body=%s\n\n", body)
		for i, row := range r.rows[body] {
			b.WriteString("| " + strings.Join(row, " | ") + " |\n")
			if i == 0 {
				b.WriteString("|" + strings.Repeat("---|", len(row)) + "\n")
			}
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
