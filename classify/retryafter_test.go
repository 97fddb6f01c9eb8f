package classify_test

import (
	"math"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/egresskit/egresskit/classify"
)

func TestParseRetryAfter(t *testing.T) {
	at := func(d time.Duration) time.Time { return testNow.Add(d) }
	epoch := func(d time.Duration) string { return strconv.FormatInt(at(d).Unix(), 10) }
	tests := []struct {
		name   string
		header http.Header
		want   time.Duration
		ok     bool
	}{
		// Retry-After, delay-seconds.
		{"seconds", hdr("Retry-After", "120"), 2 * time.Minute, true},
		{"zero", hdr("Retry-After", "0"), 0, true},
		{"spaces", hdr("Retry-After", " 30\t"), 30 * time.Second, true},
		{"leading zeros", hdr("Retry-After", "007"), 7 * time.Second, true},
		{"one day", hdr("Retry-After", "86400"), 24 * time.Hour, true},
		{"one day and a second", hdr("Retry-After", "86401"), 24*time.Hour + time.Second, true},
		{"beyond any cap", hdr("Retry-After", "99999999999"), classify.MaxRetryAfter, true},
		{"overflow", hdr("Retry-After", "999999999999"), classify.MaxRetryAfter, true},
		{"huge", hdr("Retry-After", "99999999999999999999999999999"), classify.MaxRetryAfter, true},
		{"negative", hdr("Retry-After", "-5"), 0, false},
		{"plus sign", hdr("Retry-After", "+5"), 0, false},
		{"fraction rounds up", hdr("Retry-After", "1.5"), 2 * time.Second, true},
		{"whole fraction", hdr("Retry-After", "2.0"), 2 * time.Second, true},
		{"small fraction", hdr("Retry-After", "0.001"), time.Second, true},
		{"empty fraction", hdr("Retry-After", "2."), 0, false},
		{"no integer part", hdr("Retry-After", ".5"), 0, false},
		{"two points", hdr("Retry-After", "1.2.3"), 0, false},
		{"trailing garbage", hdr("Retry-After", "5s"), 0, false},
		{"empty", hdr("Retry-After", ""), 0, false},
		{"garbage date", hdr("Retry-After", "Tue, 99 Foo"), 0, false},
		{"absent", http.Header{}, 0, false},
		{"nil header", nil, 0, false},
		{"first of two", hdr("Retry-After", "3", "Retry-After", "9"), 3 * time.Second, true},

		// Retry-After, HTTP-date in the three forms.
		{"IMF-fixdate", hdr("Retry-After", at(90*time.Second).Format(http.TimeFormat)), 90 * time.Second, true},
		{"RFC 850", hdr("Retry-After", "Sunday, 29-Nov-26 12:01:30 GMT"), 90 * time.Second, true},
		{"asctime", hdr("Retry-After", "Sun Nov 29 12:01:30 2026"), 90 * time.Second, true},
		{"past date", hdr("Retry-After", at(-time.Hour).Format(http.TimeFormat)), 0, true},
		{"now", hdr("Retry-After", testNow.Format(http.TimeFormat)), 0, true},
		{"date two days ahead", hdr("Retry-After", at(48*time.Hour).Format(http.TimeFormat)), 48 * time.Hour, true},
		{"date far ahead", hdr("Retry-After", "Fri, 31 Dec 9999 23:59:59 GMT"), classify.MaxRetryAfter, true},

		// IETF RateLimit, structured form.
		{"ratelimit exhausted", hdr("RateLimit", `"default";r=0;t=30`), 30 * time.Second, true},
		{"ratelimit token name", hdr("RateLimit", `default;r=0;t=10`), 10 * time.Second, true},
		{"ratelimit spaces", hdr("RateLimit", ` "default" ; r=0 ; t=12 `), 12 * time.Second, true},
		{"ratelimit remaining", hdr("RateLimit", `"default";r=5;t=30`), 0, false},
		{"ratelimit no remaining", hdr("RateLimit", `"default";t=30`), 0, false},
		{"ratelimit longest exhausted", hdr("RateLimit", `"burst";r=0;t=5, "day";r=0;t=3600`), time.Hour, true},
		{"ratelimit only exhausted counts", hdr("RateLimit", `"burst";r=0;t=5, "day";r=10;t=3600`), 5 * time.Second, true},
		{"ratelimit two fields", hdr("RateLimit", `"burst";r=3;t=5`, "RateLimit", `"day";r=0;t=60`), time.Minute, true},
		{"ratelimit quoted comma", hdr("RateLimit", `"a,b;c";r=0;t=8`), 8 * time.Second, true},
		{"ratelimit longer than a day", hdr("RateLimit", `"day";r=0;t=90000`), 25 * time.Hour, true},
		{"ratelimit beyond any cap", hdr("RateLimit", `"day";r=0;t=99999999999999999999`), classify.MaxRetryAfter, true},
		{"ratelimit garbage", hdr("RateLimit", `;;==,,"`), 0, false},
		// IETF RateLimit, older dictionary form and separate fields.
		{"ratelimit dictionary", hdr("RateLimit", "limit=10, remaining=0, reset=30"), 30 * time.Second, true},
		{"ratelimit dictionary remaining", hdr("RateLimit", "limit=10, remaining=3, reset=30"), 0, false},
		{"ratelimit-reset", hdr("RateLimit-Reset", "30", "RateLimit-Remaining", "0"), 30 * time.Second, true},
		{"ratelimit-reset remaining", hdr("RateLimit-Reset", "30", "RateLimit-Remaining", "1"), 0, false},
		{"ratelimit-reset alone", hdr("RateLimit-Reset", "30"), 0, false},
		{"ratelimit-reset negative", hdr("RateLimit-Reset", "-30", "RateLimit-Remaining", "0"), 0, false},
		{"ratelimit-reset epoch", hdr("RateLimit-Reset", epoch(90*time.Second), "RateLimit-Remaining", "0"), 90 * time.Second, true},
		{"ratelimit-reset epoch past", hdr("RateLimit-Reset", epoch(-time.Hour), "RateLimit-Remaining", "0"), 0, true},
		{"ratelimit-reset fraction", hdr("RateLimit-Reset", "2.5", "RateLimit-Remaining", "0"), 3 * time.Second, true},

		// Legacy X-RateLimit-Reset.
		{"x-ratelimit seconds", hdr("X-RateLimit-Reset", "60", "X-RateLimit-Remaining", "0"), time.Minute, true},
		{"x-ratelimit epoch", hdr("X-RateLimit-Reset", epoch(2*time.Minute), "X-RateLimit-Remaining", "0"), 2 * time.Minute, true},
		{"x-ratelimit epoch past", hdr("X-RateLimit-Reset", epoch(-time.Minute), "X-RateLimit-Remaining", "0"), 0, true},
		{"x-ratelimit epoch fraction", hdr("X-RateLimit-Reset", epoch(time.Minute)+".250", "X-RateLimit-Remaining", "0"), 61 * time.Second, true},
		{"x-ratelimit epoch milliseconds", hdr("X-RateLimit-Reset", epoch(time.Minute)+"000", "X-RateLimit-Remaining", "0"), time.Minute, true},
		{"x-ratelimit beyond any cap", hdr("X-RateLimit-Reset", "99999999999999999999999", "X-RateLimit-Remaining", "0"), classify.MaxRetryAfter, true},

		// X-Rate-Limit-Reset (epoch seconds).
		{"x-rate-limit epoch", hdr("x-rate-limit-reset", epoch(5*time.Minute), "x-rate-limit-remaining", "0"), 5 * time.Minute, true},
		{"x-rate-limit remaining", hdr("x-rate-limit-reset", epoch(5*time.Minute), "x-rate-limit-remaining", "12"), 0, false},
		{"x-ratelimit remaining", hdr("X-RateLimit-Reset", "60", "X-RateLimit-Remaining", "7"), 0, false},
		{"x-ratelimit garbage", hdr("X-RateLimit-Reset", "soon", "X-RateLimit-Remaining", "0"), 0, false},

		// Precedence.
		{"retry-after wins", hdr("Retry-After", "10", "RateLimit", `"d";r=0;t=30`, "X-RateLimit-Reset", "50", "X-RateLimit-Remaining", "0"), 10 * time.Second, true},
		{"ratelimit before legacy", hdr("RateLimit", `"d";r=0;t=30`, "X-RateLimit-Reset", "50", "X-RateLimit-Remaining", "0"), 30 * time.Second, true},
		{"garbage retry-after falls back", hdr("Retry-After", "soon", "RateLimit", `"d";r=0;t=30`), 30 * time.Second, true},
	}
	for _, tc := range tests {
		got, ok := classify.ParseRetryAfter(tc.header, testNow)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%s: ParseRetryAfter(%v) = %v, %v, want %v, %v", tc.name, tc.header, got, ok, tc.want, tc.ok)
		}
	}
}

