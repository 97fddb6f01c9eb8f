package hoststate

import (
	"context"
	"time"
)

// HaltLog keeps, beside each halt, what an operator needs to judge it:
// the evidence of the refusal that caused it, and the operators' notes on
// it (a resume, or a decision to keep it halted). A Store shares its
// HaltLog as it shares the halts: every worker of a fleet on one Redis
// sees one log. Records are bounded in size (a host keeps its newest 16
// halt records and 16 notes; URL, body head and texts are clipped) and hold what the
// writer gave: the chain redacts URLs and text before it writes, and
// stores no credential.
type HaltLog interface {
	// PutHalt records the evidence of a halt of h.Host (a zero Time is
	// taken as now).
	PutHalt(ctx context.Context, h Halt) error
	// AddNote records an operator's note on n.Host's halt (a zero Time
	// is taken as now).
	AddNote(ctx context.Context, n Note) error
	// Halts returns the latest halt record of every host halted now,
	// newest first, at most limit of them (limit <= 0: 1000). A host
	// halted with no record (halted by hand, or before records were kept)
	// is listed with its host and time only, when the store can list it.
	Halts(ctx context.Context, limit int) ([]Halt, error)
	// History returns host's records, newest first: its halts and the
	// notes on them. host may be a key or what hostkey.Parse takes.
	History(ctx context.Context, host string) ([]Halt, []Note, error)
}

// Halt is the record of one halt: when, by which worker, and the outcome
// that caused it.
type Halt struct {
	Host   string    // the host key
	Time   time.Time // when the host was halted
	Worker string    // the worker (process) that saw the refusal
	Status int       // the HTTP status of the refusal (0: none)
	Reason string    // the classifier's reason, or "suspected block"
	// Markers are the challenge markers that matched, if any.
	Markers []string
	// Evidence is the block detector's account, for a suspected block.
	Evidence string
	URL      string // the refused request's URL, redacted
	BodyHead string // the first bytes of the refusal, redacted
}

// Note is an operator's note on a host's halt.
type Note struct {
	Host    string    // the host key
	Time    time.Time // when it was written
	By      string    // who wrote it (the operator's name)
	Resumed bool      // the operator resumed the host; else kept it halted
	Text    string    // why
}
