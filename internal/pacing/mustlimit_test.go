package pacing_test

import (
	"github.com/egresskit/egresskit/internal/pacing"
	"github.com/egresskit/egresskit/ratelimit"
)

// mustLimit returns pacing.New(cfg), panicking on an invalid cfg: a
// test's fixture is valid.
func mustLimit(cfg ratelimit.Config) *pacing.Set {
	s, err := pacing.New(cfg)
	if err != nil {
		panic(err)
	}
	return s
}
