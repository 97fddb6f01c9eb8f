package redisstore

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
)

// The error types behind the sentinels, for the external tests that check
// the details an error carries.
type (
	CorruptError     = corruptError
	EvictionError    = evictionError
	HostError        = hostError
	JournalError     = journalError
	PrefixError      = prefixError
	UnavailableError = unavailableError
)

// DefaultPrefix is the key prefix when Config.Prefix is empty.
const DefaultPrefix = defaultPrefix

// ReconnectInterval is how often, at most, on the Store's clock, a Store
// whose Redis refused connections dials it to see whether it is back.
const ReconnectInterval = reconnectInterval

// KeysOf returns the Redis keys holding host's state in s: the hash of its
// breaker and pacing, and the string holding its halt. It fails with an
// error wrapping ErrInvalidHost for a host that cannot be part of a key.
func KeysOf(s *Store, host string) (state, halt string, err error) {
	k, err := s.keysOf(host)
	return k.state, k.halt, err
}

// PrefixOf returns the key prefix s uses.
func PrefixOf(s *Store) string { return s.prefix }

// StateFields are the fields of a packed state (lua/common.lua), in order.
var StateFields = strings.Fields(packedFields())

// packedFields reads the field names from the prelude, so that the tests
// follow the Lua layout: version 1's, then its extension's.
func packedFields() string {
	names := func(decl string) string {
		_, rest, _ := strings.Cut(luaCommon, decl)
		names, _, _ := strings.Cut(rest, "'")
		return names
	}
	return names("local FIELDS = '") + " " + names("local EXTFIELDS = '")
}

// StateSize is the length of a packed state of this version: version 1's
// 42 fields and its extension's 9.
const StateSize = 2 + 8*51

// PackState returns the packed state of version 1 with flags and fields
// (the others 0).
func PackState(flags byte, fields map[string]float64) string {
	b := make([]byte, StateSize)
	b[0], b[1] = 1, flags
	for i, name := range StateFields {
		binary.LittleEndian.PutUint64(b[2+8*i:], math.Float64bits(fields[name]))
	}
	return string(b)
}

// StateOffset returns the offset of field's 8 bytes in a packed state,
// or -1.
func StateOffset(field string) int {
	for i, name := range StateFields {
		if name == field {
			return 2 + 8*i
		}
	}
	return -1
}

// UnpackState reads a packed state: its flags and its fields.
func UnpackState(raw string) (flags byte, fields map[string]float64, err error) {
	if len(raw) < StateSize || raw[0] != 1 {
		return 0, nil, fmt.Errorf("not a packed state of version 1: %q", raw)
	}
	fields = make(map[string]float64, len(StateFields))
	for i, name := range StateFields {
		fields[name] = math.Float64frombits(binary.LittleEndian.Uint64([]byte(raw[2+8*i:])))
	}
	return raw[1], fields, nil
}
