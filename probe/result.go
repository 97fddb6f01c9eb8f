package probe

import (
	"crypto/tls"
	"net/http/httptrace"
	"sync"
	"time"

	"github.com/egresskit/egresskit/classify"
)

// stage is the last step a probe reached; TargetResult.Stage spells it.
type stage uint8

// The stages, in order.
const (
	stageQueued stage = iota
	stageDNS
	stageConnect
	stageTLS
	stageRequest
	stageResponse
	stageProxy
)

var stageNames = [...]string{"queued", "dns", "connect", "tls", "request", "response", "proxy"}

// String returns the lower-case name of s ("queued", "dns", ...).
func (s stage) String() string {
	if int(s) < len(stageNames) {
		return stageNames[s]
	}
	return "unknown"
}

// Phases are the durations of the steps of one probe, measured with
// net/http/httptrace as blackbox_exporter measures them. A step that did
// not happen (no DNS for an IP literal, no TLS for http) is zero. When
// redirects are followed, DNS, Connect and TLS are summed over the hops.
type Phases struct {
	// DNS is the time spent resolving names.
	DNS time.Duration
	// Connect is the time from the first TCP connection attempt to the
	// established connection (to the proxy, when there is one).
	Connect time.Duration
	// TLS is the time spent in TLS handshakes.
	TLS time.Duration
	// TTFB is the time from the start of the probe to the first byte of the
	// final response.
	TTFB time.Duration
}

// TargetResult is the outcome of one probe, for an operator reading where
// a probe got to and why it failed.
//
// Its Stage, in order: "queued" (the probe never started: the deadline
// came first, or robots.txt disallowed it), "dns" (resolving the host
// name or the proxy's), "connect" (the TCP handshake with the target or
// the proxy), "tls" (the TLS handshake), "request" (connected; the
// request is written and no response byte has arrived yet), "response"
// (the response began to arrive), and "proxy": the probe failed on its
// egress route, at the proxy, whatever step it had reached (the proxy
// refused the credentials, could not be reached, failed its TLS or SOCKS
// handshake or answered with an error of its own); EgressFailure says
// which, and the target was not judged.
type TargetResult struct {
	// URL is the target URL, redacted: no userinfo, no fragment, secret
	// query values replaced by REDACTED.
	URL string
	// Host is the target's host key (package hostkey, by host): the host
	// name, lower-cased, with its port unless it is 80 or 443.
	Host string
	// Egress is the ID of the endpoint the probe went through; "direct"
	// when there was no proxy.
	Egress string
	// Proxy is the endpoint's proxy URL without credentials; "" for direct.
	Proxy string
	// Rule is the egress rule (Options.Rules) that governs the host; ""
	// for none.
	Rule string
	// Status is the HTTP status code of the final response; 0 when none
	// was received.
	Status int
	// Outcome is the classification of the probe by package classify,
	// except that a probe that ran out of PerRequestTimeout is Transient,
	// and a probe cut short by the Run's deadline or by the caller is
	// Canceled.
	Outcome classify.Outcome
	// Deadline is true when the Run's deadline cut this probe short, or
	// came before it started. Outcome is then Canceled.
	Deadline bool
	// TimedOut is true when the probe ran out of PerRequestTimeout.
	TimedOut bool
	// Disallowed is true when robots.txt disallows the URL for the
	// probe's agent: the probe was not sent (Stage "queued", Outcome
	// Permanent) and is not among the measured probes.
	Disallowed bool
	// Stage is the last step the probe reached; for a probe that failed
	// or was cut short it says where it stalled: "queued", "dns",
	// "connect", "tls", "request", "response", or "proxy" (failed on its
	// egress route; EgressFailure says how). See TargetResult's stages.
	Stage string
	// EgressFailure is the kind of egress failure (egress.ProxyError.Kind:
	// "auth", "dial", "tls", "handshake", "proxy") when the probe failed
	// on its egress route rather than at the target; Stage is then
	// "proxy". Such a result counts against its egress, never in its
	// host's breakdown. Empty otherwise.
	EgressFailure string
	// Reused is true when the probe went over a connection an earlier probe
	// of the Run opened (keep-alive or HTTP/2); its DNS, Connect and TLS
	// phases are then zero.
	Reused bool
	// Markers are the challenge markers found, from classify.
	Markers []string
	// RetryAfter is the wait the server asked for; zero when none.
	RetryAfter time.Duration
	// Reason is classify's short explanation ("status 429", ...).
	Reason string
	// Latency is the time from the start of the probe to the end of its
	// classification (response headers, plus the peek at the body that
	// looks for challenge markers), or to its failure. Zero when the probe
	// never started.
	Latency time.Duration
	// Phases break Latency down.
	Phases Phases
	// Err describes the failure, with credentials removed: "deadline",
	// "timeout", "canceled", a network error, or "HTTP status N" for a
	// response that is not a success. Empty on success.
	Err string
}

