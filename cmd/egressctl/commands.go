package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/egresskit/egresskit/console"
	"github.com/egresskit/egresskit/hoststate"
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
	return haltJSON{Host: h.Host, Time: h.Time.UTC(), Worker: h.Worker, Status: h.Status, Reason: h.Reason,
		Markers: h.Markers, Evidence: h.Evidence, URL: h.URL, BodyHead: h.BodyHead}
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

func (e *env) halts(ctx context.Context, asJSON bool) error {
	hs, err := e.store.Halts(ctx, 0)
	if err != nil {
		return err
	}
	if asJSON {
		out := struct {
			Count int        `json:"count"`
			Halts []haltJSON `json:"halts"`
		}{Count: len(hs), Halts: make([]haltJSON, 0, len(hs))}
		for _, h := range hs {
			out.Halts = append(out.Halts, toJSON(h))
		}
		return writeJSON(e.stdout, out)
	}
	if len(hs) == 0 {
		fmt.Fprintln(e.stdout, "no host is halted")
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tHALTED (UTC)\tSTATUS\tREASON\tWORKER\tURL")
	for _, h := range hs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", h.Host, when(h.Time), status(h.Status),
			oneLine(h.Reason, 40), oneLine(h.Worker, 30), oneLine(h.URL, 80))
	}
	return tw.Flush()
}

func (e *env) show(ctx context.Context, host string, asJSON bool) error {
	st, err := e.store.Status(ctx, host)
	if err != nil {
		return err
	}
	halts, notes, err := e.store.History(ctx, host)
	if err != nil {
		return err
	}
	if !st.Halted && len(halts) == 0 && len(notes) == 0 {
		return notFound{fmt.Sprintf("%s: not halted, and no halt on record", host)}
	}
	if asJSON {
		out := struct {
			Host   string     `json:"host"`
			Status statusJSON `json:"status"`
			Halts  []haltJSON `json:"halts"`
			Notes  []noteJSON `json:"notes"`
		}{Host: host, Halts: []haltJSON{}, Notes: []noteJSON{},
			Status: statusJSON{Halted: st.Halted, HaltedAt: st.HaltedAt.UTC(), Breaker: st.Breaker.String(),
				ConsecutiveFailures: st.ConsecutiveFailures, OpenUntil: st.OpenUntil.UTC(), PerMinute: st.PerMinute,
				Ceiling: st.Ceiling, PausedUntil: st.PausedUntil.UTC()}}
		for _, h := range halts {
			out.Halts = append(out.Halts, toJSON(h))
		}
		for _, n := range notes {
			out.Notes = append(out.Notes, noteJSON{Time: n.Time.UTC(), By: n.By, Resumed: n.Resumed, Text: n.Text})
		}
		return writeJSON(e.stdout, out)
	}
	w := e.stdout
	state := "sending"
	if st.Halted {
		state = "HALTED since " + when(st.HaltedAt)
	}
	fmt.Fprintf(w, "%s: %s\n", host, state)
	fmt.Fprintf(w, "breaker: %s (%d failures)", st.Breaker, st.ConsecutiveFailures)
	if st.OpenUntil.After(time.Now()) {
		fmt.Fprintf(w, ", open until %s", when(st.OpenUntil))
	}
	fmt.Fprintf(w, "\npacing: %.2f/min", st.PerMinute)
	if st.PausedUntil.After(time.Now()) {
		fmt.Fprintf(w, ", paused until %s", when(st.PausedUntil))
	}
	fmt.Fprintln(w)
	for _, h := range halts {
		fmt.Fprintf(w, "\nhalt %s by %s: %s %s\n", when(h.Time), h.Worker, status(h.Status), h.Reason)
		if len(h.Markers) > 0 {
			fmt.Fprintf(w, "  markers: %s\n", strings.Join(h.Markers, ", "))
		}
		if h.Evidence != "" {
			fmt.Fprintf(w, "  detector: %s\n", h.Evidence)
		}
		if h.URL != "" {
			fmt.Fprintf(w, "  url: %s\n", h.URL)
		}
		if h.BodyHead != "" {
			fmt.Fprintf(w, "  body: %s\n", oneLine(h.BodyHead, 300))
		}
	}
	for _, n := range notes {
		what := "kept halted"
		if n.Resumed {
			what = "resumed"
		}
		fmt.Fprintf(w, "\n%s %s by %s: %s\n", what, when(n.Time), n.By, n.Text)
	}
	return nil
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
			return notFound{fmt.Sprintf("%s is not halted: nothing changed", host)}
		}
		return err
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
	fmt.Fprintf(e.stdout, "resumed %s\n", host)
	return nil
}

func (e *env) serve(ctx context.Context, addr, token string, readOnly bool) error {
	audit, err := e.openAudit()
	if err != nil {
		return err
	}
	cfg := console.Config{Store: e.store, Token: token, ReadOnly: readOnly, HostKey: e.mode}
	if audit != nil {
		defer audit.Close()
		cfg.Audit, cfg.AuditFiles = audit, []string{e.audit}
	}
	h, err := console.New(cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	if token == "" {
		fmt.Fprintf(e.stderr, "egressctl: no %s: the console trusts whoever reaches it\n", envToken)
	}
	fmt.Fprintf(e.stderr, "egressctl: serving the console on http://%s/\n", ln.Addr())
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

func writeJSON(w interface{ Write([]byte) (int, error) }, v any) error {
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

// oneLine returns s on one line, cut to n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	if s == "" {
		return "-"
	}
	return s
}
