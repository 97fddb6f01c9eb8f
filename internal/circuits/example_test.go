package circuits_test

import (
	"errors"
	"fmt"

	"github.com/egresskit/egresskit/breaker"
	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/internal/circuits"
	"github.com/egresskit/egresskit/internal/sentinel"
)

func Example() {
	s, err := circuits.New(breaker.Config{
		FailureThreshold: 3,
		OnStateChange: func(c breaker.StateChange) {
			fmt.Printf("%s: %v -> %v\n", c.Host, c.From, c.To)
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for range 3 {
		t, err := s.Allow("example.com")
		if err != nil {
			panic(err)
		}
		// ... send the attempt, classify it ...
		s.Done("example.com", t, classify.Result{Outcome: classify.Transient, Status: 503})
	}
	_, err = s.Allow("example.com")
	fmt.Println(errors.Is(err, sentinel.ErrOpen))
	fmt.Printf("%+v\n", s.Counts())
	// Output:
	// example.com: closed -> open
	// true
	// {Closed:0 HalfOpen:0 Open:1 Halted:0}
}

func ExampleSet_Done_refused() {
	s, err := circuits.New(breaker.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	t1, _ := s.Allow("example.com")
	t2, _ := s.Allow("example.com")

	// Both attempts are answered 403 naming the crawler: Refused.
	refused := classify.Result{Outcome: classify.Refused, Status: 403}
	fmt.Println("first halts:", s.Done("example.com", t1, refused).Halted)
	fmt.Println("second halts:", s.Done("example.com", t2, refused).Halted)

	_, err = s.Allow("example.com")
	fmt.Println(errors.Is(err, sentinel.ErrHalted))

	s.Resume("example.com") // the operator's decision
	_, err = s.Allow("example.com")
	fmt.Println(err)
	// Output:
	// first halts: true
	// second halts: false
	// true
	// <nil>
}
