package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/internal/redistest"
	"github.com/egresskit/egresskit/internal/sentinel"
	"github.com/egresskit/egresskit/ratelimit"
	"github.com/redis/go-redis/v9"
	"github.com/sony/gobreaker/v2"
)

// oracleRuns is how many random runs the Lua breaker is compared with
// gobreaker over; each run has oracleSteps steps.
const (
	oracleRuns  = 200
	oracleSteps = 60
)

// TestLuaBreakerSameAsGobreaker drives the Lua breaker on a real
// redis-server and a gobreaker v2 TwoStepCircuitBreaker with the same
// settings through the same random runs of admissions, outcomes (some
// recorded twice, some late, after the circuit changed, some never) and
// clock steps around the open timeout, and checks after every step that
// both admit the same attempts (and the same probes) and agree on the
// state and on the counts: requests, exclusions, consecutive successes
// and failures (the hash's bq, bx, bk and bf). The scripts take the test's
// clock, which synctest moves for both.
//
// What the Lua breaker adds to gobreaker is left out of the runs, and
// pinned by the hoststatetest scenarios instead: halts (no Refused), the
// throttle rule (no Throttled), pacing (a rate that never binds), idle
// eviction (off) and the probe lease (longer than any run).
func TestLuaBreakerSameAsGobreaker(t *testing.T) {
	client := redistest.Client(t)
	for seed := range uint64(oracleRuns) {
		if err := compareWithGobreaker(t, client, newScripts(), seed); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
	}
}

// TestLuaBreakerOracleCatchesDefects plants defects in the scripts'
// source by textual substitution, loads the mutated scripts into a Store,
// and checks that the comparison with gobreaker fails for each.
func TestLuaBreakerOracleCatchesDefects(t *testing.T) {
	client := redistest.Client(t)
	mutations := []struct {
		name, from, to string
	}{
		{"threshold one too high", "if b.fl >= THRESHOLD then setState(OPENED) end", "if b.fl > THRESHOLD then setState(OPENED) end"},
		{"half-open admits one probe too many", "if b.s == HALFOPEN and b.q - b.x >= PROBES then", "if b.s == HALFOPEN and b.q - b.x > PROBES then"},
		{"half-open closes one success too early", "if b.s == HALFOPEN and b.k >= PROBES then setState(CLOSED) end", "if b.s == HALFOPEN and b.k + 1 >= PROBES then setState(CLOSED) end"},
		{"open period ends one microsecond early", "if b.s == OPENED and b.o < now then setState(HALFOPEN) end", "if b.s == OPENED and b.o <= now then setState(HALFOPEN) end"},
		{"neutral outcome not excluded", "      b.x = b.x + 1\n", "\n"},
	}
	for _, m := range mutations {
		t.Run(m.name, func(t *testing.T) {
			src := luaClock + luaCommon + luaAdmit + luaRecord + luaState
			if n := strings.Count(src, m.from); n != 1 {
				t.Fatalf("%q occurs %d times in the scripts, want once", m.from, n)
			}
			sc := scriptsWith(func(s string) string { return strings.Replace(s, m.from, m.to, 1) })
			for seed := range uint64(oracleRuns) {
				if err := compareWithGobreaker(t, client, sc, seed); err != nil {
					t.Logf("caught at seed %d: %v", seed, err)
					return
				}
			}
			t.Errorf("the comparison passed %d runs of the mutated scripts", oracleRuns)
		})
	}
}

// compareWithGobreaker runs one random run of seed on a Store using sc
// and on gobreaker, and returns the first difference.
func compareWithGobreaker(t *testing.T, client *redis.Client, sc scripts, seed uint64) (failed error) {
	t.Helper()
	prefix := redistest.Prefix(t)
	synctest.Test(t, func(t *testing.T) {
		failed = compareRun(client, prefix, sc, seed)
	})
	return failed
}

