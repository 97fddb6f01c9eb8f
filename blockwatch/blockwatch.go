// Package blockwatch recognises a host that has started to refuse a crawler
// without saying so: no challenge page, no header, no mention of the agent,
// only a run of refusal-like answers (401, 403) to URLs that are not
// private. A page-level classifier cannot see that; a per-host record of
// recent answers can.
//
// Two rules, both per host:
//
//   - run: Config.Run refusal-like answers to as many distinct URLs with no
//     success (2xx, 3xx) in between;
//   - shift: at least Config.Share of the last Config.Window answers are
//     refusal-like, to at least half of Config.Run distinct URLs, so that a
//     few successes sprinkled among the refusals do not hide a block.
//
// A site that answers 403 to a few private URLs among many successes trips
// neither. Answers without a status (transport errors), Canceled attempts,
// failures of the egress route and attempts already Refused are not
// counted. The egresskit chain halts a host this package flags, through
// the host-state Store like any halt, and escalates with the Evidence.
//
// The chain keeps the record in memory, per process: in a fleet each
// worker judges from the answers it received, and the halt it decides is
// shared through the Store. Configure it with egresskit.Config.BlockWatch.
package blockwatch

import (
	"time"
)

// Config configures the block detector. The zero value is on, with the defaults
// below; set Disabled to switch it off.
type Config struct {
	// Disabled switches detection off: Observe never flags a host.
	Disabled bool
	// Run is how many refusal-like answers, to as many distinct URLs and
	// with no success in between, flag a host. 0 means 10; values below 2
	// are raised to 2.
	Run int
	// Window is how many recent answers the shift rule looks at. 0 means
	// 20; values below Run are raised to Run.
	Window int
	// Share is the fraction of the Window that must be refusal-like for the
	// shift rule. 0 means 0.8, and so does a negative value or NaN (which
	// would otherwise flag a window with no refusal-like share at all); a
	// value above 1 switches the rule off.
	Share float64
	// Statuses are the refusal-like statuses. Nil means 401 and 403.
	Statuses []int
	// MaxHosts bounds memory: beyond it the least recently seen host is
	// forgotten. 0 means 10,000.
	MaxHosts int
}

// Evidence is why a host was flagged: what an operator needs to judge a
// suspected block.
type Evidence struct {
	// Rule is "run" or "shift" (see the package documentation).
	Rule string
	// Reason says in one sentence what was seen; it holds no URL.
	Reason string
	// Answers is how many answers the rule looked at, Refusals how many of
	// them were refusal-like, and URLs how many distinct URLs those were.
	Answers, Refusals, URLs int
	// Statuses counts the refusal-like answers by status code.
	Statuses map[int]int
	// Since is when the first of those refusals was seen.
	Since time.Time
}

// String returns the Reason.
func (e *Evidence) String() string { return e.Reason }
