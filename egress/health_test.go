package egress

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func defaultHealth(t *testing.T) HealthConfig {
	t.Helper()
	c, err := HealthConfig{}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestHealthScore(t *testing.T) {
	c := defaultHealth(t)
	t0 := time.Unix(1000, 0)
	tests := []struct {
		name       string
		steps      string // s = success, f = failure, at t0
		wantScore  float64
		wantQuar   bool
		wantDegrad bool
	}{
		{"untouched", "", 1, false, false},
		{"successes keep it perfect", "sssss", 1, false, false},
		{"one failure degrades", "f", 0.7, false, true},
		{"two failures", "ff", 0.49, false, true},
		{"three failures in a row quarantine", "fff", 0.343, true, true},
		{"a success resets the run", "ffsf", 0.7 * (0.49 + 0.3*0.51), false, true},
		{"the score alone can quarantine", "ffsff", 0.7 * 0.7 * (0.49 + 0.3*0.51), true, true},
		{"recovery by successes", "fssss", 1 - 0.3*math.Pow(0.7, 4), false, false},
	}
	for _, tt := range tests {
		h := newHealth()
		for _, s := range tt.steps {
			if s == 's' {
				h.success(t0, plainAttempt, &c)
			} else {
				h.failure(t0, plainAttempt, false, &c)
			}
		}
		if got := h.effective(t0, &c); !near(got, tt.wantScore) {
			t.Errorf("%s: score = %v, want %v", tt.name, got, tt.wantScore)
		}
		if h.quarantined != tt.wantQuar || h.degraded(t0, &c) != tt.wantDegrad {
			t.Errorf("%s: quarantined %v degraded %v, want %v %v", tt.name, h.quarantined, h.degraded(t0, &c), tt.wantQuar, tt.wantDegrad)
		}
	}
}

func TestHealthPenaltyFades(t *testing.T) {
	c := defaultHealth(t)
	t0 := time.Unix(1000, 0)
	h := newHealth()
	h.failure(t0, plainAttempt, false, &c) // 0.7
	tests := []struct {
		after time.Duration
		want  float64
	}{
		{0, 0.7},
		{time.Minute, 0.85},
		{2 * time.Minute, 0.925},
		{-time.Minute, 0.7}, // a clock going back changes nothing
	}
	for _, tt := range tests {
		if got := h.effective(t0.Add(tt.after), &c); !near(got, tt.want) {
			t.Errorf("effective(+%v) = %v, want %v", tt.after, got, tt.want)
		}
	}
}

func TestHealthQuarantineSchedule(t *testing.T) {
	c := defaultHealth(t)
	now := time.Unix(1000, 0)
	h := newHealth()
	for range 3 {
		h.failure(now, plainAttempt, false, &c)
	}
	want := []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second,
		80 * time.Second, 160 * time.Second, 320 * time.Second, 10 * time.Minute, 10 * time.Minute}
	for i, w := range want {
		if got := h.until.Sub(now); got != w {
			t.Fatalf("quarantine %d lasts %v, want %v", i+1, got, w)
		}
		if s := h.state(now.Add(w - 1)); s != stateQuarantined {
			t.Fatalf("quarantine %d: state before its end = %v, want quarantined", i+1, s)
		}
		now = h.until
		if s := h.state(now); s != stateHalfOpen {
			t.Fatalf("quarantine %d: state at its end = %v, want half-open", i+1, s)
		}
		// Results of requests sent before the quarantine are ignored.
		h.success(now, plainAttempt, &c)
		h.failure(now, plainAttempt, false, &c)
		if s := h.state(now); s != stateHalfOpen {
			t.Fatalf("quarantine %d: state after non-probe results = %v, want half-open", i+1, s)
		}
		h.beginProbe()
		if s := h.state(now); s != stateProbing {
			t.Fatalf("state with the probe in flight = %v, want probing", s)
		}
		h.failure(now, probeAttempt, false, &c)
	}

	// A neutral probe leaves the endpoint half-open; a successful one
	// readmits it to the healthy tier, at its lower edge.
	now = h.until
	h.beginProbe()
	h.neutral(probeAttempt)
	if s := h.state(now); s != stateHalfOpen {
		t.Fatalf("state after a neutral probe = %v, want half-open", s)
	}
	h.beginProbe()
	h.success(now, probeAttempt, &c)
	if s := h.state(now); s != stateActive || !near(h.effective(now, &c), 0.8) || h.degraded(now, &c) {
		t.Fatalf("after a successful probe: state %v score %v degraded %v, want active, 0.8, healthy", s, h.effective(now, &c), h.degraded(now, &c))
	}

	// Failing again soon continues the schedule; failing after a full
	// recovery starts it afresh.
	soon := now.Add(time.Second)
	g := h
	for range 3 {
		g.failure(soon, plainAttempt, false, &c)
	}
	if got := g.until.Sub(soon); got != 10*time.Minute {
		t.Errorf("quarantine soon after readmission lasts %v, want 10m (continued)", got)
	}
	later := now.Add(10 * time.Minute) // the penalty has faded to ~0
	for range 3 {
		h.failure(later, plainAttempt, false, &c)
	}
	if got := h.until.Sub(later); got != 5*time.Second {
		t.Errorf("quarantine after a full recovery lasts %v, want 5s (afresh)", got)
	}
}

