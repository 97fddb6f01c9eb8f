// Package console is the review console of halted hosts: an http.Handler
// an operator mounts in an admin server of their own, as net/http/pprof is
// mounted, over any hoststate.Store (a hoststate.Memory for one process, a
// redisstore.Store for a fleet) and, optionally, a tamper-evident audit
// log.
//
// It shows the queue of halted hosts, newest first, each with the evidence
// its halt recorded (hoststate.HaltLog) and the host's breaker and pacing
// status; a host's page with its halts, the operators' notes and its
// audit trail; and two actions: Resume, which needs a reason and the
// operator's name, lifts the halt in the Store (fleet-wide when the Store
// is shared) and writes a "resume" line to the audit log; and "keep
// halted", which records a note (and a "keep_halted" line) on a host that
// is halted. A reason and a name are each one line of printable text. The
// pages are plain server-rendered HTML without JavaScript, readable on a
// phone.
//
//	mux.Handle("/halts/", http.StripPrefix("/halts", h))
//
// Mount it under a path of its own ending in "/": its links are relative.
//
// # Access
//
// With Config.Token set, every request must carry it: as an
// "Authorization: Bearer TOKEN" header (scripts), or as the session cookie
// the console's sign-in form sets (browsers). A sign-in creates a session
// kept by the console, which ends at sign-out or after Config.SessionTTL;
// the cookie holds a random session identifier, never the token. Wrong
// tokens are rate-limited: after ten in a row, one a second is checked
// and the others are refused with 429. The token must be at least 128
// bits strong (ErrWeakToken). With no Token, the console trusts the
// operator's own authentication in front of it (a reverse proxy, an
// authenticating middleware) and serves anyone who reaches it; an
// Authorization header of another scheme (a proxy's Basic) is ignored.
//
// Every request's Host must be an IP address, localhost, or one of
// Config.Hosts, so that a web page cannot reach the console through a
// name of its own that resolves to the console's address (DNS
// rebinding); every POST whose Origin is given must come from the Host it
// is sent to, and must carry the console's CSRF token (a hidden form
// field matching a SameSite=Strict cookie); one without it is refused with
// 403 and changes nothing. Config.ReadOnly serves the pages without any
// form and refuses every POST.
//
// No page shows a credential: URLs and body heads are the redacted ones
// the chain recorded, and the console writes no header it was sent.
// Every stored field is shown as data: cleaned of control and
// bidirectional characters and bounded, whatever wrote it to the Store.
package console

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/egresskit/egresskit/hostkey"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/telemetry"
)

// Config configures the console. Store is required.
type Config struct {
	// Store is the per-host state, with its halt records.
	Store hoststate.Store
	// Audit, if not nil, receives a line for every resume and every note
	// the console records. The console does not close it.
	Audit *telemetry.Audit
	// AuditFiles are the audit logs a host's page reads its trail from
	// (the lines whose host is the host's key), oldest file first; the
	// newest 100 lines are shown. None: no trail.
	AuditFiles []string
	// Token, if not empty, is required of every request (see Access). It
	// must be at least 128 bits strong: 32 hex digits, 22 base64
	// characters.
	Token string
	// ReadOnly serves the pages without forms and refuses every change.
	ReadOnly bool
	// HostKey is how the chain keys hosts, for what an operator types.
	HostKey hostkey.Mode
	// Hosts are the names (a name, or name:port) the console may be
	// reached by, besides IP addresses and localhost, which are always
	// accepted; a request with any other Host is refused (421).
	Hosts []string
	// SecureCookies marks the cookies Secure: set it when a TLS proxy
	// fronts the console. They are Secure anyway on a TLS connection.
	SecureCookies bool
	// SessionTTL is how long a sign-in lasts; zero means 8 hours.
	SessionTTL time.Duration
}

// ErrWeakToken is returned by New for a Token of less than 128 bits.
var ErrWeakToken = errors.New("console: Token is weaker than 128 bits")

// New returns the console's handler. It fails when Store is nil, Token is
// weaker than 128 bits (ErrWeakToken), or SessionTTL is negative.
func New(cfg Config) (http.Handler, error) {
	if cfg.Store == nil {
		return nil, errors.New("console: Store is nil")
	}
	if cfg.Token != "" && tokenBits(cfg.Token) < 128 {
		return nil, fmt.Errorf("%w: about %d bits", ErrWeakToken, tokenBits(cfg.Token))
	}
	if cfg.SessionTTL < 0 {
		return nil, errors.New("console: SessionTTL is negative")
	}
	if cfg.SessionTTL == 0 {
		cfg.SessionTTL = 8 * time.Hour
	}
	return newServer(cfg), nil
}

// Format writes the configuration with its Token replaced by
// "[redacted]", for every verb.
func (c Config) Format(f fmt.State, _ rune) {
	fmt.Fprintf(f, "console.Config{Store:%T, Audit:%t, AuditFiles:%q, Token:%s, ReadOnly:%t, HostKey:%v, Hosts:%q, SecureCookies:%t, SessionTTL:%s}",
		c.Store, c.Audit != nil, c.AuditFiles, redactedToken(c.Token), c.ReadOnly, c.HostKey, c.Hosts, c.SecureCookies, c.SessionTTL)
}

// MarshalJSON writes the configuration with its Token replaced by
// "[redacted]", and the Store and Audit by whether they are set.
func (c Config) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Store         string        `json:"store"`
		Audit         bool          `json:"audit"`
		AuditFiles    []string      `json:"audit_files"`
		Token         string        `json:"token"`
		ReadOnly      bool          `json:"read_only"`
		HostKey       string        `json:"host_key"`
		Hosts         []string      `json:"hosts"`
		SecureCookies bool          `json:"secure_cookies"`
		SessionTTL    time.Duration `json:"session_ttl"`
	}{fmt.Sprintf("%T", c.Store), c.Audit != nil, c.AuditFiles, redactedToken(c.Token), c.ReadOnly,
		fmt.Sprint(c.HostKey), c.Hosts, c.SecureCookies, c.SessionTTL})
}

func redactedToken(tok string) string {
	if tok == "" {
		return ""
	}
	return "[redacted]"
}
