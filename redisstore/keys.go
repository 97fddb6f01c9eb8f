package redisstore

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// defaultPrefix is the key prefix when Config.Prefix or
// SessionConfig.Prefix is empty.
const defaultPrefix = "egresskit"

// Limits on the parts of a key.
const (
	maxPrefix = 128
	maxHost   = 1024
)

// checkPrefix reports why prefix cannot start our keys: it must be valid
// UTF-8 without spaces, control characters or braces (a brace would move
// the Cluster hash tag off the host).
func checkPrefix(prefix string) error {
	bad := func(reason string) error { return &prefixError{Prefix: prefix, Reason: reason} }
	switch {
	case len(prefix) > maxPrefix:
		return bad("longer than 128 bytes")
	case !utf8.ValidString(prefix):
		return bad("not valid UTF-8")
	}
	for _, r := range prefix {
		switch {
		case r == '{' || r == '}':
			return bad("contains a brace")
		case unicode.IsSpace(r):
			return bad("contains a space")
		case unicode.IsControl(r):
			return bad("contains a control character")
		}
	}
	return nil
}

// stateSuffix ends the key of a host's state, a packed string (see
// lua/common.lua); legacySuffix ended the hash that held it before, which
// Resume deletes (see the package documentation, "Keys").
const (
	stateSuffix  = "st"
	legacySuffix = "s"
)

// keys are the Redis keys of one host. Both carry the host as their hash
// tag, so a script that touches them touches one Cluster slot.
type keys struct {
	state   string // string: breaker and pacing, packed
	halt    string // string: when the halt began; no TTL
	resumed string // string: when the host was last resumed; no TTL
}

// keysOf returns host's keys, PREFIX:{HOST}:st, PREFIX:{HOST}:halt and
// PREFIX:{HOST}:resumed. A host that is empty, too long, or contains a
// brace or a control character is rejected with an error wrapping
// ErrInvalidHost: with a brace the hash tag would not be exactly the host.
func (s *Store) keysOf(host string) (keys, error) {
	if err := checkHost(host); err != nil {
		return keys{}, err
	}
	// One allocation for the three keys: "BASEst", "BASEhalt" and
	// "BASEresumed", where BASE is "PREFIX:{HOST}:".
	n := len(s.prefix) + len(host) + 4
	var b strings.Builder
	b.Grow(3*n + len(stateSuffix) + len("halt") + len("resumed"))
	for _, suffix := range [...]string{stateSuffix, "halt", "resumed"} {
		b.WriteString(s.prefix)
		b.WriteString(":{")
		b.WriteString(host)
		b.WriteString("}:")
		b.WriteString(suffix)
	}
	all := b.String()
	st, halt := n+len(stateSuffix), n+len(stateSuffix)+n+len("halt")
	return keys{state: all[:st], halt: all[st:halt], resumed: all[halt:]}, nil
}

func checkHost(host string) error {
	bad := func(reason string) error { return &hostError{Host: host, Reason: reason} }
	if host == "" {
		return bad("empty")
	}
	if len(host) > maxHost {
		return bad("longer than 1024 bytes")
	}
	for i := 0; i < len(host); i++ {
		switch c := host[i]; {
		case c == '{' || c == '}':
			return bad("contains a brace")
		case c < 0x20 || c == 0x7f:
			return bad("contains a control character")
		}
	}
	return nil
}
