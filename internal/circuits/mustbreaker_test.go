package circuits_test

import (
	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/internal/circuits"
)

// mustBreaker returns circuits.New(cfg), panicking on an invalid cfg: a
// test's fixture is valid.
func mustBreaker(cfg breaker.Config) *circuits.Set {
	s, err := circuits.New(cfg)
	if err != nil {
		panic(err)
	}
	return s
}
