// Command escalation shows the human in the loop. A host refuses the
// crawler by name; the chain halts it and hands the evidence to an operator
// goroutine, which files a JSON ticket. While the host is halted, requests
// to it fail fast with egresskit.ErrHalted and are never sent, and other hosts
// are crawled as usual. When a person has settled the ticket, the operator
// resumes the host and traffic flows again. Halts, escalations, resumes and
// every attempt go to a tamper-evident audit log, verified at the end.
// It needs no network: the hosts run on 127.0.0.1.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/ratelimit"
	"github.com/egresskit/egresskit/retry"
	"github.com/egresskit/egresskit/telemetry"
)

const userAgent = "EscalationBot/1.0 (+https://example.org/bot)"

func main() {
	dir := flag.String("dir", "", "directory for tickets and the audit log (default: a new temporary directory)")
	flag.Parse()
	if *dir == "" {
		d, err := os.MkdirTemp("", "escalation-")
		if err != nil {
			fmt.Fprintln(os.Stderr, "escalation:", err)
			os.Exit(1)
		}
		*dir = d
	}
	if err := run(context.Background(), os.Stdout, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "escalation:", err)
		os.Exit(1)
	}
	fmt.Println("tickets and audit log in", *dir)
}

// partner is a host that refuses the crawler by name until its owner puts
// the crawler on an allow list.
type partner struct {
	mu      sync.Mutex // guards allowed and served
	allowed bool
	served  int
}

func (p *partner) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/robots.txt" {
		http.NotFound(w, r)
		return
	}
	p.mu.Lock()
	p.served++
	allowed := p.allowed
	p.mu.Unlock()
	if !allowed {
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, "<html><p>EscalationBot is not allowed on this site. Contact abuse@partner.example.</p></html>")
		return
	}
	fmt.Fprintf(w, "<html>member page %s</html>", r.URL.Path)
}

func (p *partner) allow() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.allowed = true
}

func (p *partner) requests() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.served
}

func run(ctx context.Context, out io.Writer, dir string) error {
	part := &partner{}
	partnerSrv := httptest.NewServer(part)
	defer partnerSrv.Close()
	news := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "<html>news %s</html>", r.URL.Path)
	}))
	defer news.Close()

	auditPath := filepath.Join(dir, "audit.jsonl")
	audit, err := telemetry.NewAudit(telemetry.AuditConfig{Path: auditPath})
	if err != nil {
		return err
	}
	defer audit.Close()

	store, err := hoststate.NewMemory(hoststate.Config{Limit: ratelimit.Config{PerMinute: 6000, Burst: 10}})
	if err != nil {
		return err
	}
	var op *operator
	chain, err := egresskit.New(egresskit.Config{
		UserAgent: userAgent,
		// Deadline bounds each request, pacing waits and retries included.
		// Prefer it to http.Client.Timeout, whose wrapping of the response
		// body also hides the classification that egresskit.Halted reads.
		Retry:     retry.Policy{Deadline: 10 * time.Second},
		Store:     store,
		Observers: []telemetry.Observer{audit},
		// op is set below, before the first request.
		OnEscalate: func(e egresskit.Escalation) { op.Escalate(e) },
	})
	if err != nil {
		return err
	}
	op, err = startOperator(chain, audit, filepath.Join(dir, "tickets"), "operator@example.org")
	if err != nil {
		return err
	}
	defer op.Close()

	client := &http.Client{Transport: chain}
	names := map[string]string{}
	for name, u := range map[string]string{"partner": partnerSrv.URL, "news": news.URL} {
		key, err := chain.HostKey(u)
		if err != nil {
			return err
		}
		names[key] = name
	}
	partnerKey, _ := chain.HostKey(partnerSrv.URL)

	get := func(base, path string) {
		name := names[strings.TrimPrefix(base, "http://")]
		shown := telemetry.Redactor{}.RedactURLString(path)
		resp, err := client.Get(base + path)
		switch {
		case errors.Is(err, egresskit.ErrHalted):
			fmt.Fprintf(out, "%-8s %-26s not sent: host halted\n", name, shown)
		case err != nil:
			fmt.Fprintf(out, "%-8s %-26s failed: %s\n", name, shown, telemetry.Redactor{}.RedactError(err))
		default:
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			fmt.Fprintf(out, "%-8s %-26s %d halted=%v\n", name, shown, resp.StatusCode, egresskit.Halted(resp))
		}
	}

	// 1. The partner refuses us by name: the chain returns the real 403,
	// halts the host and escalates.
	get(news.URL, "/today")
	get(partnerSrv.URL, "/members?session=s3cr3t-42")
	var ticket Ticket
	select {
	case path := <-op.Filed():
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, &ticket); err != nil {
			return err
		}
		u, err := url.Parse(ticket.URL)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "ticket %d filed as %s: %s refused %s (status %d, %s)\n",
			ticket.ID, filepath.Base(path), names[ticket.Host], u.RequestURI(), ticket.Status, ticket.Reason)
	case <-ctx.Done():
		return ctx.Err()
	}

	// 2. While the ticket is open the partner gets nothing, and the crawl
	// of other hosts goes on.
	before := part.requests()
	get(partnerSrv.URL, "/members/1")
	get(news.URL, "/sport")
	get(partnerSrv.URL, "/members/2")
	get(news.URL, "/weather")
	st, err := chain.Status(ctx, partnerKey)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "while halted: partner received %d more requests; halted=%v\n", part.requests()-before, st.Halted)

	// 3. A person settles the ticket with the site's owner, who puts the
	// crawler on the allow list; the operator resumes the host.
	part.allow()
	if err := op.Clear(ctx, ticket.Host); err != nil {
		return err
	}
	fmt.Fprintf(out, "ticket %d settled: %s resumed by the operator\n", ticket.ID, names[ticket.Host])
	get(partnerSrv.URL, "/members/3")

	// 4. Close the log and verify its hash chain.
	op.Close()
	if err := audit.Close(); err != nil {
		return err
	}
	files, err := telemetry.AuditFiles(auditPath)
	if err != nil {
		return err
	}
	if _, err := (telemetry.Verifier{}).VerifyFiles(files...); err != nil {
		return fmt.Errorf("audit log does not verify: %w", err)
	}
	kinds, err := countKinds(auditPath)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "audit log verified: %s\n", kinds)
	if n := op.dropped.Load(); n > 0 {
		fmt.Fprintf(out, "escalations dropped (inbox full): %d\n", n)
	}
	return nil
}

// countKinds returns the number of audit lines of each kind, as text.
func countKinds(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	counts := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		var line struct {
			Kind string `json:"kind"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			return "", err
		}
		counts[line.Kind]++
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	kinds := make([]string, 0, len(counts))
	for k := range counts {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	parts := make([]string, len(kinds))
	for i, k := range kinds {
		parts[i] = fmt.Sprintf("%s %d", k, counts[k])
	}
	return strings.Join(parts, ", "), nil
}
