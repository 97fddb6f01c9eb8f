package ratelimit_test

import (
	"context"
	"fmt"
	"time"

	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/ratelimit"
)

// A store pacing every host at 120 requests per minute: each admission
// says how long to wait before sending, half a second apart.
func Example() {
	store, err := hoststate.NewMemory(hoststate.Config{Limit: ratelimit.Config{PerMinute: 120}})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	for range 3 {
		adm, err := store.Admit(ctx, "example.com")
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(adm.Wait.Round(100 * time.Millisecond))
	}
	// Output:
	// 0s
	// 500ms
	// 1s
}

// DefaultConfig prints the defaults a zero Config stands for.
func ExampleDefaultConfig() {
	c := ratelimit.DefaultConfig()
	fmt.Println(c.PerMinute, c.Burst, c.Floor, c.MaxPause, c.IdleTTL)
	// Output:
	// 60 1 1 1h0m0s 10m0s
}
