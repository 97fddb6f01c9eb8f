package egresskit_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/internal/retrier"
	"github.com/egresskit/egresskit/probe"
	"github.com/egresskit/egresskit/ratelimit"
	"github.com/egresskit/egresskit/redisstore"
	"github.com/egresskit/egresskit/retry"
	"github.com/egresskit/egresskit/session"
	"github.com/redis/go-redis/v9"
)

// TestConstructorsRefuseInvalidConfig: every constructor of the module
// refuses a configuration it cannot honour at construction, with an error
// that is egresskit.ErrInvalidConfig and names the field; nothing is
// deferred to the first request. (egress.New's errors name the field in
// their own, unexported type: egress's TestNewRefusesInvalidConfig.)
func TestConstructorsRefuseInvalidConfig(t *testing.T) {
	// redisstore.New checks its Config before it contacts Redis: nothing
	// listens on port 1.
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer client.Close()
	target := []probe.Target{{URL: "http://127.0.0.1:1/"}}
	for _, tc := range []struct {
		name, field string
		build       func() error
	}{
		{"egresskit.New", "CrawlRate", func() error {
			_, err := egresskit.New(egresskit.Config{CrawlRate: math.NaN()})
			return err
		}},
		{"egresskit.New", "Retry.MaxDelay", func() error {
			_, err := egresskit.New(egresskit.Config{Retry: retry.Policy{MaxDelay: -time.Second}})
			return err
		}},
		{"retrier.New", "BaseDelay", func() error {
			_, err := retrier.New(nil, retry.Policy{BaseDelay: time.Hour, MaxDelay: time.Second})
			return err
		}},
		{"hoststate.NewMemory", "Breaker.OpenTimeout", func() error {
			_, err := hoststate.NewMemory(hoststate.Config{Breaker: breaker.Config{OpenTimeout: -time.Second}})
			return err
		}},
		{"hoststate.NewMemory", "Limit.PerMinute", func() error {
			_, err := hoststate.NewMemory(hoststate.Config{Limit: ratelimit.Config{PerMinute: math.Inf(1)}})
			return err
		}},
		{"redisstore.New", "Timeout", func() error {
			_, err := redisstore.New(client, redisstore.Config{Timeout: -time.Millisecond})
			return err
		}},
		{"redisstore.New", "RecordDelay", func() error {
			_, err := redisstore.New(client, redisstore.Config{RecordDelay: time.Hour})
			return err
		}},
		{"redisstore.New", "OnRedisError", func() error {
			_, err := redisstore.New(client, redisstore.Config{OnRedisError: 7})
			return err
		}},
		{"redisstore.New", "HostState.Limit.Burst", func() error {
			_, err := redisstore.New(client, redisstore.Config{HostState: hoststate.Config{Limit: ratelimit.Config{Burst: -1}}})
			return err
		}},
		{"session.New", "TokenHeader", func() error {
			_, err := session.New(session.Config{TokenHeader: "X Token"})
			return err
		}},
		{"session.New", "TTL", func() error {
			_, err := session.New(session.Config{TTL: -time.Hour})
			return err
		}},
		{"probe.Run", "Deadline", func() error {
			_, err := probe.Run(context.Background(), target, probe.Options{Deadline: -time.Second})
			return err
		}},
		{"probe.Run", "Thresholds.DegradedSuccessRate", func() error {
			_, err := probe.Run(context.Background(), target, probe.Options{Thresholds: probe.Thresholds{DegradedSuccessRate: 2}})
			return err
		}},
	} {
		err := tc.build()
		if !errors.Is(err, egresskit.ErrInvalidConfig) {
			t.Errorf("%s (bad %s) = %v, want ErrInvalidConfig", tc.name, tc.field, err)
			continue
		}
		if !strings.Contains(err.Error(), " "+tc.field+" ") {
			t.Errorf("%s (bad %s) = %q, does not name the field", tc.name, tc.field, err)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s = %q shows a credential", tc.name, err)
		}
	}
}
