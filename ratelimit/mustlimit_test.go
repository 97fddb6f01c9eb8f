package ratelimit_test

import (
	"github.com/egresskit/egresskit/ratelimit"
)

// mustLimit returns ratelimit.New(cfg), panicking on an invalid cfg: a
// test's fixture is valid.
func mustLimit(cfg ratelimit.Config) *ratelimit.Set {
	s, err := ratelimit.New(cfg)
	if err != nil {
		panic(err)
	}
	return s
}
