package session_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"testing"

	"github.com/egresskit/egresskit/session"
)

func benchJar(b *testing.B, stored int) (*session.Jar, *url.URL) {
	b.Helper()
	m := mustManager(session.Config{})
	ctx := context.Background()
	if _, err := m.Create(ctx, "bench", session.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	j, err := m.Jar(ctx, "bench")
	if err != nil {
		b.Fatal(err)
	}
	u, _ := url.Parse("https://www.example.com/catalog/page")
	cs := make([]*http.Cookie, stored)
	for i := range cs {
		cs[i] = &http.Cookie{Name: fmt.Sprint("c", i), Value: "0123456789abcdef0123456789abcdef", Path: "/"}
	}
	j.SetCookies(u, cs)
	return j, u
}

// BenchmarkJarSetCookies stores one updated cookie per reply, as a site
// that rotates its session cookie does.
func BenchmarkJarSetCookies(b *testing.B) {
	j, u := benchJar(b, 20)
	c := []*http.Cookie{{Name: "sid", Value: "0123456789abcdef0123456789abcdef", Path: "/", HttpOnly: true, Secure: true}}
	b.ReportAllocs()
	for b.Loop() {
		j.SetCookies(u, c)
	}
	if err := j.Err(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkJarCookies reads the cookies for a request; unchanged cookies
// are not opened again.
func BenchmarkJarCookies(b *testing.B) {
	for _, n := range []int{20, 1000} {
		b.Run(fmt.Sprint(n, "cookies"), func(b *testing.B) {
			j, u := benchJar(b, n)
			b.ReportAllocs()
			for b.Loop() {
				if got := j.Cookies(u); len(got) != n {
					b.Fatalf("Cookies() = %d, want %d", len(got), n)
				}
			}
		})
	}
}

// BenchmarkJarCookiesCold opens every cookie on each read, as a new Jar
// (or a new worker) does.
func BenchmarkJarCookiesCold(b *testing.B) {
	m := mustManager(session.Config{})
	ctx := context.Background()
	if _, err := m.Create(ctx, "bench", session.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	seed, _ := m.Jar(ctx, "bench")
	u, _ := url.Parse("https://www.example.com/")
	cs := make([]*http.Cookie, 20)
	for i := range cs {
		cs[i] = &http.Cookie{Name: fmt.Sprint("c", i), Value: "0123456789abcdef0123456789abcdef"}
	}
	seed.SetCookies(u, cs)
	b.ReportAllocs()
	for b.Loop() {
		j, _ := m.Jar(ctx, "bench")
		if got := j.Cookies(u); len(got) != 20 {
			b.Fatalf("Cookies() = %d, want 20", len(got))
		}
	}
}

// BenchmarkTransport is the per-request cost of a session: read, open
// headers and token, clone the request.
func BenchmarkTransport(b *testing.B) {
	m := mustManager(session.Config{})
	ctx := context.Background()
	if _, err := m.Create(ctx, "bench", session.CreateOptions{
		Endpoint: "ep-1",
		Header:   http.Header{"User-Agent": {"bench"}},
		Token:    session.Token{Type: "Bearer", Value: "0123456789abcdef"},
	}); err != nil {
		b.Fatal(err)
	}
	tr := m.Transport(&recorder{}, "bench")
	req, _ := http.NewRequest(http.MethodGet, "https://www.example.com/", nil)
	b.ReportAllocs()
	for b.Loop() {
		resp, err := tr.RoundTrip(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
	}
}
