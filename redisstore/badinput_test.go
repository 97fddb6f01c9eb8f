package redisstore_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/internal/redistest"
	"github.com/egresskit/egresskit/redisstore"
	"github.com/redis/go-redis/v9"
)

// TestForeignValues writes values another program might have left under
// our keys. Every operation reports a *CorruptError naming the key and
// changes nothing — under FailOpen too, since falling back would ignore the
// fleet's state — and no panic; a Refused outcome still halts the host.
func TestForeignValues(t *testing.T) {
	ctx := context.Background()
	client := redistest.Client(t)
	const host = "victim.example:8443"
	tests := []struct {
		name   string
		setup  func(state, halt string) error
		key    string // "state" or "halt"
		reason string
	}{
		{"string under the hash", func(s, h string) error { return client.Set(ctx, s, "hello", 0).Err() }, "state", "wrongtype"},
		{"list under the halt", func(s, h string) error { return client.LPush(ctx, h, "x").Err() }, "halt", "wrongtype"},
		{"halt not a time", func(s, h string) error { return client.Set(ctx, h, "yesterday", 0).Err() }, "halt", "value"},
		{"negative halt", func(s, h string) error { return client.Set(ctx, h, "-5", 0).Err() }, "halt", "value"},
		{"garbage failure count", func(s, h string) error { return corruptField(ctx, client, s, "bf", "banana") }, "state", "bf"},
		{"fractional state", func(s, h string) error { return corruptField(ctx, client, s, "bs", "1.5") }, "state", "bs"},
		{"unknown breaker state", func(s, h string) error { return corruptField(ctx, client, s, "bs", "7") }, "state", "bs"},
		{"NaN rate", func(s, h string) error { return corruptField(ctx, client, s, "lr", "nan") }, "state", "lr"},
		{"infinite tokens", func(s, h string) error { return corruptField(ctx, client, s, "lt", "inf") }, "state", "lt"},
		{"zero rate", func(s, h string) error { return corruptField(ctx, client, s, "lr", "0") }, "state", "lr"},
		{"fields missing", func(s, h string) error { return client.HSet(ctx, s, "bu", "1").Err() }, "state", "incomplete"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// RecordDelay off: the OK must reach Redis to meet the key.
			st := mustState(t, redistest.Addr(t), redisstore.Config{Prefix: redistest.Prefix(t), Timeout: testTimeout, RecordDelay: -1})
			stateKey, haltKey, err := redisstore.KeysOf(st, host)
			if err != nil {
				t.Fatal(err)
			}
			if err := tt.setup(stateKey, haltKey); err != nil {
				t.Fatal(err)
			}
			want := stateKey
			if tt.key == "halt" {
				want = haltKey
			}
			check := func(op string, err error) {
				t.Helper()
				var ce *redisstore.CorruptError
				if !errors.Is(err, redisstore.ErrCorrupt) || !errors.As(err, &ce) || ce.Key != want || ce.Reason != tt.reason {
					t.Errorf("%s = %v, want *CorruptError{%q, %q}", op, err, want, tt.reason)
				}
			}
			_, err = st.Admit(ctx, host)
			check("Admit", err)
			_, err = st.Record(ctx, host, hoststate.Admission{}, classify.Result{Outcome: classify.OK})
			check("Record", err)
			_, err = st.Status(ctx, host)
			check("State", err)
			check("SetCeiling", st.SetCeiling(ctx, host, 10))
			if tt.key == "state" {
				// No halt to resume: the hash is not read; the answer is
				// that the host is not halted, not that its state is corrupt.
				if err := st.Resume(ctx, host); !errors.Is(err, hoststate.ErrNotHalted) {
					t.Errorf("Resume of a host not halted = %v, want ErrNotHalted", err)
				}
				// A refusal halts the host even though its hash is corrupt.
				_, err = st.Record(ctx, host, hoststate.Admission{}, classify.Result{Outcome: classify.Refused})
				check("Record(Refused)", err)
				if n, err := client.Exists(ctx, haltKey).Result(); err != nil || n != 1 {
					t.Errorf("halt key after a refusal on a corrupt hash: exists = %d, %v; want 1", n, err)
				}
				client.Del(ctx, stateKey)
				if _, err := st.Admit(ctx, host); !errors.Is(err, egresskit.ErrHalted) {
					t.Errorf("Admit once the hash is deleted = %v, want ErrHalted (the halt was kept)", err)
				}
			} else {
				if tt.reason == "wrongtype" {
					check("Resume", st.Resume(ctx, host))
					client.Del(ctx, haltKey)
				} else if err := st.Resume(ctx, host); err != nil {
					// A halt key of ours with a bad value is still a halt
					// an operator can lift.
					t.Errorf("Resume = %v, want nil", err)
				}
				if _, err := st.Admit(ctx, host); err != nil {
					t.Errorf("Admit once the key is deleted = %v, want admitted", err)
				}
			}
		})
	}
}

