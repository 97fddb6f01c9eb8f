package main

import (
	"fmt"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"
)

// report collects the results of one package.
type report struct {
	pkg      *pkg
	sites    int
	baseline time.Duration
	err      error
	results  []result
}

func (r *report) add(res result) { r.results = append(r.results, res) }

func (r *report) count(ss ...status) int {
	n := 0
	for _, res := range r.results {
		if slices.Contains(ss, res.status) {
			n++
		}
	}
	return n
}

// score is killed / (killed + survived + not covered), and whether any
// mutant was scored.
func (r *report) score() (float64, bool) {
	killed := r.count(statusKilled, statusTimedOut)
	scored := killed + r.count(statusSurvived, statusNotCovered)
	if scored == 0 {
		return 0, false
	}
	return float64(killed) / float64(scored), true
}

func (r *report) name() string {
	if r.pkg.rel == "." {
		return "egresskit (root)"
	}
	return r.pkg.rel
}

func (r *report) sorted() []result {
	rs := slices.Clone(r.results)
	slices.SortStableFunc(rs, func(a, b result) int {
		if c := strings.Compare(a.site.file, b.site.file); c != 0 {
			return c
		}
		return a.site.off - b.site.off
	})
	return rs
}

// render writes the Markdown report.
func render(reports []*report, seed uint64, l limits, skip map[string]string, stale []string, took time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Mutation score\n\n")
	fmt.Fprintf(&b, "Written by `make mutation` (`go run ./internal/mutate`); see the command's doc for the\n"+
		"mutations and how they are scored. Not run by `make test`.\n\n")
	commit := "unknown commit"
	if out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output(); err == nil {
		commit = "commit " + strings.TrimSpace(string(out))
	}
	fmt.Fprintf(&b, "Run of %s at %s on %s/%s, %d CPUs, %s: %s in all. Sample per package: %s (seed %d).\n\n",
		commit, time.Now().UTC().Format("2006-01-02 15:04 MST"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(),
		runtime.Version(), took.Round(time.Second), l, seed)
	fmt.Fprintf(&b, "Score = killed / (killed + survived + not covered). Not viable (does not compile), equivalent\n"+
		"(listed in internal/mutate/equivalent.txt, with the reason) and not run (budget spent) are not scored.\n\n")
	if len(skip) > 0 {
		var parts []string
		for p, re := range skip {
			parts = append(parts, fmt.Sprintf("`%s`: `%s`", p, re))
		}
		slices.Sort(parts)
		fmt.Fprintf(&b, "Tests not run against mutants (they run in real time for seconds each; `make test` runs them): %s.\n\n",
			strings.Join(parts, "; "))
	}
	fmt.Fprintf(&b, "| package | mutants | sampled | killed | timed out | survived | not covered | not viable | equivalent | not run | score |\n")
	fmt.Fprintf(&b, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range reports {
		score := "—"
		if s, ok := r.score(); ok {
			score = fmt.Sprintf("**%.1f %%**", 100*s)
		}
		if r.err != nil {
			score = "baseline failed"
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d | %d | %d | %d | %s |\n", r.name(), r.sites, len(r.results),
			r.count(statusKilled), r.count(statusTimedOut), r.count(statusSurvived), r.count(statusNotCovered),
			r.count(statusNotViable), r.count(statusEquivalent), r.count(statusNotRun), score)
	}
	fmt.Fprintf(&b, "\n## Surviving mutants\n\n")
	fmt.Fprintf(&b, "Each is a change no test noticed: a missing test, or an equivalent mutant not yet listed.\n")
	for _, r := range reports {
		var lines []string
		for _, res := range r.sorted() {
			if res.status == statusSurvived || res.status == statusNotCovered {
				lines = append(lines, fmt.Sprintf("- `%s:%d` %s `%s` — %s: `%s`", res.site.file, res.site.line,
					res.site.kind, res.site.desc, res.status, res.site.src))
			}
		}
		if r.err != nil {
			lines = append(lines, "- baseline failed: "+strings.SplitN(r.err.Error(), "\n", 2)[0])
		}
		if len(lines) > 0 {
			fmt.Fprintf(&b, "\n### %s\n\n%s\n", r.name(), strings.Join(lines, "\n"))
		}
	}
	var eq []string
	for _, r := range reports {
		for _, res := range r.sorted() {
			if res.status == statusEquivalent {
				eq = append(eq, fmt.Sprintf("- `%s:%d` `%s` `%s` — %s", res.site.file, res.site.line, res.site.desc, res.site.src, res.note))
			}
		}
	}
	if len(eq) > 0 {
		fmt.Fprintf(&b, "\n## Equivalent mutants in the sample\n\n%s\n", strings.Join(eq, "\n"))
	}
	if len(stale) > 0 {
		fmt.Fprintf(&b, "\n## Stale lines of equivalent.txt\n\nThey name no mutant of the code as it is: the line changed; check it and remove or update it.\n\n")
		for _, k := range stale {
			fmt.Fprintf(&b, "- `%s`\n", k)
		}
	}
	return b.String()
}

// summary is the table in plain text, for the terminal.
func summary(reports []*report, took time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nmutation score (%s):\n", took.Round(time.Second))
	for _, r := range reports {
		s, ok := r.score()
		switch {
		case r.err != nil:
			fmt.Fprintf(&b, "  %-18s baseline failed\n", r.name())
		case !ok:
			fmt.Fprintf(&b, "  %-18s no mutant scored\n", r.name())
		default:
			fmt.Fprintf(&b, "  %-18s %5.1f %%  (%d killed of %d scored)\n", r.name(), 100*s,
				r.count(statusKilled, statusTimedOut), r.count(statusKilled, statusTimedOut, statusSurvived, statusNotCovered))
		}
	}
	return b.String()
}