// success reports whether the probe succeeded: its Outcome is classify.OK
// (a response that is neither a failure nor a challenge page).
func (r TargetResult) success() bool { return r.Outcome == classify.OK && !r.Deadline && r.Status != 0 }

// OutcomeName is the outcome as the report spells it (its "outcome"
// field), for an operator reading the results: "deadline" for a probe
// cut short by the Run's deadline, else Outcome.String().
func (r TargetResult) OutcomeName() string {
	if r.Deadline {
		return "deadline"
	}
	return r.Outcome.String()
}

// notStarted reports whether the probe was never sent: its Stage is
// "queued", or empty, as in a result built by hand.
func (r TargetResult) notStarted() bool { return r.Stage == "" || r.Stage == stageQueued.String() }

// recorder collects httptrace events for one probe. The transport may call
// it from its dialing goroutine even after the probe has returned, so it is
// guarded, and freeze stops it from changing after the probe ends.
type recorder struct {
	now   func() time.Time
	start time.Time

	mu        sync.Mutex // guards the fields below
	frozen    bool
	stage     stage
	reused    bool
	dnsStart  time.Time
	connStart time.Time
	tlsStart  time.Time
	phases    Phases
}

func newRecorder(now func() time.Time) *recorder {
	return &recorder{now: now, start: now(), stage: stageDNS}
}

// event applies f under the lock unless the recorder is frozen.
func (r *recorder) event(f func(t time.Time)) {
	t := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.frozen {
		f(t)
	}
}

// advance moves the stage forward (never back: a redirect's new
// connection does not undo "response").
func (r *recorder) advance(s stage) {
	if s > r.stage {
		r.stage = s
	}
}

func (r *recorder) trace() *httptrace.ClientTrace {
	return &httptrace.ClientTrace{
		DNSStart: func(httptrace.DNSStartInfo) {
			r.event(func(t time.Time) { r.dnsStart = t; r.advance(stageDNS) })
		},
		DNSDone: func(httptrace.DNSDoneInfo) {
			r.event(func(t time.Time) {
				if !r.dnsStart.IsZero() {
					r.phases.DNS += t.Sub(r.dnsStart)
					r.dnsStart = time.Time{}
				}
			})
		},
		ConnectStart: func(string, string) {
			r.event(func(t time.Time) {
				if r.connStart.IsZero() {
					r.connStart = t
				}
				r.advance(stageConnect)
			})
		},
		ConnectDone: func(_, _ string, err error) {
			r.event(func(t time.Time) {
				if err == nil && !r.connStart.IsZero() {
					r.phases.Connect += t.Sub(r.connStart)
					r.connStart = time.Time{}
				}
			})
		},
		TLSHandshakeStart: func() {
			r.event(func(t time.Time) { r.tlsStart = t; r.advance(stageTLS) })
		},
		TLSHandshakeDone: func(tls.ConnectionState, error) {
			r.event(func(t time.Time) {
				if !r.tlsStart.IsZero() {
					r.phases.TLS += t.Sub(r.tlsStart)
					r.tlsStart = time.Time{}
				}
			})
		},
		GotConn: func(info httptrace.GotConnInfo) {
			r.event(func(time.Time) { r.reused = r.reused || info.Reused; r.advance(stageRequest) })
		},
		GotFirstResponseByte: func() {
			r.event(func(t time.Time) { r.phases.TTFB = t.Sub(r.start); r.advance(stageResponse) })
		},
	}
}

// freeze stops recording and returns what was recorded.
func (r *recorder) freeze() (stage, Phases, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.frozen = true
	return r.stage, r.phases, r.reused
}
