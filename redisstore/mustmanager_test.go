package redisstore_test

import "github.com/egresskit/egresskit/session"

// mustManager returns session.New(c), panicking on an invalid c: a test's
// fixture is valid.
func mustManager(c session.Config) *session.Manager {
	m, err := session.New(c)
	if err != nil {
		panic(err)
	}
	return m
}
