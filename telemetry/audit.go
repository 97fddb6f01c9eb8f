package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// AuditConfig configures NewAudit. Path is required; every other field's
// zero value works.
type AuditConfig struct {
	// Path is the file the log is appended to. It is created if missing.
	// Rotated files are kept beside it as Path.NNNNNNNNNNNNNNNNNNNN, where
	// the number is the seq of the file's last line (see AuditFiles).
	Path string
	// SyncEvery says how often the log is flushed to stable storage
	// (fsync): on a write when the last sync is at least SyncEvery old,
	// and on Close. Zero means one second; a negative value syncs only on
	// Close, leaving the rest to the operating system. Every line is
	// written to the file with one write call as soon as it is recorded,
	// so a crash of the process loses nothing; syncing only matters when
	// the machine itself fails.
	SyncEvery time.Duration
	// SyncEachLine syncs after every line, before the call that recorded
	// it returns; SyncEvery is then unused. It is the safest setting and
	// the slowest.
	SyncEachLine bool
	// MaxBytes rotates the file before a line would make it larger than
	// MaxBytes; the new file's first line chains from the old file's last.
	// Zero (the default) never rotates.
	MaxBytes int64
	// Perm is the permission of new files; zero means 0o600.
	Perm os.FileMode
	// Now returns the time written on each line; nil means time.Now.
	Now func() time.Time
}

// Head identifies the last line of an audit log: its seq and its hash (64
// lower-case hex digits). An operator keeps a recent Head outside the log
// (Audit.Head, or what a Verifier returns) and passes it as
// Verifier.Anchor to detect lines removed from the end of the log, which a
// hash chain alone cannot; cmd/egressaudit prints it as SEQ:HASH.
type Head struct {
	Seq  uint64
	Hash string
}

// Errors returned by Audit.
var (
	// errAuditClosed is returned by writes after Close.
	errAuditClosed = errors.New("telemetry: audit log closed")
	// errAuditLocked is returned when another writer holds the file's
	// lock for longer than lockWait.
	errAuditLocked = errors.New("telemetry: audit log locked by another writer")
	// errReservedKey is returned by Record for a field named seq, time,
	// kind, prev or hash, or an empty name.
	errReservedKey = errors.New("telemetry: reserved audit field name")
)

// Audit is a tamper-evident, append-only log of JSON Lines, which a
// crawler author opens and gives to the chain (egresskit.Config.Audit) and
// an operator checks with cmd/egressaudit. Each line carries a sequence
// number, the time, a kind, its fields, the SHA-256 of the previous line
// ("prev") and its own ("hash"), so that deleting, inserting, reordering
// or editing a line breaks the chain at that line (see Verifier). It
// records what compliance needs and nothing more: hosts, outcomes, egress
// endpoints and reasons, halts, escalations, resumes, forced egress and
// robots.txt decisions; never a URL query, a body or a credential (every
// string field is redacted).
//
// Given to the chain, the log receives, besides an "attempt" line per
// event (see Observe), these kinds, with these fields in this order:
//
//	"halt"           host, outcome, status, markers, reason: the host was halted
//	"escalation"     the same fields: the evidence went to Config.OnEscalate
//	"resume"         host, by: the halt on host was lifted (Transport.Resume)
//	"forced_egress"  host, egress, reason: the host's requests were forced
//	                 through the egress endpoint
//	"robots"         host, path, allowed: a robots.txt decision
//
// Other writers (the review console, a crawler's own records) add lines of
// their kinds with Record, and provenance records with Consent,
// Minimisation and Deletion.
//
// Opening an existing log continues its chain. A last line cut short by a
// crash is removed and a "recovered" line records how many bytes were
// discarded; every open writes an "open" line and Close a "close" line.
//
// Several writers may append to one file, in one process or many (the
// chain, egressctl, the review console): each line is written under an
// exclusive lock on the file (flock on Unix, LockFileEx on Windows) and
// chains from the file's actual last line, so their lines interleave in
// one chain that verifies. A writer that cannot take the lock within ten
// seconds, or on a file system that cannot lock, fails with an error that
// says so rather than fork the chain.
//
// Audit is an Observer and safe for concurrent use. Its mutex is held
// while a line is written (and synced, by AuditConfig), because the
// chain's order must be the file's order; a slow disk therefore slows
// callers.
type Audit struct {
	cfg AuditConfig

	mu       sync.Mutex // guards all fields below, and writes to f
	f        *os.File
	size     int64 // f's size after this writer's last write; -1: unknown
	seq      uint64
	prev     [hashLen]byte
	lastSync time.Time
	line     lineBuilder
	err      error // first write error; sticky
	closed   bool
}

var _ Observer = (*Audit)(nil)

