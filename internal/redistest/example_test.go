package redistest_test

import (
	"fmt"

	"github.com/egresskit/egresskit/internal/redistest"
)

// Options gives client options that bound socket I/O by context deadlines,
// as redisstore requires, from "host:port" or a redis:// URL.
func ExampleOptions() {
	opt, err := redistest.Options("redis://127.0.0.1:6380/2")
	if err != nil {
		panic(err)
	}
	fmt.Println(opt.Addr, opt.DB, opt.ContextTimeoutEnabled)
	// Output:
	// 127.0.0.1:6380 2 true
}
