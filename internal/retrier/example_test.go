package retrier_test

import (
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/internal/retrier"
	"github.com/egresskit/egresskit/retry"
)

func ExampleNew() {
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			http.Error(w, "try again", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintf(w, "hello on attempt %d", hits.Load())
	}))
	defer srv.Close()

	base := &http.Transport{}
	defer base.CloseIdleConnections()
	// The zero Policy retries 3 times; a short backoff keeps the example quick.
	rt, err := retrier.New(classifyHooks.NewTransport(base, classify.Config{}), retry.Policy{BaseDelay: 10 * time.Millisecond})
	if err != nil {
		log.Fatal(err)
	}
	client := &http.Client{Transport: rt}

	resp, err := client.Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, classify.Of(resp, nil).Outcome, string(body))
	// Output:
	// 200 ok hello on attempt 2
}