// corruptField builds a valid state hash, then overwrites one field.
func corruptField(ctx context.Context, c *redis.Client, key, field, value string) error {
	fields := map[string]string{
		"bs": "0", "bg": "1", "bq": "0", "bx": "0", "bk": "0", "bf": "0", "bo": "0", "bu": "1", "bp": "0",
		"lr": "60", "lc": "60", "lx": "0", "lp": "0", "lt": "0", "lf": "0", "la": "1", "lk": "0", "lw": "1", "lu": "1",
		"n0": "0", "n1": "0", "n2": "0", "n3": "0", "n4": "0", "n5": "0",
	}
	fields[field] = value
	return c.HSet(ctx, key, fields).Err()
}

// TestUnknownFieldsIgnored: fields the store does not know (a newer
// version's) are left alone.
func TestUnknownFieldsIgnored(t *testing.T) {
	ctx := context.Background()
	client := redistest.Client(t)
	st := mustState(t, redistest.Addr(t), redisstore.Config{Prefix: redistest.Prefix(t), Timeout: testTimeout})
	stateKey, _, _ := redisstore.KeysOf(st, "a.example")
	if err := client.HSet(ctx, stateKey, "future", "x").Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Admit(ctx, "a.example"); err != nil {
		t.Errorf("Admit with an unknown field = %v", err)
	}
	if got, _ := client.HGet(ctx, stateKey, "future").Result(); got != "x" {
		t.Errorf("unknown field = %q after Admit, want kept", got)
	}
}

func TestBadPrefix(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer client.Close()
	for _, prefix := range []string{"has space", "a{b", "a}b", "{tag}", "tab\there", "nl\n", "nul\x00", "\xff\xfe", "nbsp\u00a0", strings.Repeat("p", 129)} {
		_, err := redisstore.New(client, redisstore.Config{Prefix: prefix})
		var pe *redisstore.PrefixError
		if !errors.Is(err, egresskit.ErrInvalidConfig) || !errors.As(err, &pe) || pe.Prefix != prefix {
			t.Errorf("New(Prefix %q) = %v, want *PrefixError", prefix, err)
		}
	}
	for _, prefix := range []string{"", "egresskit", "crawl:prod", "team-a.v2", "ünï"} {
		if _, err := redisstore.New(client, redisstore.Config{Prefix: prefix}); err != nil {
			t.Errorf("New(Prefix %q) = %v, want nil", prefix, err)
		}
	}
}

