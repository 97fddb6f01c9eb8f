package redisstore_test

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
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
		{"hash under the state", func(s, h string) error { return client.HSet(ctx, s, "bs", "0").Err() }, "state", "wrongtype"},
		{"list under the halt", func(s, h string) error { return client.LPush(ctx, h, "x").Err() }, "halt", "wrongtype"},
		{"halt not a time", func(s, h string) error { return client.Set(ctx, h, "yesterday", 0).Err() }, "halt", "value"},
		{"negative halt", func(s, h string) error { return client.Set(ctx, h, "-5", 0).Err() }, "halt", "value"},
		{"garbage failure count", func(s, h string) error { return corruptField(ctx, client, s, "bf", bytesOf("banana")) }, "state", "bf"},
		{"fractional state", func(s, h string) error { return corruptField(ctx, client, s, "bs", bitsOf(1.5)) }, "state", "bs"},
		{"unknown breaker state", func(s, h string) error { return corruptField(ctx, client, s, "bs", bitsOf(7)) }, "state", "bs"},
		{"NaN rate", func(s, h string) error { return corruptField(ctx, client, s, "lr", bitsOf(math.NaN())) }, "state", "lr"},
		{"infinite tokens", func(s, h string) error { return corruptField(ctx, client, s, "lt", bitsOf(math.Inf(1))) }, "state", "lt"},
		{"zero rate", func(s, h string) error { return corruptField(ctx, client, s, "lr", bitsOf(0)) }, "state", "lr"},
		{"negative count", func(s, h string) error { return corruptField(ctx, client, s, "n3", bitsOf(-1)) }, "state", "n3"},
		{"huge time", func(s, h string) error { return corruptField(ctx, client, s, "lps", bitsOf(1e300)) }, "state", "lps"},
		{"fields missing", func(s, h string) error {
			return client.Set(ctx, s, validState()[:redisstore.StateSize-8], 0).Err()
		}, "state", "incomplete"},
		{"a string of text", func(s, h string) error { return client.Set(ctx, s, "hello", 0).Err() }, "state", "incomplete"},
		{"unknown version", func(s, h string) error {
			return client.Set(ctx, s, "\x02"+validState()[1:], 0).Err()
		}, "state", "version"},
		{"unknown flags", func(s, h string) error {
			v := validState()
			return client.Set(ctx, s, v[:1]+"\x07"+v[2:], 0).Err()
		}, "state", "flags"},
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
				// No halt to resume: the state is not read; the answer is
				// that the host is not halted, not that its state is corrupt.
				if err := st.Resume(ctx, host); !errors.Is(err, hoststate.ErrNotHalted) {
					t.Errorf("Resume of a host not halted = %v, want ErrNotHalted", err)
				}
				// A refusal halts the host even though its state is corrupt.
				_, err = st.Record(ctx, host, hoststate.Admission{}, classify.Result{Outcome: classify.Refused})
				check("Record(Refused)", err)
				if n, err := client.Exists(ctx, haltKey).Result(); err != nil || n != 1 {
					t.Errorf("halt key after a refusal on a corrupt state: exists = %d, %v; want 1", n, err)
				}
				client.Del(ctx, stateKey)
				if _, err := st.Admit(ctx, host); !errors.Is(err, egresskit.ErrHalted) {
					t.Errorf("Admit once the state is deleted = %v, want ErrHalted (the halt was kept)", err)
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

// validState is a packed state (breaker and limiter) that every script
// accepts.
func validState() string {
	return redisstore.PackState(3, map[string]float64{"bg": 1, "bu": 1, "lr": 60, "lc": 60, "la": 1, "lw": 1, "lu": 1})
}

// bitsOf is the 8 bytes of a double, as a packed state holds it.
func bitsOf(f float64) uint64 { return math.Float64bits(f) }

// bytesOf is the 8 bytes that start with text (little-endian).
func bytesOf(text string) uint64 {
	var b [8]byte
	copy(b[:], text)
	return binary.LittleEndian.Uint64(b[:])
}

// corruptField writes a valid packed state, then overwrites the 8 bytes
// of one field with bits (nothing for a field the state does not have).
func corruptField(ctx context.Context, c *redis.Client, key, field string, bits uint64) error {
	b := []byte(validState())
	if at := redisstore.StateOffset(field); at >= 0 {
		binary.LittleEndian.PutUint64(b[at:], bits)
	}
	return c.Set(ctx, key, string(b), 0).Err()
}

// TestUnknownBytesKept: bytes after the packed state of this version (a
// newer version's fields) are left alone.
func TestUnknownBytesKept(t *testing.T) {
	ctx := context.Background()
	client := redistest.Client(t)
	st := mustState(t, redistest.Addr(t), redisstore.Config{Prefix: redistest.Prefix(t), Timeout: testTimeout})
	stateKey, _, _ := redisstore.KeysOf(st, "a.example")
	if err := client.Set(ctx, stateKey, validState()+"future", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Admit(ctx, "a.example"); err != nil {
		t.Errorf("Admit with unknown bytes = %v", err)
	}
	got, _ := client.Get(ctx, stateKey).Result()
	if !strings.HasSuffix(got, "future") || len(got) != redisstore.StateSize+len("future") || got == validState()+"future" {
		t.Errorf("state after Admit = %q, want it updated and the unknown bytes kept", got)
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
