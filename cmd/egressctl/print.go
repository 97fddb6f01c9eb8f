package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/internal/audittrail"
	"github.com/egresskit/egresskit/internal/haltrec"
)

// What egressctl prints comes from Redis, where any fleet worker (or
// anyone who reaches the server) may have written it: every field goes
// through line, which makes it one line of printable text of bounded
// size, so that a record is data on the operator's terminal, never a
// control sequence, never a fake line.

// line is s as one line of at most n bytes, "-" when empty.
func line(s string, n int) string {
	if s = haltrec.Line(s, n); s == "" {
		return "-"
	}
	return s
}

// printHalts writes the queue as a table, with where the answer comes
// from.
func printHalts(w io.Writer, hs []hoststate.Halt, where string) error {
	if len(hs) == 0 {
		_, err := fmt.Fprintf(w, "no host is halted (%s)\n", line(where, 400))
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HOST\tHALTED (UTC)\tSTATUS\tREASON\tWORKER\tURL")
	for _, h := range hs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", line(h.Host, 255), when(h.Time), status(h.Status),
			line(h.Reason, 60), line(h.Worker, 40), line(h.URL, 120))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	noun := "hosts are"
	if len(hs) == 1 {
		noun = "host is"
	}
	_, err := fmt.Fprintf(w, "%d %s halted (%s)\n", len(hs), noun, line(where, 400))
	return err
}

// trailView is what show prints of a host's audit trail.
type trailView struct {
	Files  string // the log's path
	Lines  []audittrail.Line
	Err    error // reading it
	Verify error // checking its chain; nil when it verifies
	Head   uint64
}

// printShow writes a host's state, halts, notes and audit trail, one
// field a line.
func printShow(w io.Writer, host string, st hoststate.Status, halts []hoststate.Halt, notes []hoststate.Note, tv *trailView, where string, now time.Time) error {
	state := "sending"
	if st.Halted {
		state = "HALTED since " + when(st.HaltedAt)
	}
	fmt.Fprintf(w, "%s: %s (%s)\n", line(host, 255), state, line(where, 400))
	fmt.Fprintf(w, "breaker: %s (%d failures)", line(st.Breaker.String(), 20), st.ConsecutiveFailures)
	if st.OpenUntil.After(now) {
		fmt.Fprintf(w, ", open until %s", when(st.OpenUntil))
	}
	fmt.Fprintf(w, "\npacing: %.2f/min", st.PerMinute)
	if st.PausedUntil.After(now) {
		fmt.Fprintf(w, ", paused until %s", when(st.PausedUntil))
	}
	fmt.Fprintln(w)
	for _, h := range halts {
		fmt.Fprintf(w, "\nhalt %s\n", when(h.Time))
		field(w, "worker", h.Worker, haltrec.MaxBy)
		if h.Status != 0 {
			fmt.Fprintf(w, "  status: %d\n", h.Status)
		}
		field(w, "reason", h.Reason, haltrec.MaxText)
		if len(h.Markers) > 0 {
			ms := make([]string, min(len(h.Markers), haltrec.MaxMarkers))
			for i := range ms {
				ms[i] = haltrec.Line(h.Markers[i], haltrec.MaxMarker)
			}
			field(w, "markers", strings.Join(ms, ", "), haltrec.MaxMarkers*(haltrec.MaxMarker+2))
		}
		field(w, "detector", h.Evidence, haltrec.MaxText)
		field(w, "url", h.URL, haltrec.MaxURL)
		field(w, "body", h.BodyHead, haltrec.MaxBodyHead)
	}
	for _, n := range notes[:min(len(notes), haltrec.MaxHistory)] {
		what := "kept halted"
		if n.Resumed {
			what = "resumed"
		}
		fmt.Fprintf(w, "\n%s %s\n", what, when(n.Time))
		field(w, "by", n.By, haltrec.MaxBy)
		field(w, "reason", n.Text, haltrec.MaxText)
	}
	if tv == nil {
		return nil
	}
	fmt.Fprintf(w, "\naudit trail (%s, newest first)\n", line(tv.Files, 300))
	if tv.Err != nil {
		fmt.Fprintf(w, "  %s\n", line(tv.Err.Error(), 300))
	}
	if len(tv.Lines) == 0 && tv.Err == nil {
		fmt.Fprintln(w, "  no line for this host")
	}
	for _, l := range tv.Lines {
		fmt.Fprintf(w, "  %s  #%d  %s  %s\n", line(l.Time, 40), l.Seq, line(l.Kind, 40), line(l.Fields, 600))
	}
	if tv.Verify != nil {
		_, err := fmt.Fprintf(w, "audit trail: DOES NOT VERIFY: %s\n", line(tv.Verify.Error(), 300))
		return err
	}
	_, err := fmt.Fprintf(w, "audit trail: verified, %d lines\n", tv.Head)
	return err
}

// field writes "  name: value" when value is not empty.
func field(w io.Writer, name, value string, n int) {
	if v := haltrec.Line(value, n); v != "" {
		fmt.Fprintf(w, "  %s: %s\n", name, v)
	}
}