// TestBadHost: hosts that cannot be a hash tag are refused before any
// Redis call (the client here points nowhere, under FailClosed).
func TestBadHost(t *testing.T) {
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer client.Close()
	st, err := redisstore.New(client, redisstore.Config{OnRedisError: redisstore.FailClosed})
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"", "a{b}.example", "x}.example", "{", "line\nbreak", "del\x7f", strings.Repeat("h", 1025)} {
		var he *redisstore.HostError
		_, err := st.Admit(ctx, host)
		if !errors.Is(err, redisstore.ErrInvalidHost) || !errors.As(err, &he) || he.Host != host {
			t.Errorf("Admit(%q) = %v, want *HostError", host, err)
		}
		if _, err := st.Record(ctx, host, hoststate.Admission{}, classify.Result{}); !errors.Is(err, redisstore.ErrInvalidHost) {
			t.Errorf("Record(%q) = %v, want ErrInvalidHost", host, err)
		}
		if err := st.Resume(ctx, host); !errors.Is(err, redisstore.ErrInvalidHost) {
			t.Errorf("Resume(%q) = %v, want ErrInvalidHost", host, err)
		}
		if err := st.SetCeiling(ctx, host, 1); !errors.Is(err, redisstore.ErrInvalidHost) {
			t.Errorf("SetCeiling(%q) = %v, want ErrInvalidHost", host, err)
		}
		if _, err := st.Status(ctx, host); !errors.Is(err, redisstore.ErrInvalidHost) {
			t.Errorf("State(%q) = %v, want ErrInvalidHost", host, err)
		}
	}
}

// hashTag returns the part of key Redis Cluster hashes: the content of the
// first {...} when not empty, else the whole key.
func hashTag(key string) string {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return key
	}
	j := strings.IndexByte(key[i+1:], '}')
	if j <= 0 {
		return key
	}
	return key[i+1 : i+1+j]
}

// TestKeysHashTag: a host's keys hash on exactly the host, colons, dots and
// brackets included, so each script touches one Cluster slot.
func TestKeysHashTag(t *testing.T) {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})
	defer client.Close()
	st, err := redisstore.New(client, redisstore.Config{Prefix: "crawl:prod"})
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"example.com", "example.com:8080", "[2001:db8::1]:443", "127.0.0.1:6379", "xn--bcher-kva.example", "a:b:c"} {
		state, halt, err := redisstore.KeysOf(st, host)
		if err != nil {
			t.Fatalf("Keys(%q) = %v", host, err)
		}
		if hashTag(state) != host || hashTag(halt) != host || !strings.HasPrefix(state, "crawl:prod:{") || state == halt {
			t.Errorf("Keys(%q) = %q, %q; want distinct crawl:prod:{%s}… keys tagged with the host", host, state, halt, host)
		}
	}
}

// TestClientTimeouts: New refuses a go-redis client whose socket I/O
// ignores context deadlines, since Timeout could not bound its calls.
func TestClientTimeouts(t *testing.T) {
	tests := []struct {
		name string
		opt  redis.Options
		ok   bool
	}{
		{"defaults", redis.Options{}, false},
		{"context deadlines", redis.Options{ContextTimeoutEnabled: true}, true},
		{"short socket timeouts", redis.Options{ReadTimeout: 20 * time.Millisecond, WriteTimeout: 20 * time.Millisecond}, true},
		{"long read timeout", redis.Options{ReadTimeout: time.Second, WriteTimeout: 20 * time.Millisecond}, false},
		{"no timeouts", redis.Options{ReadTimeout: -1, WriteTimeout: -1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opt := tt.opt
			opt.Addr = "127.0.0.1:1"
			c := redis.NewClient(&opt)
			defer c.Close()
			_, err := redisstore.New(c, redisstore.Config{})
			if got := err == nil; got != tt.ok || (err != nil && !errors.Is(err, redisstore.ErrClientTimeouts)) {
				t.Errorf("New = %v, want ok=%v", err, tt.ok)
			}
		})
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, ContextTimeoutEnabled: true})
	defer cc.Close()
	if _, err := redisstore.New(cc, redisstore.Config{}); err != nil {
		t.Errorf("New(cluster client) = %v", err)
	}
	if _, err := redisstore.New(nil, redisstore.Config{}); err == nil {
		t.Error("New(nil) = nil error")
	}
}
