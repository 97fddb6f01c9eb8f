package classify_test

import "github.com/egresskit/egresskit"

// mustChain is egresskit.New for a Config the test knows to be valid.
func mustChain(cfg egresskit.Config) *egresskit.Transport {
	t, err := egresskit.New(cfg)
	if err != nil {
		panic(err)
	}
	return t
}