// TestHealthReadmissionTrial checks the short schedule of a failed
// endpoint that is not quarantined: degraded at once, whatever its score;
// ProbeAfter (2s) after its last failure one trial request is due; the
// trial's success readmits it to the healthy tier, its failure makes it
// wait another ProbeAfter.
func TestHealthReadmissionTrial(t *testing.T) {
	c := defaultHealth(t)
	t0 := time.Unix(1000, 0)
	h := newHealth()
	h.failure(t0, plainAttempt, false, &c)
	steps := []struct {
		at       time.Duration
		degraded bool
		due      bool
	}{
		{0, true, false},
		{time.Second, true, false},
		{2*time.Second - 1, true, false},
		{2 * time.Second, false, true},
		{time.Minute, false, true},
	}
	for _, s := range steps {
		now := t0.Add(s.at)
		if got := h.degraded(now, &c); got != s.degraded {
			t.Errorf("%v after a failure: degraded = %v, want %v", s.at, got, s.degraded)
		}
		if got := h.trialDue(now, &c); got != s.due {
			t.Errorf("%v after a failure: trial due = %v, want %v", s.at, got, s.due)
		}
	}
	// One trial at a time: while it is in flight the endpoint is degraded.
	now := t0.Add(2 * time.Second)
	h.beginTrial()
	if h.trialDue(now, &c) || !h.degraded(now, &c) {
		t.Fatal("a second trial is due while the first is in flight")
	}
	// A plain success (a request sent before) does not readmit.
	h.success(now, plainAttempt, &c)
	if !h.degraded(now, &c) {
		t.Fatal("a plain success readmitted the endpoint")
	}
	// The trial fails: wait another ProbeAfter.
	h.failure(now, trialAttempt, false, &c)
	if h.trialDue(now.Add(2*time.Second-1), &c) || !h.trialDue(now.Add(2*time.Second), &c) {
		t.Fatal("after a failed trial the next one is not due exactly ProbeAfter later")
	}
	// The trial succeeds: healthy at once, however low the score was.
	now = now.Add(2 * time.Second)
	h.beginTrial()
	h.success(now, trialAttempt, &c)
	if h.degraded(now, &c) || h.trialDue(now.Add(time.Hour), &c) {
		t.Fatalf("after a successful trial: degraded %v, score %v; want healthy, no trial due", h.degraded(now, &c), h.effective(now, &c))
	}
	// A neutral trial (cancelled) leaves the next request to try.
	h.failure(now, plainAttempt, false, &c)
	later := now.Add(2 * time.Second)
	h.beginTrial()
	h.neutral(trialAttempt)
	if !h.trialDue(later, &c) {
		t.Fatal("after a neutral trial no trial is due")
	}
}

func TestHealthSlowSetup(t *testing.T) {
	c := defaultHealth(t)
	t0 := time.Unix(1000, 0)
	tests := []struct {
		setup time.Duration
		want  float64 // the score a long run of successes converges to
	}{
		{100 * time.Millisecond, 1},
		{2 * time.Second, 1},
		{4 * time.Second, 0.5},
		{8 * time.Second, 0.25},
	}
	for _, tt := range tests {
		h := newHealth()
		for range 200 {
			h.sampleSetup(tt.setup, &c)
			h.success(t0, plainAttempt, &c)
		}
		if got := h.effective(t0, &c); math.Abs(got-tt.want) > 1e-6 {
			t.Errorf("setup %v: score converges to %v, want %v", tt.setup, got, tt.want)
		}
	}
}

func TestHealthConfigRejects(t *testing.T) {
	for _, c := range []HealthConfig{
		{Smoothing: -0.1},
		{Smoothing: 1.5},
		{QuarantineBelow: 1},
		{QuarantineBelow: 0.5, DegradedBelow: 0.4},
		{QuarantineAfter: -1},
		{HalfLife: -time.Second},
		{QuarantineBaseDelay: time.Hour, QuarantineMaxDelay: time.Minute},
		{ProbeAfter: -time.Second},
	} {
		if _, err := c.withDefaults(); err == nil {
			t.Errorf("withDefaults(%+v) = nil error, want one", c)
		}
	}
}

// TestHealthSteadySuccess checks, over states reached by random runs of
// events, that wherever steady allows it, steadySuccess leaves the health
// exactly as success does, but for the time of a full score, which nothing
// reads.
func TestHealthSteadySuccess(t *testing.T) {
	c := defaultHealth(t)
	rng := rand.New(rand.NewPCG(1, 2))
	attempts := []attempt{plainAttempt, probeAttempt, trialAttempt}
	steadyStates := 0
	for run := range 200 {
		h := newHealth()
		now := time.Unix(1000, 0)
		for step := range 40 {
			a := attempts[rng.IntN(len(attempts))]
			if h.steady(a, &c) {
				steadyStates++
				want, got := h, h
				want.success(now, a, &c)
				got.steadySuccess()
				got.at = want.at
				if got != want {
					t.Fatalf("run %d step %d: steadySuccess gives %+v, success gives %+v", run, step, got, want)
				}
			}
			switch rng.IntN(8) {
			case 0, 1, 2:
				h.success(now, a, &c)
			case 3:
				h.failure(now, a, rng.IntN(4) == 0, &c)
			case 4:
				h.neutral(a)
			case 5:
				h.sampleSetup(time.Duration(rng.IntN(4))*time.Second, &c)
			case 6, 7:
				now = now.Add(time.Duration(rng.IntN(2*3600)) * time.Second)
			}
		}
	}
	if steadyStates < 500 {
		t.Errorf("only %d steady states visited", steadyStates)
	}
}
