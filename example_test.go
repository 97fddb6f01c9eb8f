package egresskit_test

import (
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/egresskit/egresskit"
)

// A crawler keeps its own http.Client and wraps the chain around it. Here a
// host refuses the crawler by name: the chain hands back the real 403,
// halts the host and tells a human; later requests to it are not sent.
func Example() {
	site := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/robots.txt":
			io.WriteString(w, "User-agent: *\nDisallow: /private\n")
		case "/members":
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, "ExampleBot is not allowed here")
		default:
			io.WriteString(w, "hello")
		}
	}))
	defer site.Close()

	// The zero Config is the recommended one: set the crawler's identity
	// and a hook for the human who looks at a refusal.
	chain, err := egresskit.New(egresskit.Config{
		UserAgent: "ExampleBot/1.0 (+https://example.org/bot)",
		OnEscalate: func(e egresskit.Escalation) {
			fmt.Printf("escalated: status %d, %q\n", e.Status, e.BodyHead)
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	client := &http.Client{Transport: chain}

	resp, err := client.Get(site.URL + "/")
	if err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, string(body))
	}

	_, err = client.Get(site.URL + "/private/page")
	fmt.Println("robots.txt disallows:", errors.Is(err, egresskit.ErrDisallowed))

	resp, err = client.Get(site.URL + "/members")
	if err == nil {
		resp.Body.Close()
		fmt.Println(resp.StatusCode, "halted:", egresskit.Halted(resp))
	}

	_, err = client.Get(site.URL + "/")
	fmt.Println("after the halt:", errors.Is(err, egresskit.ErrHalted))
	// Output:
	// 200 hello
	// robots.txt disallows: true
	// escalated: status 403, "ExampleBot is not allowed here"
	// 403 halted: true
	// after the halt: true
}