func TestParseQuota(t *testing.T) {
	epoch := func(d time.Duration) string { return strconv.FormatInt(testNow.Add(d).Unix(), 10) }
	// Delay-seconds are rounded up by the server: the requests left are
	// spread over the reset less half a second.
	left := func(rem, reset float64) float64 { return rem * 60 / (reset - 0.5) }
	tests := []struct {
		name   string
		header http.Header
		want   float64 // requests a minute
	}{
		{"none", http.Header{}, 0},
		{"ratelimit structured", hdr("RateLimit", `"default";r=5;t=30`), left(5, 30)},
		{"ratelimit tightest policy", hdr("RateLimit", `"burst";r=50;t=10, "day";r=1440;t=86400`), left(1440, 86400)},
		{"ratelimit dictionary", hdr("RateLimit", "limit=100, remaining=20, reset=60"), left(20, 60)},
		{"ratelimit spent is one request at the reset", hdr("RateLimit", `"default";r=0;t=30`), 2},
		{"x-ratelimit spent is one request at the reset", hdr("X-RateLimit-Remaining", "0", "X-RateLimit-Reset", "20"), 3},
		{"ratelimit reset now counts as half a second", hdr("RateLimit", `"default";r=3;t=0`), 360},
		{"ratelimit spent, reset now: a second", hdr("RateLimit", `"default";r=0;t=0`), 60},
		{"ratelimit-remaining and reset", hdr("RateLimit-Remaining", "30", "RateLimit-Reset", "60"), left(30, 60)},
		{"x-ratelimit epoch (GitHub)", hdr("X-RateLimit-Remaining", "4999", "X-RateLimit-Reset", epoch(time.Hour)), 4999.0 / 60},
		{"x-rate-limit epoch (X)", hdr("X-Rate-Limit-Remaining", "12", "X-Rate-Limit-Reset", epoch(15*time.Minute)), 0.8},
		{"remaining without reset", hdr("X-RateLimit-Remaining", "10"), 0},
		{"garbage remaining", hdr("X-RateLimit-Remaining", "lots", "X-RateLimit-Reset", "60"), 0},
		{"garbage reset", hdr("X-RateLimit-Remaining", "10", "X-RateLimit-Reset", "soon"), 0},
	}
	for _, tc := range tests {
		if got := classify.ParseQuota(tc.header, testNow); math.Abs(got-tc.want) > 1e-9*tc.want {
			t.Errorf("%s: ParseQuota(%v) = %v, want %v", tc.name, tc.header, got, tc.want)
		}
	}
}
