package redisstore

import "github.com/egresskit/egresskit/session/sessionstore"

// SessionKeys exposes a session's Redis keys to the external tests, which
// corrupt and inspect them.
type SessionKeys = sessionKeys

// SessionKeysOf returns the Redis keys of session id in st, a store made by
// NewSessionStore.
func SessionKeysOf(st sessionstore.Store, id string) (SessionKeys, error) {
	return st.(*sessionStore).keysOf(id)
}
