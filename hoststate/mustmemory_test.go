package hoststate_test

import (
	"github.com/egresskit/egresskit/hoststate"
)

// mustMemory returns hoststate.NewMemory(cfg), panicking on an invalid
// cfg: a test's fixture is valid.
func mustMemory(cfg hoststate.Config) hoststate.Memory {
	m, err := hoststate.NewMemory(cfg)
	if err != nil {
		panic(err)
	}
	return m
}
