package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/egresskit/egresskit/redisstore"
	"github.com/redis/go-redis/v9"
)

// nowhere returns an address of 127.0.0.1 where nothing listens.
func nowhere() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// A worker of a fleet shares its hosts' breakers, pacing and halts through
// Redis. The client must bound its socket I/O by context deadlines, so
// that no request waits on Redis longer than Config.Timeout. Here Redis is
// down: under the default FailOpen policy the crawl goes on with
// in-process state, and a warning says so.
func ExampleNew() {
	client := redis.NewClient(&redis.Options{Addr: nowhere(), ContextTimeoutEnabled: true, DialerRetries: 1})
	defer client.Close()
	st, err := redisstore.New(client, redisstore.Config{
		Prefix:    "crawl",
		OnWarning: func(w redisstore.Warning) { fmt.Println("warning:", w.Kind, "during", w.Op) },
	})
	if err != nil {
		panic(err)
	}
	a, err := st.Admit(context.Background(), "example.com")
	fmt.Println("admitted:", err == nil, "wait:", a.Wait)
	// Output:
	// warning: unchecked during config
	// warning: outage during admit
	// admitted: true wait: 0s
}

// Under FailClosed an unreachable Redis fails the attempt instead.
func ExampleFailClosed() {
	client := redis.NewClient(&redis.Options{Addr: nowhere(), ContextTimeoutEnabled: true, DialerRetries: 1})
	defer client.Close()
	st, err := redisstore.New(client, redisstore.Config{OnRedisError: redisstore.FailClosed})
	if err != nil {
		panic(err)
	}
	_, err = st.Admit(context.Background(), "example.com")
	fmt.Println(errors.Is(err, redisstore.ErrUnavailable))
	// Output:
	// true
}
