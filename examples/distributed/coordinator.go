package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/egresskit/egresskit/hostkey"
)

// workers is the number of worker processes.
const workers = 2

// config configures the coordinator.
type config struct {
	redis string // the Redis address
	exe   string // the binary the workers run (this one)
	pages int    // pages each worker requests from each host
}

// host is one local target. It counts the requests it receives.
type host struct {
	name, answers string
	srv           *httptest.Server

	mu       sync.Mutex // guards received
	received int        // requests other than robots.txt
}

func (h *host) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.received++
	return h.received
}

// Received returns the number of requests h received, robots.txt aside.
func (h *host) Received() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.received
}

// startHosts starts the four targets on 127.0.0.1.
func startHosts() []*host {
	hosts := []*host{
		{name: "failing", answers: "502"},
		{name: "throttling", answers: "429 once, then 200"},
		{name: "healthy", answers: "200"},
		{name: "refusing", answers: "403 naming the bot"},
	}
	serve := map[string]func(w http.ResponseWriter, n int){
		"failing": func(w http.ResponseWriter, _ int) {
			http.Error(w, "bad gateway", http.StatusBadGateway)
		},
		"throttling": func(w http.ResponseWriter, n int) {
			if n == 1 {
				w.Header().Set("Retry-After", "1")
				http.Error(w, "slow down", http.StatusTooManyRequests)
				return
			}
			fmt.Fprint(w, "<html>a page</html>")
		},
		"healthy": func(w http.ResponseWriter, _ int) {
			fmt.Fprint(w, "<html>a page</html>")
		},
		"refusing": func(w http.ResponseWriter, _ int) {
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprint(w, "<html>DistributedBot is not allowed on this site.</html>")
		},
	}
	for _, h := range hosts {
		answer := serve[h.name]
		h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/robots.txt" {
				http.NotFound(w, r) // everything allowed
				return
			}
			answer(w, h.count())
		}))
	}
	return hosts
}

// summary is what a run found, target by target.
type summary struct {
	Prefix  string          // the Redis key prefix of the run
	Targets []targetSummary // in the order of startHosts
}

// targetSummary is one target: what the workers say, and what the host
// itself counted.
type targetSummary struct {
	Name, Answers string
	Requests      [workers]int   // requests made, per worker
	Sent          [workers]int   // attempts that reached the host, per worker
	Statuses      map[int]int    // statuses of the attempts sent
	Results       map[string]int // final results of the requests
	Received      int            // by the host's own count
	Views         [workers]line  // each worker's view of the shared state at its end
	EscalatedBy   int            // the worker whose request halted the host, 0 if none
}

// SentTotal is the number of attempts the workers say reached the host.
func (t targetSummary) SentTotal() int { return t.Sent[0] + t.Sent[1] }

// run starts the hosts and the workers, waits for the workers, and prints
// and returns what happened. It deletes its Redis keys before it returns.
func run(ctx context.Context, out io.Writer, cfg config) (*summary, error) {
	client, err := dialRedis(ctx, cfg.redis)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	var b [8]byte
	rand.Read(b[:])
	prefix := "egresskit-example-" + hex.EncodeToString(b[:])
	defer deleteKeys(client, prefix)

	hosts := startHosts()
	defer func() {
		for _, h := range hosts {
			h.srv.Close()
		}
	}()
	urls := make([]string, len(hosts))
	byKey := map[string]int{}
	for i, h := range hosts {
		urls[i] = h.srv.URL
		u, _ := url.Parse(h.srv.URL)
		key, err := hostkey.Of(u, hostkey.ByHost)
		if err != nil {
			return nil, err
		}
		byKey[key] = i
	}

	outputs, err := runWorkers(ctx, cfg, prefix, urls)
	if err != nil {
		return nil, err
	}
	sum := &summary{Prefix: prefix, Targets: make([]targetSummary, len(hosts))}
	for i, h := range hosts {
		sum.Targets[i] = targetSummary{Name: h.name, Answers: h.answers, Statuses: map[int]int{}, Results: map[string]int{}, Received: h.Received()}
	}
	for w, o := range outputs {
		if err := sum.add(w+1, o, byKey); err != nil {
			return nil, err
		}
	}
	return sum, sum.print(out)
}

