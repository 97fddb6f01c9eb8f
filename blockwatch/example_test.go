package blockwatch_test

import (
	"fmt"

	"github.com/egresskit/egresskit/blockwatch"
)

// The zero Config stands for these settings: 10 refusal-like answers to
// distinct URLs in a row, or 80 % of the last 20, flag a host.
func ExampleDefaultConfig() {
	c := blockwatch.DefaultConfig()
	fmt.Println(c.Run, c.Window, c.Share, c.Statuses, c.MaxHosts)
	// Output:
	// 10 20 0.8 [401 403] 10000
}
