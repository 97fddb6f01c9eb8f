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
// halted", which records a note (and a "keep_halted" line). The pages are
// plain server-rendered HTML without JavaScript, readable on a phone.
//
//	mux.Handle("/halts/", http.StripPrefix("/halts", h))
//
// Mount it under a path of its own ending in "/": its links are relative.
//
// # Access
//
// With Config.Token set, every request must carry it: as an
// "Authorization: Bearer TOKEN" header (scripts), or as the session cookie
// the console's sign-in form sets (browsers; the cookie holds a keyed hash
// of the token, never the token). With no Token, the console trusts the
// operator's own authentication in front of it (a reverse proxy, an
// authenticating middleware) and serves anyone who reaches it.
//
// Every state-changing request (POST) must carry the console's CSRF token
// (a hidden form field matching a SameSite=Strict cookie); one without it
// is refused with 403 and changes nothing. Config.ReadOnly serves the
// pages without any form and refuses every POST.
//
// No page shows a credential: URLs and body heads are the redacted ones
// the chain recorded, and the console writes no header it was sent.
package console

import (
	"errors"
	"net/http"

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
	// Token, if not empty, is required of every request (see Access).
	Token string
	// ReadOnly serves the pages without forms and refuses every change.
	ReadOnly bool
	// HostKey is how the chain keys hosts, for what an operator types.
	HostKey hostkey.Mode
}

// New returns the console's handler. It fails when Store is nil.
func New(cfg Config) (http.Handler, error) {
	if cfg.Store == nil {
		return nil, errors.New("console: Store is nil")
	}
	return newServer(cfg), nil
}
