package breaker_test

import (
	"errors"
	"fmt"

	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/classify"
)

func Example() {
	s := breaker.New(breaker.Config{
		FailureThreshold: 3,
		OnStateChange: func(c breaker.StateChange) {
			fmt.Printf("%s: %v -> %v\n", c.Host, c.From, c.To)
		},
	})
	for range 3 {
		t, err := s.Allow("example.com")
		if err != nil {
			panic(err)
		}
		// ... send the attempt, classify it ...
		s.Done("example.com", t, classify.Result{Outcome: classify.Transient, Status: 503})
	}
	_, err := s.Allow("example.com")
	fmt.Println(errors.Is(err, breaker.ErrOpen))
	fmt.Printf("%+v\n", s.Counts())
	// Output:
	// example.com: closed -> open
	// true
	// {Closed:0 HalfOpen:0 Open:1 Halted:0}
}

func ExampleSet_Halt() {
	s := breaker.New(breaker.Config{})
	// A Refused outcome (a 403 naming the crawler, a challenge page):
	if s.Halt("example.com") {
		fmt.Println("halted; escalate once")
	}
	if !s.Halt("example.com") {
		fmt.Println("already halted; no second escalation")
	}
	_, err := s.Allow("example.com")
	fmt.Println(errors.Is(err, breaker.ErrHalted))

	s.Resume("example.com") // the operator's decision
	_, err = s.Allow("example.com")
	fmt.Println(err)
	// Output:
	// halted; escalate once
	// already halted; no second escalation
	// true
	// <nil>
}
