package probe

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/egress"
	"github.com/egresskit/egresskit/internal/configerr"
	"github.com/egresskit/egresskit/internal/probeinput"
)

// Options configures Run. The zero value works: direct egress, GET, a 10 s
// deadline, 64 probes in flight, the default classifier and the default
// thresholds.
type Options struct {
	// Matrix probes every target through every egress (Options.Proxies,
	// plus any proxy URL named by a target), to tell a blacklisted proxy
	// from a blocking target. Without Matrix each target is probed once,
	// through its own Egress.
	Matrix bool

	// Proxies are the egress endpoints (package egress) targets may name by
	// ID. Targets without an Egress are spread over them in turn (or, with
	// Matrix, sent through each). Empty means direct. Their IDs and
	// redacted proxy URLs appear in the report; their credentials never do.
	Proxies []egress.Endpoint

	// Rules are egress rules (package egress, validated against Proxies'
	// labels as a Pool validates them): a probe never leaves from an
	// egress the rule governing its host excludes. With Matrix each target
	// goes through every egress its rule allows, and Report.Rules says per
	// rule and host whether an eligible egress got through; without
	// Matrix a target naming an excluded egress, or with none of Proxies
	// allowed, is a *TargetError.
	Rules []egress.Rule

	// Deadline bounds the whole Run, measured from its start; ctx's own
	// deadline applies when earlier. Probes still running when it passes
	// are cancelled and reported with outcome "deadline". Zero means 10 s;
	// negative is an error.
	Deadline time.Duration

	// PerRequestTimeout bounds each probe; a probe that runs out of it is
	// reported as a Transient "timeout". Zero means no bound other than
	// Deadline; negative is an error.
	PerRequestTimeout time.Duration

	// Concurrency is the number of probes in flight at once. Zero means
	// 64; negative is an error.
	Concurrency int

	// PerHost is the number of probes in flight to one host (by host key,
	// across egresses). Zero means 2; negative means no cap.
	// Probes to a host at its cap wait while probes to other hosts go.
	PerHost int

	// IgnoreRobots sends every probe without asking robots.txt. By
	// default each probe first checks robots.txt (RFC 9309), fetched
	// through the probe's own egress with the probe's User-Agent and
	// within its deadline; a URL the host's rules disallow is not probed
	// and is reported with Disallowed set, outside the measured probes. A
	// robots.txt that cannot be fetched (5xx, 429, a network failure)
	// does not stop the probe: that failure is what the diagnosis is for,
	// and the crawl's own chain applies RFC 9309's full disallow.
	IgnoreRobots bool

	// Workers is the crawl's planned concurrency, which
	// Recommendation.MaxConcurrency scales. Zero means 16; negative is an
	// error.
	Workers int

	// Method is http.MethodGet (when empty) or http.MethodHead.
	Method string

	// MaxRedirects is the number of redirects a probe follows; the final
	// response is the one classified. Zero means 5;
	// negative means none are followed.
	MaxRedirects int

	// Classify configures how every response is classified, as
	// egresskit.Config.Classify does for the chain. An empty AgentToken
	// means UserAgent's product token (the text before the first '/',
	// space or '('), as the chain sets it.
	Classify classify.Config

	// UserAgent is sent with every probe and with its robots.txt fetch.
	// Empty means egresskit.DefaultUserAgent, the chain's own, so that the
	// probe is judged by robots.txt, and named in refusals, under the same
	// agent token as the crawl it prepares; set it to the
	// crawler's own User-Agent. A value that is not a valid header value
	// (a control character such as CR or LF) is an error.
	UserAgent string

	// TLSClientConfig is used for https targets. Nil means the defaults of
	// crypto/tls (system roots).
	TLSClientConfig *tls.Config

	// ProxyTLSConfig is used for https:// proxies. Nil means the defaults
	// of crypto/tls, with the proxy's host as ServerName.
	ProxyTLSConfig *tls.Config

	// Thresholds decide the status. The zero value holds the defaults.
	Thresholds Thresholds

	// Progress, when set, is called after each probe finishes, from the
	// probing goroutines and so concurrently: it must be safe for
	// concurrent use and quick, because it delays the probe that calls it.
	Progress func(Progress)

	// Now is the clock for timestamps and latencies. Nil means time.Now.
	Now func() time.Time

	// transport, when set (by this package's tests only), replaces the
	// transport of every egress, so that a run can be tested in a synctest
	// bubble, in fake time, without sockets.
	transport http.RoundTripper
}

// Progress is passed to Options.Progress, for an operator's tool that
// shows a run as it goes (the preflight command's progress line).
type Progress struct {
	// Done is the number of probes finished so far, this one included.
	Done int
	// Total is the number of probes in the run.
	Total int
	// Result is the probe that just finished.
	Result TargetResult
}

// settings are Options resolved to their defaults.
type settings struct {
	Options
	maxRedirects int // -1 for none
}

// resolve validates o and fills in defaults.
func (o Options) resolve() (settings, error) {
	s := settings{Options: o}
	bad := func(field, why string) (settings, error) {
		return settings{}, configerr.Field(field, "%s", why)
	}
	switch {
	case o.Deadline < 0:
		return bad("Deadline", "must not be negative")
	case o.Deadline == 0:
		s.Deadline = probeinput.DefaultDeadline
	}
	if o.PerRequestTimeout < 0 {
		return bad("PerRequestTimeout", "must not be negative")
	}
	switch {
	case o.Concurrency < 0:
		return bad("Concurrency", "must not be negative")
	case o.Concurrency == 0:
		s.Concurrency = probeinput.DefaultConcurrency
	}
	switch o.Method {
	case "":
		s.Method = http.MethodGet
	case http.MethodGet, http.MethodHead:
	default:
		return bad("Method", fmt.Sprintf("%q is not GET or HEAD", o.Method))
	}
	switch {
	case o.MaxRedirects < 0:
		s.maxRedirects = -1
	case o.MaxRedirects == 0:
		s.maxRedirects = probeinput.DefaultMaxRedirects
	default:
		s.maxRedirects = o.MaxRedirects
	}
	if o.UserAgent == "" {
		s.UserAgent = egresskit.DefaultUserAgent
	} else if err := probeinput.ValidHeaderValue(o.UserAgent); err != nil {
		return bad("UserAgent", err.Error())
	}
	switch {
	case o.PerHost == 0:
		s.PerHost = probeinput.DefaultPerHost
	case o.PerHost < 0:
		s.PerHost = 0 // no cap
	}
	switch {
	case o.Workers < 0:
		return bad("Workers", "must not be negative")
	case o.Workers == 0:
		s.Workers = probeinput.DefaultWorkers
	}
	if o.Classify.AgentToken == "" {
		s.Classify.AgentToken = productToken(s.UserAgent)
	}
	if o.Now == nil {
		s.Now = time.Now
	}
	if err := o.Thresholds.validate(); err != nil {
		return settings{}, err
	}
	return s, nil
}

// productToken returns the product token of a User-Agent: the text before
// the first '/', space or '('.
func productToken(ua string) string {
	if i := strings.IndexAny(ua, "/ ("); i >= 0 {
		ua = ua[:i]
	}
	return strings.TrimSpace(ua)
}
