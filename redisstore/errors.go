package redisstore

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/egresskit/egresskit/internal/configerr"
	"github.com/redis/go-redis/v9"
)

// Sentinel errors, for a crawler author or an operator to match with
// errors.Is: each names what to act on. The errors the package returns
// wrap one of them and carry the details (the operation, the key, the
// server's message, the client's error) in their text.
var (
	// ErrUnavailable: Redis could not be reached or did not answer within
	// Config.Timeout, and the policy is FailClosed (or the operation,
	// Resume, needs Redis whatever the policy).
	ErrUnavailable = errors.New("redisstore: redis unavailable")
	// ErrCorrupt: a key of ours holds a value this package did not write
	// (another type, or fields that do not parse). Nothing is changed; an
	// operator must delete or fix the key.
	ErrCorrupt = errors.New("redisstore: corrupt state in redis")
	// ErrScript: a script failed on the server for a reason other than the
	// ones above (a server without scripting, or a bug).
	ErrScript = errors.New("redisstore: script failed")
	// ErrInvalidHost: a host key cannot be used in a key.
	ErrInvalidHost = errors.New("redisstore: invalid host")
	// ErrClientTimeouts: the client does not bound its socket I/O by the
	// context deadline, so Config.Timeout could not bound a call.
	ErrClientTimeouts = errors.New("redisstore: client ignores context deadlines")
	// ErrEvicting: the Redis server may evict keys that have no TTL (a
	// maxmemory-policy of allkeys-*), halts among them.
	ErrEvicting = errors.New("redisstore: redis evicts keys without a TTL")
)

// evictionError reports a Redis server whose maxmemory-policy may evict a
// halt. errors.Is(err, ErrEvicting) is true.
type evictionError struct {
	// Addr is the server's address.
	Addr string
	// ErrorPolicy is its maxmemory-policy, e.g. "allkeys-lru".
	Policy string
}

// Error returns "redisstore: redis ADDR has maxmemory-policy POLICY,
// which may evict halts; ...".
func (e *evictionError) Error() string {
	return "redisstore: redis " + e.Addr + " has maxmemory-policy " + e.Policy +
		", which may evict halts; use noeviction or a volatile-* policy (or Config.AllowEviction)"
}

// Unwrap returns ErrEvicting.
func (e *evictionError) Unwrap() error { return ErrEvicting }

// unavailableError reports an operation that could not reach Redis.
// errors.Is(err, ErrUnavailable) is true, and so is errors.As of its
// cause's types (a *net.OpError for "connection refused"), except a
// context error: a Redis timeout is not the caller's
// context.DeadlineExceeded. When a call ran out of time while the client
// kept failing to connect, Cause is the failed dial's error.
type unavailableError struct {
	// Op is the operation: "admit", "record", "resume", "ceiling",
	// "state" or "halt".
	Op string
	// Cause is the error of the Redis client.
	Cause error
}

// Error returns "redisstore: redis unavailable (OP): CAUSE".
func (e *unavailableError) Error() string {
	if e.Cause == nil {
		return "redisstore: redis unavailable (" + e.Op + ")"
	}
	return "redisstore: redis unavailable (" + e.Op + "): " + e.Cause.Error()
}

// Unwrap returns ErrUnavailable and Cause, unless Cause is a context
// error (or nil).
func (e *unavailableError) Unwrap() []error {
	if e.Cause == nil || errors.Is(e.Cause, context.DeadlineExceeded) || errors.Is(e.Cause, context.Canceled) {
		return []error{ErrUnavailable}
	}
	return []error{ErrUnavailable, e.Cause}
}

// corruptError reports a key holding a value this package did not write.
// errors.Is(err, ErrCorrupt) is true.
type corruptError struct {
	// Key is the Redis key.
	Key string
	// Reason is "wrongtype" (another type of value), "value" (a halt that
	// is not a time), "incomplete" (a state shorter than its fields),
	// "version" (a state of another version), "flags" (unknown parts), or
	// the name of the field out of its range.
	Reason string
}

// Error returns "redisstore: corrupt state in redis: key KEY: REASON".
func (e *corruptError) Error() string {
	return "redisstore: corrupt state in redis: key " + strconv.Quote(e.Key) + ": " + e.Reason
}

// Unwrap returns ErrCorrupt.
func (e *corruptError) Unwrap() error { return ErrCorrupt }

// scriptError reports a script that failed on the server.
// errors.Is(err, ErrScript) is true.
type scriptError struct {
	// Op is the operation, as in unavailableError.
	Op string
	// Msg is the server's error message.
	Msg string
}

// Error returns "redisstore: script failed (OP): MSG".
func (e *scriptError) Error() string {
	return "redisstore: script failed (" + e.Op + "): " + e.Msg
}

// Unwrap returns ErrScript.
func (e *scriptError) Unwrap() error { return ErrScript }

// prefixError reports an unusable Config.Prefix or SessionConfig.Prefix:
// a configuration New and NewSessionStore refuse, so
// errors.Is(err, egresskit.ErrInvalidConfig) is true.
type prefixError struct {
	// Prefix is the prefix refused.
	Prefix string
	// Reason says what is wrong, e.g. "contains a brace".
	Reason string
}

// Error returns "egresskit: invalid config: Prefix "P" REASON".
func (e *prefixError) Error() string {
	return configerr.ErrInvalid.Error() + ": Prefix " + strconv.Quote(e.Prefix) + " " + e.Reason
}

// Unwrap returns egresskit.ErrInvalidConfig.
func (e *prefixError) Unwrap() error { return configerr.ErrInvalid }

// hostError reports a host key that cannot be part of a Redis key.
// errors.Is(err, ErrInvalidHost) is true.
type hostError struct {
	// Host is the host key refused.
	Host string
	// Reason says what is wrong, e.g. "contains a brace".
	Reason string
}

// Error returns "redisstore: invalid host "H": REASON".
func (e *hostError) Error() string {
	return "redisstore: invalid host " + strconv.Quote(e.Host) + ": " + e.Reason
}

// Unwrap returns ErrInvalidHost.
func (e *hostError) Unwrap() error { return ErrInvalidHost }

// corruptPrefix starts the error replies of the scripts' corrupt().
const corruptPrefix = "EGRESSKIT_CORRUPT "

// redisError sorts an error of a script run into ErrCorrupt,
// ErrScript or nil (anything else: Redis is unavailable).
func redisError(op string, k keys, err error) error {
	var re redis.Error
	if !errors.As(err, &re) {
		return nil
	}
	msg := re.Error()
	if rest, ok := strings.CutPrefix(msg, corruptPrefix); ok {
		which, reason, _ := strings.Cut(rest, " ")
		reason, _, _ = strings.Cut(reason, " ")
		key := k.state
		switch which {
		case "halt":
			key = k.halt
		case "resumed":
			key = k.resumed
		}
		return &corruptError{Key: key, Reason: reason}
	}
	switch {
	case strings.HasPrefix(msg, "WRONGTYPE"):
		return &corruptError{Key: k.state, Reason: "wrongtype"}
	case strings.HasPrefix(msg, "ERR") && strings.Contains(msg, "script"),
		strings.HasPrefix(msg, "NOSCRIPT"), strings.HasPrefix(msg, "ERR unknown command"):
		return &scriptError{Op: op, Msg: msg}
	}
	// LOADING, BUSY, MASTERDOWN, READONLY, CLUSTERDOWN, TRYAGAIN, OOM,
	// NOAUTH, ...: the server cannot serve us now.
	return nil
}
