package hostkey_test

import (
	"fmt"
	"net/url"

	"github.com/egresskit/egresskit/hostkey"
)

func ExampleOf() {
	for _, raw := range []string{
		"https://Example.COM./robots.txt",
		"http://example.com:80/",
		"http://example.com:8080/",
		"https://bücher.example/",
	} {
		u, _ := url.Parse(raw)
		key, _ := hostkey.Of(u, hostkey.ByHost)
		fmt.Println(key)
	}

	u, _ := url.Parse("https://a.b.example.co.uk/")
	key, _ := hostkey.Of(u, hostkey.ByDomain)
	fmt.Println(key)

	_, err := hostkey.Of(&url.URL{Scheme: "http", Host: ":8080"}, hostkey.ByHost)
	fmt.Println(err)
	// Output:
	// example.com
	// example.com
	// example.com:8080
	// xn--bcher-kva.example
	// example.co.uk
	// hostkey: empty host: port without host
}
