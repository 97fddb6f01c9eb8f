package hoststate_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/egresskit/egresskit"
	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/hoststate"
)

func ExampleMemory() {
	s, err := hoststate.NewMemory(hoststate.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()

	// Before each attempt: halt, breaker, token.
	a, err := s.Admit(ctx, "example.com")
	if err != nil {
		panic(err)
	}
	time.Sleep(a.Wait) // honour the pacing wait (0 for the first attempt)

	// ... send the attempt; it is answered 403 naming the crawler ...
	eff, _ := s.Record(ctx, "example.com", a, classify.Result{Outcome: classify.Refused, Status: 403})
	fmt.Println("halted:", eff.Halted) // escalate to a human exactly when true

	_, err = s.Admit(ctx, "example.com")
	fmt.Println(errors.Is(err, egresskit.ErrHalted))

	_ = s.Resume(ctx, "example.com")
	_, err = s.Admit(ctx, "example.com")
	fmt.Println(err)
	// Output:
	// halted: true
	// true
	// <nil>
}