// NewAudit opens (or creates) the log at cfg.Path for appending, continues
// its chain and writes an "open" line. It fails when the path is empty, the
// file cannot be opened for reading and appending, locked or written, or
// the existing log ends with a damaged line (a *VerifyError inside the
// returned error): an audit log that cannot be kept fails at start, not
// later.
func NewAudit(cfg AuditConfig) (*Audit, error) {
	if cfg.Path == "" {
		return nil, errors.New("telemetry: audit path is empty")
	}
	if cfg.SyncEvery == 0 {
		cfg.SyncEvery = time.Second
	}
	if cfg.Perm == 0 {
		cfg.Perm = 0o600
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	a := &Audit{cfg: cfg, size: -1}
	copy(a.prev[:], genesis)
	f, err := a.open(false)
	if err != nil {
		return nil, err
	}
	a.f = f
	a.mu.Lock()
	defer a.mu.Unlock()
	a.line.start(a.cfg.Now(), "open")
	a.line.str("format", "egresskit-audit/1")
	if err := a.writeLocked(); err != nil {
		a.f.Close()
		return nil, err
	}
	return a, nil
}

// Observe records an "attempt" line: host, method, attempt, final, status,
// outcome, markers, egress, egress_reason, egress_rule (when a rule
// governs the host), breaker, and unsent (when the chain did not send the
// attempt: Event.Unsent). The URL and the error text are not recorded. A write error is kept and reported by Err.
func (a *Audit) Observe(_ context.Context, e *Event) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed || a.err != nil {
		return
	}
	a.line.start(a.cfg.Now(), "attempt")
	a.line.str("host", e.Host)
	a.line.str("method", e.Method)
	a.line.int("attempt", int64(e.Attempt))
	a.line.bool("final", e.Final)
	a.line.int("status", int64(e.Status))
	a.line.str("outcome", e.Outcome.String())
	a.line.strs("markers", e.Markers)
	a.line.str("egress", e.Egress)
	a.line.str("egress_reason", e.EgressReason)
	if e.EgressRule != "" {
		a.line.str("egress_rule", e.EgressRule)
	}
	a.line.str("breaker", e.Breaker)
	if e.Unsent != "" {
		a.line.str("unsent", e.Unsent)
	}
	_ = a.writeLocked()
}

// Record appends a line of the given kind with the given fields, in order.
// String values, and the text of any other value, are redacted
// (*url.URL as a URL, http.Header and url.Values as objects with their
// secret values replaced); durations are written as Go duration strings
// and times in RFC 3339. It returns an error for an empty kind or a
// field named seq, time, kind, prev or hash, or with an empty name (nothing
// is written then), an error after Close, and the first write error ever
// met: after a failed write the log accepts nothing more, since its
// chain's end is uncertain.
func (a *Audit) Record(kind string, fields ...slog.Attr) error {
	if kind == "" {
		return fmt.Errorf("%w: empty kind", errReservedKey)
	}
	for _, f := range fields {
		if f.Key == "" || reservedKeys[f.Key] {
			return fmt.Errorf("%w: %q", errReservedKey, f.Key)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return errAuditClosed
	}
	if a.err != nil {
		return a.err
	}
	a.line.start(a.cfg.Now(), kind)
	for _, f := range fields {
		a.line.attr(f)
	}
	return a.writeLocked()
}

// Head returns the seq and hash of the last line this writer wrote, for
// the operator to keep as a Verifier's Anchor. Other writers of the same
// file may have appended since.
func (a *Audit) Head() Head {
	a.mu.Lock()
	defer a.mu.Unlock()
	return Head{Seq: a.seq, Hash: string(a.prev[:])}
}

// Err returns the first write error, or nil. Observe cannot return errors;
// check Err (or the error of any Record call) to learn that the log has
// stopped.
func (a *Audit) Err() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// Close writes a "close" line, syncs and closes the file. Later writes
// return an error; closing twice returns nil. It returns the first
// error met by the log, if any.
func (a *Audit) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil
	}
	a.closed = true
	if a.err == nil {
		a.line.start(a.cfg.Now(), "close")
		_ = a.writeLocked()
	}
	if err := a.f.Sync(); err != nil && a.err == nil {
		a.err = fmt.Errorf("telemetry: sync audit log: %w", err)
	}
	if err := a.f.Close(); err != nil && a.err == nil {
		a.err = fmt.Errorf("telemetry: close audit log: %w", err)
	}
	return a.err
}

// writeLocked appends the line in a.line: under the file's lock, after
// the file's actual last line, rotating if needed; then syncs as
// configured. An error is kept: the log accepts nothing more. a.mu must
// be held.
func (a *Audit) writeLocked() error {
	size, err := a.lockLocked()
	if err != nil {
		a.err = err
		return err
	}
	err = a.catchUpLocked(size)
	if err == nil {
		err = a.putLocked(&a.line)
	}
	if err == nil {
		switch {
		case a.cfg.SyncEachLine:
			err = a.f.Sync()
		case a.cfg.SyncEvery > 0:
			if now := a.cfg.Now(); now.Sub(a.lastSync) >= a.cfg.SyncEvery || now.Before(a.lastSync) {
				a.lastSync = now
				err = a.f.Sync()
			}
		}
		if err != nil {
			err = fmt.Errorf("telemetry: sync audit log: %w", err)
		}
	}
	if uerr := unlock(a.f); uerr != nil && err == nil {
		err = fmt.Errorf("telemetry: unlock audit log %s: %w", a.cfg.Path, uerr)
	}
	if err != nil {
		a.err = err
	}
	return err
}

// putLocked finishes l after the chain's end, rotates if needed and
// writes it, advancing the chain. The file's lock must be held.
func (a *Audit) putLocked(l *lineBuilder) error {
	hash := l.finish(a.seq+1, &a.prev)
	if a.cfg.MaxBytes > 0 && a.size > 0 && a.size+int64(len(l.out)) > a.cfg.MaxBytes {
		if err := a.rotateLocked(); err != nil {
			return err
		}
		size, _, err := fileState(a.f, a.cfg.Path)
		if err != nil {
			return fmt.Errorf("telemetry: audit log: %w", err)
		}
		if err := a.catchUpLocked(size); err != nil {
			return err
		}
		hash = l.finish(a.seq+1, &a.prev)
	}
	n, err := a.f.Write(l.out)
	a.size += int64(n)
	if err != nil {
		a.size = -1
		return fmt.Errorf("telemetry: write audit log: %w", err)
	}
	a.seq++
	a.prev = hash
	return nil
}
