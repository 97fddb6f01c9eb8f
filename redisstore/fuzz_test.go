package redisstore_test

import (
	"context"
	"errors"
	"github.com/egresskit/egresskit"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/internal/redistest"
	"github.com/egresskit/egresskit/ratelimit"
	"github.com/egresskit/egresskit/redisstore"
	"github.com/redis/go-redis/v9"
)

// FuzzKeys: for any prefix and host, New and Keys either refuse with their
// typed errors, or give two distinct keys whose Cluster hash tag is
// exactly the host.
func FuzzKeys(f *testing.F) {
	for _, seed := range [][2]string{
		{"egresskit", "example.com"}, {"crawl:prod", "[::1]:8080"}, {"a b", "x"}, {"p", "a{b}c"},
		{"p", ""}, {"", "h}"}, {"p", "\x00"}, {"ü", "xn--bcher-kva.example"},
	} {
		f.Add(seed[0], seed[1])
	}
	// Nothing listens: New's look at the server fails at once (no
	// retries), and New goes on.
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true, DialerRetries: 1, MaxRetries: -1})
	defer client.Close()
	f.Fuzz(func(t *testing.T, prefix, host string) {
		st, err := redisstore.New(client, redisstore.Config{Prefix: prefix})
		if err != nil {
			if !errors.Is(err, egresskit.ErrInvalidConfig) {
				t.Fatalf("New(%q) = %v, want nil or ErrInvalidConfig", prefix, err)
			}
			return
		}
		state, halt, err := redisstore.KeysOf(st, host)
		if err != nil {
			var he *redisstore.HostError
			if !errors.As(err, &he) || !errors.Is(err, redisstore.ErrInvalidHost) {
				t.Fatalf("Keys(%q) = %v, want nil or *HostError", host, err)
			}
			return
		}
		if hashTag(state) != host || hashTag(halt) != host || state == halt ||
			!strings.HasPrefix(state, redisstore.PrefixOf(st)+":{") || !strings.HasPrefix(halt, redisstore.PrefixOf(st)+":{") {
			t.Fatalf("Keys(%q) under %q = %q, %q; want distinct keys tagged with the host", host, prefix, state, halt)
		}
	})
}

// FuzzStoredField overwrites one field of a valid packed state with any
// 8 bytes, then runs every operation (fuzzOps).
func FuzzStoredField(f *testing.F) {
	for _, seed := range []struct {
		field string
		bits  uint64
	}{
		{"bf", bytesOf("banana")}, {"bs", bitsOf(2)}, {"bo", bitsOf(1e300)}, {"lr", bitsOf(1e-300)}, {"lt", bitsOf(-1e15)},
		{"lp", bitsOf(99999999999999999)}, {"lx", bitsOf(16)}, {"n3", bitsOf(7)}, {"bg", bitsOf(-1)}, {"la", bitsOf(math.Inf(1))},
		{"lq", bitsOf(math.NaN())}, {"lf", bitsOf(1)}, {"lcr", bitsOf(5e-7)},
	} {
		f.Add(seed.field, seed.bits)
	}
	client := redistest.Client(f)
	st := fuzzStore(f, client)
	var n atomic.Int64
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, field string, bits uint64) {
		host := "f" + strconv.FormatInt(n.Add(1), 10) + ".example"
		stateKey, haltKey, _ := redisstore.KeysOf(st, host)
		defer client.Del(ctx, stateKey, haltKey)
		if err := corruptField(ctx, client, stateKey, field, bits); err != nil {
			t.Fatal(err)
		}
		fuzzOps(t, st, host, field+"="+strconv.FormatUint(bits, 16))
	})
}

// FuzzStoredState writes any bytes as a host's state, then runs every
// operation (fuzzOps).
func FuzzStoredState(f *testing.F) {
	valid := validState()
	for _, seed := range []string{
		valid, valid + "tail", valid[:redisstore.StateSize-1], "", "\x01", "\x01\x03", "\x02" + valid[1:],
		valid[:1] + "\x00" + valid[2:], valid[:1] + "\x01" + valid[2:], valid[:1] + "\x02" + valid[2:], "hello",
	} {
		f.Add([]byte(seed))
	}
	client := redistest.Client(f)
	st := fuzzStore(f, client)
	var n atomic.Int64
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, raw []byte) {
		host := "g" + strconv.FormatInt(n.Add(1), 10) + ".example"
		stateKey, haltKey, _ := redisstore.KeysOf(st, host)
		defer client.Del(ctx, stateKey, haltKey)
		if err := client.Set(ctx, stateKey, raw, 0).Err(); err != nil {
			t.Fatal(err)
		}
		fuzzOps(t, st, host, strconv.Quote(string(raw)))
	})
}

func fuzzStore(f *testing.F, client *redis.Client) *redisstore.Store {
	st, err := redisstore.New(client, redisstore.Config{
		Prefix: redistest.Prefix(f), OnRedisError: redisstore.FailClosed, Timeout: testTimeout,
		HostState: hoststate.Config{Breaker: breaker.Config{FailureThreshold: 2}},
	})
	if err != nil {
		f.Fatal(err)
	}
	return st
}

// fuzzOps runs every operation on host: each returns a result or a typed
// error — never a script failure (a Lua error would be a bug), never a
// negative wait.
func fuzzOps(t testing.TB, st *redisstore.Store, host, what string) {
	t.Helper()
	ctx := context.Background()
	check := func(op string, err error) {
		t.Helper()
		var ce *redisstore.CorruptError
		var he *breaker.HaltError
		var oe *breaker.OpenError
		var de *ratelimit.DeadlineError
		switch {
		case err == nil, errors.As(err, &ce), errors.As(err, &he), errors.As(err, &oe), errors.As(err, &de):
		default:
			t.Fatalf("%s with %s: %v", op, what, err)
		}
	}
	dctx, cancel := context.WithTimeout(ctx, testTimeout)
	defer cancel()
	a, err := st.Admit(dctx, host)
	check("Admit", err)
	if a.Wait < 0 {
		t.Fatalf("Admit with %s: wait %v", what, a.Wait)
	}
	for _, o := range []classify.Outcome{classify.Throttled, classify.OK, classify.Transient, classify.Refused} {
		_, err := st.Record(ctx, host, a, classify.Result{Outcome: o})
		check("Record", err)
	}
	_, err = st.Status(ctx, host)
	check("State", err)
	check("SetCeiling", st.SetCeiling(ctx, host, 30))
	check("Resume", st.Resume(ctx, host))
}
