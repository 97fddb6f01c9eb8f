package breaker_test

import (
	"github.com/egresskit/egresskit/breaker"
)

// mustBreaker returns breaker.New(cfg), panicking on an invalid cfg: a
// test's fixture is valid.
func mustBreaker(cfg breaker.Config) *breaker.Set {
	s, err := breaker.New(cfg)
	if err != nil {
		panic(err)
	}
	return s
}
