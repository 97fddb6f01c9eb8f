package redisstore

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

// KeysOf returns the Redis keys holding host's state in s: the hash of its
// breaker and pacing, and the string holding its halt. It fails with an
// error wrapping ErrInvalidHost for a host that cannot be part of a key.
func KeysOf(s *Store, host string) (state, halt string, err error) {
	k, err := s.keysOf(host)
	return k.state, k.halt, err
}

// PrefixOf returns the key prefix s uses.
func PrefixOf(s *Store) string { return s.prefix }
