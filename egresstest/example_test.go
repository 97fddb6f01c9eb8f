package egresstest_test

import (
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/egresskit/egresskit/egresstest"
)

// A script replays declared answers, one per request, the last repeating.
func ExampleNewScript() {
	script := egresstest.NewScript(
		egresstest.Step{Status: http.StatusServiceUnavailable},
		egresstest.Step{Status: http.StatusTooManyRequests, Header: http.Header{"Retry-After": {"5"}}},
		egresstest.Step{Body: "<html>ok</html>"},
	)
	client := &http.Client{Transport: script}
	for range 4 {
		resp, err := client.Get("https://example.com/")
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%d %q %q\n", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	fmt.Println("requests:", script.Requests())
	fmt.Println("bodies left open:", script.OpenBodies())
	// Output:
	// 503 "" ""
	// 429 "5" ""
	// 200 "" "<html>ok</html>"
	// 200 "" "<html>ok</html>"
	// requests: 4
	// bodies left open: 0
}

// A throttle server is a real server on 127.0.0.1 answering 429.
func ExampleNewThrottleServer() {
	srv := egresstest.NewThrottleServer(30 * time.Second)
	defer srv.Close()

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get(srv.URL)
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, resp.Header.Get("Retry-After"), srv.Requests())
	// Output:
	// 429 30 1
}