// runWorkers starts the worker processes, waits for them and returns what
// each printed. It cancels the others when one cannot start or fails.
func runWorkers(ctx context.Context, cfg config, prefix string, urls []string) ([workers][]byte, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		cmds   [workers]*exec.Cmd
		stdout [workers]bytes.Buffer
		stderr [workers]bytes.Buffer
		errs   [workers]error
	)
	for i := range workers {
		cmd := exec.CommandContext(ctx, cfg.exe, "-worker", strconv.Itoa(i+1), "-redis", cfg.redis,
			"-prefix", prefix, "-pages", strconv.Itoa(cfg.pages), "-targets", strings.Join(urls, ","))
		cmd.Stdout, cmd.Stderr = &stdout[i], &stderr[i]
		cmd.WaitDelay = 2 * time.Second
		// The worker's stdin stays open while we run: it exits at EOF,
		// also when we die without waiting for it. Wait closes it.
		if _, err := cmd.StdinPipe(); err != nil {
			errs[i] = err
			break
		}
		if err := cmd.Start(); err != nil {
			errs[i] = err
			break
		}
		cmds[i] = cmd
	}
	for _, err := range errs {
		if err != nil {
			cancel() // one did not start: stop the other
		}
	}
	for i, cmd := range cmds {
		if cmd == nil {
			continue
		}
		if err := cmd.Wait(); err != nil {
			errs[i] = fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr[i].String()))
		}
		if errs[i] != nil {
			cancel()
		}
	}
	var outputs [workers][]byte
	for i := range workers {
		if errs[i] != nil {
			return outputs, fmt.Errorf("worker %d: %w", i+1, errs[i])
		}
		outputs[i] = stdout[i].Bytes()
	}
	return outputs, nil
}

// add folds worker w's lines into s.
func (s *summary) add(w int, output []byte, byKey map[string]int) error {
	sc := bufio.NewScanner(bytes.NewReader(output))
	for sc.Scan() {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return fmt.Errorf("worker %d printed %q: %w", w, sc.Text(), err)
		}
		i, ok := byKey[l.Host]
		if !ok || l.Worker != w {
			return fmt.Errorf("worker %d printed a line about host %q of worker %d", w, l.Host, l.Worker)
		}
		t := &s.Targets[i]
		switch l.Kind {
		case "request":
			t.Requests[w-1]++
			t.Sent[w-1] += len(l.Sent)
			for _, st := range l.Sent {
				t.Statuses[st]++
			}
			t.Results[l.Result]++
		case "escalation":
			t.EscalatedBy = w
		case "state":
			t.Views[w-1] = l
		default:
			return fmt.Errorf("worker %d printed a line of kind %q", w, l.Kind)
		}
	}
	return sc.Err()
}

// print writes the table and what it shows.
func (s *summary) print(out io.Writer) error {
	fmt.Fprintf(out, "%d workers, one state in Redis: %d/min per host, breaker opens after %d consecutive failures\n",
		workers, perMinute, failures)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "target\tanswers\trequests\tsent w1+w2\treceived\tresults\tworker 1 sees\tworker 2 sees")
	for _, t := range s.Targets {
		fmt.Fprintf(tw, "%s\t%s\t%d+%d\t%d+%d = %d\t%d\t%s\t%s\t%s\n", t.Name, t.Answers,
			t.Requests[0], t.Requests[1], t.Sent[0], t.Sent[1], t.SentTotal(), t.Received,
			counts(t.Results), view(t.Views[0]), view(t.Views[1]))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, t := range s.Targets {
		switch t.Name {
		case "failing":
			fmt.Fprintf(out, "failing: %d attempts reached the host, then the shared breaker turned both workers away (worker 1 sees %s, worker 2 sees %s)\n",
				t.Received, view(t.Views[0]), view(t.Views[1]))
		case "throttling":
			fmt.Fprintf(out, "throttling: %d× 429 halved the shared rate to %d/min; it recovers for both: worker 1 sees %g/min, worker 2 sees %g/min\n",
				t.Statuses[http.StatusTooManyRequests], perMinute/2, t.Views[0].PerMinute, t.Views[1].PerMinute)
		case "refusing":
			fmt.Fprintf(out, "refusing: %d request reached the host; its refusal (to worker %d) halted the host for both (%d requests not sent)\n",
				t.Received, t.EscalatedBy, t.Results["host halted"])
		}
	}
	return nil
}

// view shows a worker's view of a host's state.
func view(l line) string {
	switch {
	case l.Kind == "":
		return "?"
	case l.Halted:
		return "halted"
	case l.Breaker == "open":
		return "breaker open"
	}
	return fmt.Sprintf("%s, %g/min", l.Breaker, l.PerMinute)
}

// counts formats a tally as "a ×2, b ×1", sorted.
func counts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s ×%d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// deleteKeys deletes the run's keys. A halt has no expiry, so a run must
// not leave its keys behind.
func deleteKeys(c *redis.Client, prefix string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var keys []string
	iter := c.Scan(ctx, 0, prefix+":*", 100).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return err
	}
	if len(keys) == 0 {
		return nil
	}
	return c.Unlink(ctx, keys...).Err()
}
