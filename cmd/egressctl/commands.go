package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/egresskit/egresskit/console"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/internal/audittrail"
	"github.com/egresskit/egresskit/internal/haltrec"
	"github.com/egresskit/egresskit/telemetry"
)

// haltJSON is a halt as halts -json and show -json print it.
type haltJSON struct {
	Host     string    `json:"host"`
	Time     time.Time `json:"time"`
	Worker   string    `json:"worker,omitempty"`
	Status   int       `json:"status,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	Markers  []string  `json:"markers,omitempty"`
	Evidence string    `json:"evidence,omitempty"`
	URL      string    `json:"url,omitempty"`
	BodyHead string    `json:"body_head,omitempty"`
}

func toJSON(h hoststate.Halt) haltJSON {
	return haltJSON{Host: haltrec.Clip(h.Host, 255), Time: h.Time.UTC(), Worker: haltrec.Clip(h.Worker, haltrec.MaxBy),
		Status: h.Status, Reason: haltrec.Clip(h.Reason, haltrec.MaxText), Markers: haltrec.Markers(h.Markers),
		Evidence: haltrec.Clip(h.Evidence, haltrec.MaxText), URL: haltrec.Clip(h.URL, haltrec.MaxURL),
		BodyHead: haltrec.Clip(h.BodyHead, haltrec.MaxBodyHead)}
}

// noteJSON is an operator's note as show -json prints it.
type noteJSON struct {
	Time    time.Time `json:"time"`
	By      string    `json:"by"`
	Resumed bool      `json:"resumed"`
	Text    string    `json:"text"`
}

// statusJSON is a host's state as show -json prints it.
type statusJSON struct {
	Halted              bool      `json:"halted"`
	HaltedAt            time.Time `json:"halted_at,omitzero"`
	Breaker             string    `json:"breaker"`
	ConsecutiveFailures int       `json:"consecutive_failures"`
	OpenUntil           time.Time `json:"open_until,omitzero"`
	PerMinute           float64   `json:"per_minute"`
	Ceiling             float64   `json:"ceiling,omitempty"`
	PausedUntil         time.Time `json:"paused_until,omitzero"`
}

// source is where an answer comes from, in -json output.
type source struct {
	Redis  string `json:"redis"`
	Prefix string `json:"prefix"`
}

func (e *env) source() source {
	r, p, _ := strings.Cut(strings.TrimPrefix(e.where, "redis "), ", prefix ")
	return source{Redis: r, Prefix: p}
}

func (e *env) halts(ctx context.Context, asJSON bool) error {
	hs, err := e.store.Halts(ctx, 0)
	if err != nil {
		return fmt.Errorf("%w (%s)", err, e.where)
	}
	if asJSON {
		out := struct {
			Source source     `json:"source"`
			Count  int        `json:"count"`
			Halts  []haltJSON `json:"halts"`
		}{Source: e.source(), Count: len(hs), Halts: make([]haltJSON, 0, len(hs))}
		for _, h := range hs {
			out.Halts = append(out.Halts, toJSON(h))
		}
		return writeJSON(e.stdout, out)
	}
	return printHalts(e.stdout, hs, e.where)
}

func (e *env) show(ctx context.Context, host string, asJSON bool) error {
	st, err := e.store.Status(ctx, host)
	if err != nil {
		return fmt.Errorf("%w (%s)", err, e.where)
	}
	halts, notes, err := e.store.History(ctx, host)
	if err != nil {
		return fmt.Errorf("%w (%s)", err, e.where)
	}
	if !st.Halted && len(halts) == 0 && len(notes) == 0 {
		return notFound{fmt.Sprintf("%s: not halted, and no halt on record (%s)", host, e.where)}
	}
	tv := e.trail(host)
	if asJSON {
		type trailJSON struct {
			File     string            `json:"file"`
			Verified bool              `json:"verified"`
			Problem  string            `json:"problem,omitempty"`
			Lines    []audittrail.Line `json:"lines"`
		}
		out := struct {
			Source source     `json:"source"`
			Host   string     `json:"host"`
			Status statusJSON `json:"status"`
			Halts  []haltJSON `json:"halts"`
			Notes  []noteJSON `json:"notes"`
			Trail  *trailJSON `json:"audit_trail,omitempty"`
		}{Source: e.source(), Host: host, Halts: []haltJSON{}, Notes: []noteJSON{},
			Status: statusJSON{Halted: st.Halted, HaltedAt: st.HaltedAt.UTC(), Breaker: st.Breaker.String(),
				ConsecutiveFailures: st.ConsecutiveFailures, OpenUntil: st.OpenUntil.UTC(), PerMinute: st.PerMinute,
				Ceiling: st.Ceiling, PausedUntil: st.PausedUntil.UTC()}}
		for _, h := range halts {
			out.Halts = append(out.Halts, toJSON(h))
		}
		for _, n := range notes {
			out.Notes = append(out.Notes, noteJSON{Time: n.Time.UTC(), By: haltrec.Clip(n.By, haltrec.MaxBy),
				Resumed: n.Resumed, Text: haltrec.Clip(n.Text, haltrec.MaxText)})
		}
		if tv != nil {
			out.Trail = &trailJSON{File: tv.Files, Verified: tv.Verify == nil && tv.Err == nil, Lines: tv.Lines}
			if tv.Lines == nil {
				out.Trail.Lines = []audittrail.Line{}
			}
			if tv.Err != nil {
				out.Trail.Problem = tv.Err.Error()
			} else if tv.Verify != nil {
				out.Trail.Problem = haltrec.Line(tv.Verify.Error(), 300)
			}
		}
		return writeJSON(e.stdout, out)
	}
	err = printShow(e.stdout, host, st, halts, notes, tv, e.where, time.Now())
	if tv != nil && tv.Verify != nil {
		fmt.Fprintf(e.stderr, "egressctl: the audit trail shown does not verify: %s\n", haltrec.Line(tv.Verify.Error(), 300))
	}
	return err
}

// trailLines is how many of a host's audit lines show prints.
const trailLines = 20

// trail reads host's trail from the -audit log and checks the log's
// chain; nil without -audit.
func (e *env) trail(host string) *trailView {
	if e.audit == "" {
		return nil
	}
	tv := &trailView{Files: e.audit}
	files, err := telemetry.AuditFiles(e.audit)
	if err == nil && len(files) == 0 {
		err = errors.New("the audit log does not exist")
	}
	if err != nil {
		tv.Err = err
		tv.Verify = err
		return tv
	}
	tv.Lines, tv.Err = audittrail.Read(files, host, trailLines)
	head, err := telemetry.Verifier{}.VerifyFiles(files...)
	tv.Verify, tv.Head = err, head.Seq
	return tv
}

func (e *env) resume(ctx context.Context, host, by, reason string) error {
	audit, err := e.openAudit()
	if err != nil {
		return err
	}
	if audit != nil {
		defer audit.Close()
	}
	if err := e.store.Resume(ctx, host); err != nil {
		if errors.Is(err, hoststate.ErrNotHalted) {
			return notFound{fmt.Sprintf("%s is not halted: nothing changed (%s)", host, e.where)}
		}
		return fmt.Errorf("%w (%s)", err, e.where)
	}
	note := hoststate.Note{Host: host, Time: time.Now(), By: by, Resumed: true, Text: reason}
	if err := e.store.AddNote(ctx, note); err != nil {
		fmt.Fprintf(e.stderr, "egressctl: %s resumed, but the note was not recorded: %v\n", host, err)
	}
	if audit != nil {
		if err := audit.Record("resume", slog.String("host", host), slog.String("by", by), slog.String("reason", reason)); err != nil {
			return fmt.Errorf("%s resumed, but the audit log did not record it: %w", host, err)
		}
	}
	fmt.Fprintf(e.stdout, "resumed %s (%s)\n", host, e.where)
	return nil
}

// serveConfig is serve's checked flags.
type serveConfig struct {
	addr, token string
	flags       cmdFlags
	names       []string
}

// minTokenBits is the least strength of the console's token.
const minTokenBits = 128

// checkServe checks serve's flags and token: a console is served with a
// token of at least 128 bits, or without one only on a loopback address
// when -no-token says so.
func checkServe(c cmdFlags) (*serveConfig, error) {
	sc := &serveConfig{addr: c.addr, token: os.Getenv(envToken), flags: c}
	for _, n := range strings.Split(c.names, ",") {
		if n = strings.TrimSpace(n); n != "" {
			sc.names = append(sc.names, n)
		}
	}
	if c.sessionTTL < 0 {
		return nil, usagef("-session-ttl must not be negative")
	}
	host, _, err := net.SplitHostPort(c.addr)
	if err != nil {
		return nil, usagef("-addr %s: not host:port", argText(c.addr))
	}
	switch {
	case c.noToken && sc.token != "":
		return nil, usagef("-no-token, but $%s is set: unset one", envToken)
	case c.noToken && !loopback(host):
		return nil, usagef("-no-token serves only on a loopback address (127.0.0.1, [::1], localhost), not %s: anyone who reaches %s could resume hosts", argText(c.addr), argText(host))
	case !c.noToken && sc.token == "":
		return nil, usagef("serve needs $%s, an access token of at least %d bits (openssl rand -hex 16 prints one), or -no-token on a loopback address", envToken, minTokenBits)
	}
	return sc, nil
}

// loopback reports whether host names only loopback addresses.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (e *env) serve(ctx context.Context, sc *serveConfig) error {
	audit, err := e.openAudit()
	if err != nil {
		return err
	}
	cfg := console.Config{Store: e.store, Token: sc.token, ReadOnly: sc.flags.readOnly, HostKey: e.mode,
		Hosts: sc.names, SecureCookies: sc.flags.behindTLS, SessionTTL: sc.flags.sessionTTL}
	if audit != nil {
		defer audit.Close()
		cfg.Audit, cfg.AuditFiles = audit, []string{e.audit}
	}
	h, err := console.New(cfg)
	if errors.Is(err, console.ErrWeakToken) {
		return usagef("$%s is too weak: want at least %d bits (openssl rand -hex 16 prints one)", envToken, minTokenBits)
	}
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", sc.addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	if sc.token == "" {
		fmt.Fprintf(e.stderr, "egressctl: -no-token: the console trusts whoever reaches %s\n", ln.Addr())
	}
	fmt.Fprintf(e.stderr, "egressctl: serving the console on http://%s/ (%s)\n", ln.Addr(), e.where)
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	srv.Shutdown(sctx)
	<-done
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func when(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05")
}

func status(code int) string {
	if code == 0 {
		return "-"
	}
	return fmt.Sprint(code)
}
