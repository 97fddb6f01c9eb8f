package blockwatch_test

import (
	"fmt"

	"github.com/egresskit/egresskit"
)

// The zero Config stands for these settings, which egresskit.DefaultConfig
// prints: 10 refusal-like answers to distinct URLs in a row, or 80 % of the
// last 20, flag a host.
func Example() {
	c := egresskit.DefaultConfig().BlockWatch
	fmt.Println(c.Run, c.Window, c.Share, c.Statuses, c.MaxHosts)
	// Output:
	// 10 20 0.8 [401 403] 10000
}
