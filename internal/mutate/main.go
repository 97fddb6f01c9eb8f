// Command mutate measures how many small, plausible bugs the tests of a
// package catch. For each package it lists mutants — a comparison negated
// or moved by one (< to <=), && and || swapped, a ! removed, + and -
// swapped, ++ and -- swapped, a call statement removed, a returned bool
// inverted — samples up to -max of them, and runs the package's tests
// (with -short) against each, through go build's -overlay so that the
// work tree is never touched. A mutant is killed when the tests fail or
// time out; it survives when they pass, and it is not covered when no
// test executes its line (such a mutant survives without a run). A mutant
// that does not compile is not viable and is not scored. Mutants listed in
// equivalent.txt (same file, same source line, same change) cannot be
// told apart from the original by any test, and are not scored either.
//
// The score of a package is killed / (killed + survived + not covered).
// The report goes to -out, as Markdown.
//
//	go run ./internal/mutate -out MUTATION.md
//
// It is run by `make mutation`, not by `make test`.
package main

import (
	"cmp"
	"flag"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

const module = "github.com/egresskit/egresskit"

// defaultPackages are the core packages scored, relative to the root:
// where the classifier, retries, breakers, pacing, the stores, robots.txt,
// egress and the chain keep their logic (the exported retry, breaker,
// ratelimit and robots packages hold configuration and errors only).
const defaultPackages = "classify,internal/retrier,internal/circuits,internal/pacing,hoststate,internal/robotstxt,egress,."

func main() {
	var (
		pkgs    = flag.String("pkgs", defaultPackages, "comma-separated package directories, relative to the module root")
		maxFlag = flag.String("max", "40", "mutants sampled per package: N, or pkg=N,... with a default as *=N")
		seed    = flag.Uint64("seed", 9309, "seed of the sample")
		workers = flag.Int("workers", runtime.GOMAXPROCS(0), "mutants tested at once")
		budget  = flag.Duration("budget", 17*time.Minute, "start no mutant after this long, stop any still running 90s later; those are reported as not run")
		out     = flag.String("out", "MUTATION.md", "report file")
		equiv   = flag.String("equivalent", "internal/mutate/equivalent.txt", "list of equivalent mutants")
		list    = flag.Bool("list", false, "only list each package's mutants, without running anything")
		skip    = flag.String("skip", "", "tests not run against mutants, as pkg=regexp;pkg=regexp (go test -skip); the report lists them")
	)
	flag.Parse()
	root, err := os.Getwd()
	if err != nil {
		fatal(err)
	}
	limits, err := parseMax(*maxFlag)
	if err != nil {
		fatal(err)
	}
	equivalent, err := readEquivalent(filepath.Join(root, *equiv))
	if err != nil {
		fatal(err)
	}
	start := time.Now()
	r := &runner{root: root, tmp: mustTemp(), deadline: start.Add(*budget), hardStop: start.Add(*budget + 90*time.Second),
		skip: map[string]string{}}
	for _, part := range strings.Split(*skip, ";") {
		if k, v, ok := strings.Cut(part, "="); ok {
			r.skip[strings.TrimSpace(k)] = v
		}
	}
	defer os.RemoveAll(r.tmp)

	var reports []*report
	var jobs []job
	current := map[string]bool{} // every mutant's key, for stale equivalent.txt lines
	loaded := map[string]bool{}  // every file of the packages under mutation
	for _, rel := range strings.Split(*pkgs, ",") {
		rel = strings.TrimSpace(rel)
		p, err := loadPackage(root, rel)
		if err != nil {
			fatal(err)
		}
		for _, s := range p.sites {
			current[s.key()] = true
		}
		for name := range p.files {
			loaded[filepath.ToSlash(filepath.Join(rel, name))] = true
		}
		rep := &report{pkg: p, sites: len(p.sites)}
		reports = append(reports, rep)
		if *list {
			for _, s := range p.sites {
				fmt.Println(s, "\t", s.src)
			}
			fmt.Fprintf(os.Stderr, "%s: %d mutants\n", rel, len(p.sites))
			continue
		}
		base, err := r.baseline(p)
		if err != nil {
			rep.err = err
			fmt.Fprintf(os.Stderr, "%s: baseline: %v\n", rel, err)
			continue
		}
		rep.baseline = base.took
		sample := samplePackage(p.sites, limits.of(rel), *seed)
		queued := len(jobs)
		for _, s := range sample {
			switch {
			case equivalent[s.key()] != "":
				rep.add(result{site: s, status: statusEquivalent, note: equivalent[s.key()]})
			case !base.cover[s.file][s.line]:
				rep.add(result{site: s, status: statusNotCovered})
			default:
				jobs = append(jobs, job{rep: rep, site: s, timeout: testTimeout(base.took)})
			}
		}
		fmt.Fprintf(os.Stderr, "%s: %d mutants, %d sampled, %d to run (tests take %v)\n",
			rel, len(p.sites), len(sample), len(jobs)-queued, base.took.Round(time.Millisecond))
	}

	if *list {
		return
	}
	var mu sync.Mutex // guards the reports and done
	done := 0
	queue := make(chan job)
	var wg sync.WaitGroup
	for range max1(*workers) {
		wg.Go(func() {
			for j := range queue {
				res := r.run(j.rep.pkg, j.site, j.timeout)
				mu.Lock()
				j.rep.add(res)
				done++
				fmt.Fprintf(os.Stderr, "[%d/%d %v] %s: %s\n", done, len(jobs), time.Since(start).Round(time.Second), res.status, j.site)
				mu.Unlock()
			}
		})
	}
	for _, j := range jobs {
		if time.Now().After(r.deadline) {
			j.rep.add(result{site: j.site, status: statusNotRun})
			continue
		}
		queue <- j
	}
	close(queue)
	wg.Wait()

	var stale []string
	for k := range equivalent {
		file, _, _ := strings.Cut(k, " | ")
		if loaded[file] && !current[k] {
			stale = append(stale, k)
		}
	}
	slices.Sort(stale)
	md := render(reports, *seed, limits, r.skip, stale, time.Since(start))
	path := *out
	if !filepath.IsAbs(path) {
		path = filepath.Join(root, path)
	}
	if err := os.WriteFile(path, []byte(md), 0o644); err != nil {
		fatal(err)
	}
	fmt.Fprint(os.Stderr, summary(reports, time.Since(start)))
}

type job struct {
	rep     *report
	site    site
	timeout time.Duration
}

// testTimeout bounds one run of a mutant's tests: long enough for the
// tests on a busy machine, short enough that a mutant that hangs them
// (a removed Unlock, a loop that never ends) is cut quickly.
func testTimeout(baseline time.Duration) time.Duration {
	return min(max(5*baseline, 30*time.Second), 3*time.Minute)
}

// samplePackage picks up to n sites: those whose key hashes lowest with
// seed. A mutant's chance of being picked depends on it alone, so an edit
// elsewhere in the package changes the sample by at most a few mutants.
func samplePackage(sites []site, n int, seed uint64) []site {
	s := slices.Clone(sites)
	if n > 0 && n < len(s) {
		rank := func(x site) uint64 {
			h := fnv.New64a()
			fmt.Fprintf(h, "%d|%s|%d", seed, x.key(), x.col)
			return h.Sum64()
		}
		slices.SortStableFunc(s, func(a, b site) int { return cmp.Compare(rank(a), rank(b)) })
		s = s[:n]
	}
	slices.SortStableFunc(s, func(a, b site) int {
		if c := strings.Compare(a.file, b.file); c != 0 {
			return c
		}
		return a.off - b.off
	})
	return s
}

// limits are the sample sizes per package.
type limits struct {
	def int
	per map[string]int
}

func (l limits) of(rel string) int {
	if n, ok := l.per[rel]; ok {
		return n
	}
	return l.def
}

func (l limits) String() string {
	var parts []string
	for k, v := range l.per {
		parts = append(parts, k+"="+strconv.Itoa(v))
	}
	slices.Sort(parts)
	return strings.Join(append([]string{"*=" + strconv.Itoa(l.def)}, parts...), ",")
}

func parseMax(s string) (limits, error) {
	l := limits{def: 40, per: map[string]int{}}
	for _, part := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			k, v = "*", part
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil {
			return l, fmt.Errorf("-max %q: %v", part, err)
		}
		if k == "*" {
			l.def = n
		} else {
			l.per[strings.TrimSpace(k)] = n
		}
	}
	return l, nil
}

// readEquivalent reads lines "file | source line | change | reason".
func readEquivalent(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return map[string]string{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for n, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		parts := strings.Split(line, " | ")
		if len(parts) != 4 {
			return nil, fmt.Errorf("%s:%d: want \"file | source line | change | reason\"", path, n+1)
		}
		out[strings.Join(parts[:3], " | ")] = parts[3]
	}
	return out, nil
}

func mustTemp() string {
	d, err := os.MkdirTemp("", "mutate-")
	if err != nil {
		fatal(err)
	}
	return d
}

func max1(n int) int { return max(n, 1) }

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "mutate:", err)
	os.Exit(1)
}
