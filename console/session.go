package console

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"math"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// tokenBits estimates a token's strength: its length times the bits of
// the smallest usual alphabet it is drawn from (hex, base64, printable
// ASCII); a token of fewer than 8 distinct characters counts 0.
func tokenBits(tok string) int {
	tok = strings.TrimRight(tok, "=")
	distinct := map[rune]bool{}
	hex, b64 := true, true
	for _, r := range tok {
		distinct[r] = true
		isHex := r >= '0' && r <= '9' || r >= 'a' && r <= 'f' || r >= 'A' && r <= 'F'
		isB64 := isHex || r >= 'g' && r <= 'z' || r >= 'G' && r <= 'Z' || strings.ContainsRune("+/-_", r)
		hex, b64 = hex && isHex, b64 && isB64
	}
	if len(distinct) < 8 {
		return 0
	}
	per := math.Log2(95)
	switch {
	case hex:
		per = 4
	case b64:
		per = 6
	}
	return int(float64(len(tok)) * per)
}

// maxSessions bounds the sessions kept; the oldest goes first.
const maxSessions = 1024

// sessions are the signed-in browsers: a session's cookie holds a random
// identifier, and the console keeps its SHA-256 with its expiry.
type sessions struct {
	ttl time.Duration
	now func() time.Time

	mu   sync.Mutex
	live map[[32]byte]time.Time // expiry by hashed identifier
}

func newSessions(ttl time.Duration, now func() time.Time) *sessions {
	return &sessions{ttl: ttl, now: now, live: make(map[[32]byte]time.Time)}
}

// create starts a session and returns its cookie value.
func (s *sessions) create() string {
	b := make([]byte, 32)
	rand.Read(b)
	id := hex.EncodeToString(b)
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, exp := range s.live {
		if !now.Before(exp) {
			delete(s.live, k)
		}
	}
	for len(s.live) >= maxSessions {
		var oldest [32]byte
		first := true
		for k, exp := range s.live {
			if first || exp.Before(s.live[oldest]) {
				oldest, first = k, false
			}
		}
		delete(s.live, oldest)
	}
	s.live[sha256.Sum256([]byte(id))] = now.Add(s.ttl)
	return id
}

// valid reports whether id is a live session.
func (s *sessions) valid(id string) bool {
	if len(id) != 64 {
		return false
	}
	k := sha256.Sum256([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	exp, ok := s.live[k]
	if ok && !s.now().Before(exp) {
		delete(s.live, k)
		return false
	}
	return ok
}

// end ends the session id.
func (s *sessions) end(id string) {
	k := sha256.Sum256([]byte(id))
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.live, k)
}

// guesses limits wrong tokens, by sign-in or bearer header: ten at once,
// then one a second; while none is left, no token is even compared, the
// right one included, so that the answers tell a guesser nothing.
type guesses struct{ l *rate.Limiter }

func newGuesses() guesses { return guesses{rate.NewLimiter(1, 10)} }

// open reports whether a token may be checked now.
func (g guesses) open(now time.Time) bool { return g.l.TokensAt(now) >= 1 }

// wrong counts a wrong token.
func (g guesses) wrong(now time.Time) { g.l.AllowN(now, 1) }
