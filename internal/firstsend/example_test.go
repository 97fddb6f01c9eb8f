package firstsend_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/egresskit/egresskit/internal/firstsend"
	"github.com/egresskit/egresskit/internal/retrier"
	"github.com/egresskit/egresskit/retry"
)

// sender answers 200 to every request and says how each first attempt
// reached it.
type sender struct{}

func (sender) RoundTrip(req *http.Request) (*http.Response, error) {
	fmt.Println("RoundTrip, attempt", retrier.AttemptFrom(req.Context()))
	return ok(req), nil
}

func (sender) SendFirst(a firstsend.Attempt) (*http.Response, error) {
	fmt.Printf("SendFirst, key %q, attempt context %d\n", a.Key, retrier.AttemptFrom(a.Req.Context()))
	return ok(a.Req), nil
}

func ok(req *http.Request) *http.Response {
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("ok")), Request: req}
}

// A retrier.Transport over a Sender hands it the first attempt as the caller
// made it, with the key, instead of a copy of the request carrying the
// attempt in its context.
func Example() {
	t, err := retrier.New(sender{}, retry.Policy{MaxRetries: 2})
	if err != nil {
		panic(err)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://example.test/", nil)
	resp, err := firstsend.RoundTripKey(t, req, "example.test")
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode)
	// Output:
	// SendFirst, key "example.test", attempt context 0
	// 200
}
