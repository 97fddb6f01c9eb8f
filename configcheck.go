package egresskit

import (
	"fmt"
	"math"

	"github.com/egresskit/egresskit/hostkey"
	"github.com/egresskit/egresskit/internal/configerr"
	"golang.org/x/net/http/httpguts"
)

// ErrInvalidConfig is returned by New for a Config it cannot honour; the
// error names the field (Config.Retry.MaxDelay, Config.Scope.Allow[2],
// ...). Besides values out of range, it refuses an agent set anywhere but
// UserAgent (Robots.UserAgent, Robots.AgentToken, Classify.AgentToken):
// the crawler's identity is set in one place.
// Every constructor of the module (hoststate.NewMemory, redisstore.New,
// egress.New, ...) wraps this same value.
var ErrInvalidConfig = configerr.ErrInvalid

// invalid is an ErrInvalidConfig naming field.
func invalid(field, format string, args ...any) error {
	return configerr.Field(field, format, args...)
}

// check reports the first reason c cannot be honoured, naming the field,
// or nil. The retry policy is checked by retrier.New.
func (c *Config) check() error {
	switch {
	case c.Robots.UserAgent != "":
		return invalid("Robots.UserAgent", "is set: set the crawler's identity with Config.UserAgent (or the requests' User-Agent)")
	case c.Robots.AgentToken != "":
		return invalid("Robots.AgentToken", "is set: set the crawler's identity with Config.UserAgent (or the requests' User-Agent)")
	case c.Classify.AgentToken != "":
		return invalid("Classify.AgentToken", "is set: set the crawler's identity with Config.UserAgent (or the requests' User-Agent)")
	case c.UserAgent != "" && !httpguts.ValidHeaderFieldValue(c.UserAgent):
		return invalid("UserAgent", "is not a valid header value")
	case math.IsNaN(c.CrawlRate) || math.IsInf(c.CrawlRate, 0):
		return invalid("CrawlRate", "is %v, not a finite number of requests per second (0 means no cap)", c.CrawlRate)
	case c.HostKey != hostkey.ByHost && c.HostKey != hostkey.ByDomain:
		return invalid("HostKey", "is %d, neither hostkey.ByHost nor hostkey.ByDomain", c.HostKey)
	}
	for _, check := range []func() error{c.checkClassify, c.checkRobots, c.checkBlockWatch, c.checkScope} {
		if err := check(); err != nil {
			return err
		}
	}
	return nil
}

// maxPeek is classify's cap on PeekSize.
const maxPeek = 1 << 20

func (c *Config) checkClassify() error {
	cc := &c.Classify
	switch {
	case cc.PeekSize > maxPeek:
		return invalid("Classify.PeekSize", "is %d, above 1 MiB", cc.PeekSize)
	case cc.OKPeekSize > maxPeek:
		return invalid("Classify.OKPeekSize", "is %d, above 1 MiB", cc.OKPeekSize)
	case cc.PeekSize > 0 && cc.OKPeekSize > cc.PeekSize:
		return invalid("Classify.OKPeekSize", "is %d, above PeekSize %d", cc.OKPeekSize, cc.PeekSize)
	}
	for i, m := range cc.Markers {
		if m.Header == "" && m.Body == "" {
			return invalid(fmt.Sprintf("Classify.Markers[%d]", i), "has neither Header nor Body")
		}
		if m.Name == "" {
			return invalid(fmt.Sprintf("Classify.Markers[%d]", i), "has no Name")
		}
	}
	return nil
}

func (c *Config) checkRobots() error {
	r := &c.Robots
	neg := []struct {
		field string
		v     int64
	}{
		{"Robots.TTL", int64(r.TTL)},
		{"Robots.MaxSize", r.MaxSize},
		{"Robots.FetchTimeout", int64(r.FetchTimeout)},
		{"Robots.RetryBaseDelay", int64(r.RetryBaseDelay)},
		{"Robots.RetryMaxDelay", int64(r.RetryMaxDelay)},
		{"Robots.MaxHosts", int64(r.MaxHosts)},
		{"Robots.MaxCacheBytes", r.MaxCacheBytes},
	}
	for _, n := range neg {
		if n.v < 0 {
			return invalid(n.field, "is negative; it cannot be off (0 means its default)")
		}
	}
	if r.RetryBaseDelay > 0 && r.RetryMaxDelay > 0 && r.RetryBaseDelay > r.RetryMaxDelay {
		return invalid("Robots.RetryBaseDelay", "%v is above RetryMaxDelay %v", r.RetryBaseDelay, r.RetryMaxDelay)
	}
	return nil
}

func (c *Config) checkBlockWatch() error {
	w := &c.BlockWatch
	if w.Disabled {
		return nil
	}
	switch {
	case w.Run < 0 || w.Run == 1:
		return invalid("BlockWatch.Run", "is %d: a run is at least 2 answers (0 means 10; set Disabled to switch detection off)", w.Run)
	case w.Window < 0:
		return invalid("BlockWatch.Window", "is negative (0 means 20)")
	case w.Window > 0 && w.Window < max(w.Run, 10*btoi(w.Run == 0)):
		return invalid("BlockWatch.Window", "%d is below Run", w.Window)
	case w.Share < 0 || math.IsNaN(w.Share):
		return invalid("BlockWatch.Share", "is %v: a share is in (0, 1], or above 1 to switch the shift rule off (0 means 0.8)", w.Share)
	case w.MaxHosts < 0:
		return invalid("BlockWatch.MaxHosts", "is negative: memory is always bounded (0 means 10,000)")
	}
	for i, st := range w.Statuses {
		if st < 400 || st > 599 {
			return invalid(fmt.Sprintf("BlockWatch.Statuses[%d]", i), "is %d, not a 4xx or 5xx status", st)
		}
	}
	return nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (c *Config) checkScope() error {
	for name, list := range map[string][]string{"Scope.Allow": c.Scope.Allow, "Scope.Deny": c.Scope.Deny} {
		for i, p := range list {
			if p == "" || p == "." {
				return invalid(fmt.Sprintf("%s[%d]", name, i), "is empty")
			}
		}
	}
	return nil
}
