package main

import (
	"fmt"
	"io"
	"log"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"sync"
	"time"
)

// web is the local web the example crawls: three hosts on 127.0.0.1 and two
// forward proxies in front of them. Every host counts what it served, so
// the example can show what reached the servers, not only what the crawler
// believes it did.
type web struct {
	site      *httptest.Server // robots.txt disallows /private
	busy      *httptest.Server // answers its first page with 429, Retry-After: 1
	challenge *httptest.Server // a bot-challenge interstitial on every page
	proxies   map[string]*httptest.Server
	upstream  *http.Transport // the proxies' own transport to the hosts

	mu      sync.Mutex     // guards served, agents, direct, proxied, time429 and after429
	served  map[string]int // "name path" -> requests served
	agents  map[string]int // User-Agent -> requests (robots.txt included) sent with it
	direct  int            // requests that reached a host without a proxy
	proxied map[string]int // proxy ID -> requests forwarded
	// times of the 429 and of the first request to busy after it
	time429, after429 time.Time
}

const proxyHeader = "Via"

func newWeb() *web {
	w := &web{served: map[string]int{}, proxied: map[string]int{}}
	w.site = httptest.NewServer(w.count("site", http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/robots.txt":
			io.WriteString(rw, "User-agent: *\nDisallow: /private\n")
		case "/":
			rw.Header().Set("Content-Type", "text/html")
			fmt.Fprintf(rw, `<html><body>
<a href="/about">about</a>
<a href="/private/admin">admin</a>
<a href="%[1]s/news/1">news 1</a>
<a href="%[1]s/news/2">news 2</a>
<a href="%[2]s/shop">shop</a>
<a href="%[2]s/shop/cart">cart</a>
</body></html>`, w.busy.URL, w.challenge.URL)
		case "/about":
			rw.Header().Set("Content-Type", "text/html")
			io.WriteString(rw, `<html><body><a href="/">home</a></body></html>`)
		default:
			http.NotFound(rw, r)
		}
	})))
	w.busy = httptest.NewServer(w.count("busy", http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(rw, r)
			return
		}
		w.mu.Lock()
		first := w.time429.IsZero()
		if first {
			w.time429 = time.Now()
		} else if w.after429.IsZero() {
			w.after429 = time.Now()
		}
		w.mu.Unlock()
		if first {
			rw.Header().Set("Retry-After", "1")
			http.Error(rw, "slow down", http.StatusTooManyRequests)
			return
		}
		rw.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(rw, "<html><body>news %s</body></html>", r.URL.Path)
	})))
	w.challenge = httptest.NewServer(w.count("challenge", http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(rw, r)
			return
		}
		rw.Header().Set("Content-Type", "text/html")
		rw.Header().Set("Cf-Mitigated", "challenge")
		rw.WriteHeader(http.StatusForbidden)
		io.WriteString(rw, "<html><title>Just a moment...</title></html>")
	})))

	w.upstream = &http.Transport{}
	w.proxies = map[string]*httptest.Server{}
	for _, id := range []string{"proxy-a", "proxy-b"} {
		w.proxies[id] = httptest.NewServer(w.forwardProxy(id))
	}
	return w
}

// count wraps a host's handler with the bookkeeping of what it served.
func (w *web) count(name string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.mu.Lock()
		w.served[name+" "+r.URL.Path]++
		if w.agents == nil {
			w.agents = map[string]int{}
		}
		w.agents[r.Header.Get("User-Agent")]++
		if r.Header.Get(proxyHeader) == "" {
			w.direct++
		}
		w.mu.Unlock()
		h.ServeHTTP(rw, r)
	})
}

// forwardProxy is a minimal HTTP forward proxy for plain-http targets: it
// takes absolute-form requests ("GET http://host/path HTTP/1.1"), forwards
// them and marks them with a Via header. It needs no CONNECT because the
// local targets speak plain HTTP.
func (w *web) forwardProxy(id string) http.Handler {
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			// pr.Out.URL is already the absolute target URL.
			pr.Out.Header.Set(proxyHeader, "1.1 "+id)
		},
		Transport: w.upstream,
		ErrorLog:  log.New(io.Discard, "", 0),
	}
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if !r.URL.IsAbs() {
			http.Error(rw, "forward proxy: absolute-form request required", http.StatusBadRequest)
			return
		}
		w.mu.Lock()
		w.proxied[id]++
		w.mu.Unlock()
		rp.ServeHTTP(rw, r)
	})
}

// userAgents returns the User-Agents the hosts saw, with their counts.
func (w *web) userAgents() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return maps.Clone(w.agents)
}

// requests returns how many requests for path the named host served.
func (w *web) requests(name, path string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.served[name+" "+path]
}

// hostRequests returns how many requests (robots.txt excluded) the named
// host served.
func (w *web) hostRequests(name string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for k, v := range w.served {
		if len(k) > len(name) && k[:len(name)+1] == name+" " && k != name+" /robots.txt" {
			n += v
		}
	}
	return n
}

// close stops every server and the proxies' transport.
func (w *web) close() {
	for _, p := range w.proxies {
		p.Close()
	}
	w.site.Close()
	w.busy.Close()
	w.challenge.Close()
	w.upstream.CloseIdleConnections()
}
