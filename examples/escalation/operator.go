package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/telemetry"
)

// Ticket is an escalation as a person reads it: one JSON file per halted
// host.
type Ticket struct {
	ID      int       `json:"id"`
	Host    string    `json:"host"`
	URL     string    `json:"url"` // redacted by the chain
	Status  int       `json:"status"`
	Markers []string  `json:"markers,omitempty"`
	Reason  string    `json:"reason"`
	Time    time.Time `json:"time"`
	// Evidence is the head of the refusal's body, so that the person can
	// see what the site said without fetching it again.
	Evidence string `json:"evidence"`
}

// errStopped is returned by Clear after Close.
var errStopped = errors.New("escalation: operator stopped")

// operator is the human in the loop, as a goroutine it owns: it files every
// escalation as a JSON ticket, and when a person has settled a ticket it
// resumes the host and records who did. The chain's hook only hands the
// escalation over a buffered channel, so a slow disk or a busy operator
// never holds a crawler goroutine.
type operator struct {
	chain *egresskit.Transport
	audit *telemetry.Audit
	dir   string
	by    string // the identity written on resume lines

	inbox     chan egresskit.Escalation // from the chain's hook
	filed     chan string               // ticket paths, as they are written
	decisions chan decision             // hosts a person has cleared
	stop      chan struct{}             // closed by Close
	wg        sync.WaitGroup            // the goroutine
	dropped   atomic.Int64              // escalations that found the inbox full
	once      sync.Once
}

type decision struct {
	host string
	done chan error
}

// startOperator starts the operator's goroutine; Close stops it.
func startOperator(chain *egresskit.Transport, audit *telemetry.Audit, dir, by string) (*operator, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	o := &operator{
		chain:     chain,
		audit:     audit,
		dir:       dir,
		by:        by,
		inbox:     make(chan egresskit.Escalation, 64),
		filed:     make(chan string, 64),
		decisions: make(chan decision),
		stop:      make(chan struct{}),
	}
	o.wg.Add(1)
	go o.run()
	return o, nil
}

// Escalate is the chain's Config.OnEscalate. It runs on the goroutine of
// the refused request: it records the halt and the escalation in the audit
// log and hands the evidence over without waiting. The host stays halted
// whatever happens here; an escalation that finds the inbox full is counted,
// and the audit log still holds it.
func (o *operator) Escalate(e egresskit.Escalation) {
	// The fields of the chain's own halt and escalation lines (it writes
	// them itself when given the log as Config.Audit).
	fields := []slog.Attr{slog.String("host", e.Host), slog.String("outcome", classify.Refused.String()),
		slog.Int("status", e.Status), slog.Any("markers", e.Markers), slog.String("reason", e.Reason)}
	o.audit.Record("halt", fields...) // write errors surface through audit.Err
	o.audit.Record("escalation", fields...)
	select {
	case o.inbox <- e:
	default:
		o.dropped.Add(1)
	}
}

// Filed returns the channel on which the path of every ticket written is
// sent.
func (o *operator) Filed() <-chan string { return o.filed }

// Clear is a person's decision that host may be crawled again: the
// operator's goroutine resumes it and records the resume. It returns when
// that is done.
func (o *operator) Clear(ctx context.Context, host string) error {
	d := decision{host: host, done: make(chan error, 1)}
	select {
	case o.decisions <- d:
	case <-o.stop:
		return errStopped
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-d.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops the goroutine and waits for it. Escalations still in the
// inbox are filed first.
func (o *operator) Close() {
	o.once.Do(func() { close(o.stop) })
	o.wg.Wait()
}

func (o *operator) run() {
	defer o.wg.Done()
	n := 0
	for {
		select {
		case e := <-o.inbox:
			n++
			o.file(n, e)
		case d := <-o.decisions:
			d.done <- o.resume(d.host)
		case <-o.stop:
			for {
				select {
				case e := <-o.inbox:
					n++
					o.file(n, e)
				default:
					return
				}
			}
		}
	}
}

// file writes the ticket for e and announces its path (dropping the
// announcement when nobody reads them).
func (o *operator) file(id int, e egresskit.Escalation) {
	t := Ticket{ID: id, Host: e.Host, URL: e.URL, Status: e.Status, Markers: e.Markers,
		Reason: e.Reason, Time: e.Time, Evidence: telemetry.Redactor{}.RedactString(string(e.BodyHead))}
	b, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return
	}
	path := filepath.Join(o.dir, fmt.Sprintf("ticket-%04d.json", id))
	if err := os.WriteFile(path, append(b, '\n'), 0o600); err != nil {
		o.audit.Record("ticket_failed", slog.String("host", e.Host))
		return
	}
	select {
	case o.filed <- path:
	default:
	}
}

// resume lifts the halt on host and records who lifted it.
func (o *operator) resume(host string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := o.chain.Resume(ctx, host); err != nil {
		return err
	}
	return o.audit.Record("resume", slog.String("host", host), slog.String("by", o.by))
}
