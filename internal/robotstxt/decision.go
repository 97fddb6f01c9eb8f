package robotstxt

import (
	"errors"
	"time"

	"github.com/egresskit/egresskit/robots"
)

// ErrInvalidURL is matched by the error Check returns for a URL it cannot
// check: nil, not http or https, with an empty host (":8080") or a malformed
// port. The error never contains the URL.
var ErrInvalidURL = errors.New("robots: invalid URL")

// Decision is the answer of robots.txt for one URL.
type Decision struct {
	// Allowed reports whether the URL may be fetched.
	Allowed bool
	// Source says what the decision rests on.
	Source robots.Source
	// CrawlDelay is the host's Crawl-delay for the agent, clamped to
	// Config.MaxCrawlDelay; 0 when there is none. The caller should
	// space requests to the host at least this far apart.
	CrawlDelay time.Duration
	// Expires is when the cached robots.txt answer lapses; for an
	// Unreachable host it is when the next fetch may be tried. It is zero
	// for an Implicit decision.
	Expires time.Time
}