func compareRun(client *redis.Client, prefix string, sc scripts, seed uint64) error {
	const host = "oracle.example"
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(seed, 29))
	cfg := breaker.Config{
		FailureThreshold: 1 + rng.IntN(4),
		HalfOpenProbes:   1 + rng.IntN(3),
		OpenTimeout:      time.Minute,
		IdleTTL:          -1,
	}
	st, err := New(client, Config{
		Prefix: prefix + strconv.FormatUint(seed, 10),
		HostState: hoststate.Config{
			Breaker: cfg,
			Limit:   ratelimit.Config{PerMinute: 1e12, Burst: 1000, IdleTTL: -1},
		},
		OnRedisError: FailClosed,
		Timeout:      5 * time.Second,
		ProbeLease:   1000 * time.Hour,
		Now:          time.Now,
		// Every admission asks the script, which counts it as
		// gobreaker counts requests (a lease's are admitted locally).
		LeaseWindow: -1,
	})
	if err != nil {
		return err
	}
	st.sc = sc
	k, err := st.keysOf(host)
	if err != nil {
		return err
	}
	defer client.Del(ctx, k.state, k.halt)

	neutral := errors.New("neutral")
	gb := gobreaker.NewTwoStepCircuitBreaker[struct{}](gobreaker.Settings{
		MaxRequests: uint32(cfg.HalfOpenProbes),
		Timeout:     cfg.OpenTimeout,
		ReadyToTrip: func(c gobreaker.Counts) bool {
			return c.ConsecutiveFailures >= uint32(cfg.FailureThreshold)
		},
		IsExcluded: func(err error) bool { return err == neutral },
	})
	type admitted struct {
		a    hoststate.Admission
		done func(error)
	}
	outcomes := []classify.Outcome{classify.OK, classify.Transient, classify.Permanent, classify.Canceled}
	var open []admitted
	for step := range oracleSteps {
		var did string
		switch op := rng.IntN(10); {
		case op < 4:
			a, err := st.Admit(ctx, host)
			done, gerr := gb.Allow()
			did = fmt.Sprintf("admit: %v, gobreaker %v", err, gerr)
			if err != nil && !errors.Is(err, sentinel.ErrOpen) {
				return fmt.Errorf("step %d: Admit = %v", step, err)
			}
			if (err == nil) != (gerr == nil) {
				return fmt.Errorf("step %d: Admit = %v, gobreaker %v", step, err, gerr)
			}
			if err == nil {
				if probe := gb.State() == gobreaker.StateHalfOpen; a.Probe != probe {
					return fmt.Errorf("step %d: admission Probe %v, gobreaker half-open %v", step, a.Probe, probe)
				}
				if rng.IntN(10) > 0 { // else never recorded
					open = append(open, admitted{a, done})
				}
			}
		case op < 8 && len(open) > 0:
			i := rng.IntN(len(open))
			a := open[i]
			if rng.IntN(8) > 0 { // else recorded again later
				open = append(open[:i], open[i+1:]...)
			}
			o := outcomes[rng.IntN(len(outcomes))]
			did = "record " + o.String()
			if _, err := st.Record(ctx, host, a.a, classify.Result{Outcome: o}); err != nil {
				return fmt.Errorf("step %d: Record = %v", step, err)
			}
			var gerr error
			switch o {
			case classify.Transient:
				gerr = errors.New("failure")
			case classify.Permanent, classify.Canceled:
				gerr = neutral
			}
			a.done(gerr)
		case op < 9:
			did = "sleep the open timeout"
			time.Sleep(cfg.OpenTimeout) // exactly: the open period has not passed yet
		default:
			d := time.Duration(rng.Int64N(int64(2 * cfg.OpenTimeout))).Truncate(time.Microsecond)
			did = "sleep " + d.String()
			time.Sleep(d)
		}
		hs, err := st.Status(ctx, host)
		if err != nil {
			return fmt.Errorf("step %d (%s): Store = %v", step, did, err)
		}
		if want := breaker.State(gb.State()); hs.Breaker != want {
			return fmt.Errorf("step %d (%s): state %v, gobreaker %v", step, did, hs.Breaker, want)
		}
		got, err := luaCounts(ctx, client, k.state)
		if err != nil {
			return fmt.Errorf("step %d: %v", step, err)
		}
		c := gb.Counts()
		if want := [4]uint32{c.Requests, c.TotalExclusions, c.ConsecutiveSuccesses, c.ConsecutiveFailures}; got != want {
			return fmt.Errorf("step %d (%s): counts (requests, exclusions, successes, failures) %v, gobreaker %v", step, did, got, want)
		}
	}
	return nil
}

// luaCounts reads the breaker's counts from the host's state: requests bq,
// exclusions bx, consecutive successes bk and failures bf. An open period
// that has ended but is not yet noticed by a script (the Store script
// only reads) counts as the cleared counts the next script will write,
// as gobreaker clears them when its Store notices.
func luaCounts(ctx context.Context, client *redis.Client, key string) ([4]uint32, error) {
	raw, err := client.Get(ctx, key).Result()
	if err == redis.Nil {
		return [4]uint32{}, nil
	}
	if err != nil {
		return [4]uint32{}, err
	}
	flags, f, err := UnpackState(raw)
	if err != nil {
		return [4]uint32{}, fmt.Errorf("%s: %v", key, err)
	}
	if flags&1 == 0 || (f["bs"] == 2 && f["bo"] < float64(time.Now().UnixMicro())) {
		return [4]uint32{}, nil
	}
	return [4]uint32{uint32(f["bq"]), uint32(f["bx"]), uint32(f["bk"]), uint32(f["bf"])}, nil
}
