package console_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/console"
	"github.com/egresskit/egresskit/hoststate"
)

// ExampleNew mounts the console under /halts/ of an admin server, behind a
// bearer token, over an in-memory store in which one host was halted.
func ExampleNew() {
	ctx := context.Background()
	store, err := hoststate.NewMemory(hoststate.Config{})
	if err != nil {
		panic(err)
	}
	a, _ := store.Admit(ctx, "shop.example")
	store.Record(ctx, "shop.example", a, classify.Result{Outcome: classify.Refused, Status: 403, Reason: "challenge"})
	store.PutHalt(ctx, hoststate.Halt{Host: "shop.example", Status: 403, Reason: "challenge", URL: "https://shop.example/cart"})

	h, err := console.New(console.Config{Store: store, Token: "7Jq2vX9pLw4sKd8RmT3yNc6B"})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/halts/", http.StripPrefix("/halts", h))
	admin := httptest.NewServer(mux)
	defer admin.Close()

	req, _ := http.NewRequest("GET", admin.URL+"/halts/", nil)
	req.Header.Set("Authorization", "Bearer 7Jq2vX9pLw4sKd8RmT3yNc6B")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.Status, strings.Contains(string(page), "shop.example"), strings.Contains(string(page), "challenge"))
	// Output: 200 OK true true
}
