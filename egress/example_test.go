package egress_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/egresskit/egresskit/egress"
)

// A Pool is the egress layer of an http.Client: each request leaves
// through the endpoint chosen for its host, and the Choice is recorded
// for telemetry.
func Example() {
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello")
	}))
	defer target.Close()

	pool, err := egress.New(egress.Config{Endpoints: []egress.Endpoint{
		{ID: "route-1", Proxy: "direct", Capacity: 8},
		{ID: "route-2", Proxy: "direct", Capacity: 8},
		{ID: "route-3", Proxy: "direct", Capacity: 8},
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	client := &http.Client{Transport: pool}

	for range 2 {
		var choice egress.Choice
		ctx := egress.WithRecorder(context.Background(), &choice)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, target.URL, nil)
		resp, err := client.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close() // gives the endpoint's slot back
		fmt.Println(resp.StatusCode, string(body), "via", choice)
	}
	// Output:
	// 200 hello via route-3 (affinity)
	// 200 hello via route-3 (affinity)
}

// A session binds its requests to one endpoint, so that it keeps one
// address for its life.
func ExampleWithBinding() {
	pool, err := egress.New(egress.Config{Endpoints: []egress.Endpoint{
		{ID: "res-1", Proxy: "socks5h://user:secret@10.0.0.1:1080"},
		{ID: "res-2", Proxy: "socks5h://user:secret@10.0.0.2:1080"},
	}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()

	session := egress.WithBinding(context.Background(), "res-2")
	c, err := pool.Select(session, "shop.example")
	fmt.Println(c, err)

	pool.Drain("res-2")
	_, err = pool.Select(session, "shop.example")
	fmt.Println(errors.Is(err, egress.ErrBindingUnavailable))
	// Output:
	// res-2 (sticky) <nil>
	// true
}

// Configuration errors name the endpoint, never its password.
func ExampleNew() {
	_, err := egress.New(egress.Config{Endpoints: []egress.Endpoint{
		{ID: "dc-7", Proxy: "http://user:secret@proxy.example:99999"},
	}})
	var ce *egress.ConfigError
	fmt.Println(errors.As(err, &ce), ce.EndpointID, errors.Is(err, egress.ErrBadPort))
	fmt.Println(err)
	// Output:
	// true dc-7 true
	// egress: endpoint "dc-7": proxy port out of range "99999"
}

// String and the other printed forms drop the proxy's credentials.
func ExampleEndpoint_String() {
	e := egress.Endpoint{ID: "dc-1", Proxy: "http://user:secret@proxy.example:3128"}
	fmt.Println(e)
	// Output: dc-1 http://proxy.example:3128
}

// Rules pin hosts to endpoints by label; the most specific pattern
// decides which rule governs a host.
func ExampleReadRules() {
	rules, err := egress.ReadRules(strings.NewReader(`{"rules": [
	  {"name": "eu", "hosts": ["*.de", "site:example.fr"], "labels": {"region": "eu"}},
	  {"name": "anywhere", "hosts": ["site:global.de"]}
	]}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	pool, err := egress.New(egress.Config{
		Endpoints: []egress.Endpoint{
			{ID: "fra-1", Proxy: "http://10.0.0.1:3128", Labels: map[string]string{"region": "eu"}},
			{ID: "nyc-1", Proxy: "http://10.0.1.1:3128", Labels: map[string]string{"region": "us"}},
		},
		Rules: rules,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer pool.Close()
	for _, host := range []string{"www.bund.de", "shop.example.fr", "www.global.de", "example.com", "example.org"} {
		c, err := pool.Select(context.Background(), host)
		fmt.Printf("%-16s rule %-10q -> %s %v\n", host, c.Rule, c.EndpointID, err)
	}
	_, err = egress.New(egress.Config{
		Endpoints: []egress.Endpoint{{ID: "fra-1", Proxy: "direct", Labels: map[string]string{"region": "eu"}}},
		Rules:     []egress.Rule{{Name: "typo", Hosts: []string{"*.de"}, Labels: map[string]string{"regoin": "eu"}}},
	})
	fmt.Println(err)
	// Output:
	// www.bund.de      rule "eu"       -> fra-1 <nil>
	// shop.example.fr  rule "eu"       -> fra-1 <nil>
	// www.global.de    rule "anywhere" -> fra-1 <nil>
	// example.com      rule ""         -> fra-1 <nil>
	// example.org      rule ""         -> nyc-1 <nil>
	// egress: Rules["typo"]: rule requires a label no endpoint carries "regoin"
}
