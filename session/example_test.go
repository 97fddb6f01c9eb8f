package session_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/egresskit/egresskit/session"
)

// newKey returns a Key of random key material. In a fleet an operator
// provisions the 32 bytes (in a secret store, say) and every worker builds
// the same Key from them.
func newKey(id uint32) session.Key {
	b := make([]byte, 32)
	rand.Read(b)
	return session.Key{ID: id, Secret: session.Secret(b)}
}

// Two workers share one session: the first logs in, the second carries on
// with the cookie the first received. Workers in separate processes would
// share a Redis store and the same Keyring the same way.
func Example() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/login":
			http.SetCookie(w, &http.Cookie{Name: "sid", Value: "alice", Path: "/", HttpOnly: true})
			fmt.Fprint(w, "logged in")
		case "/orders":
			if c, err := r.Cookie("sid"); err == nil {
				fmt.Fprintf(w, "orders of %s", c.Value)
				return
			}
			http.Error(w, "log in first", http.StatusUnauthorized)
		}
	}))
	defer srv.Close()

	keys, _ := session.NewKeyring(newKey(1))
	store := session.NewMemoryStore(nil)
	workerA, err := session.New(session.Config{Store: store, Keyring: keys})
	if err != nil {
		fmt.Println(err)
		return
	}
	workerB, _ := session.New(session.Config{Store: store, Keyring: keys}) // the same, valid, Config

	ctx := context.Background()
	id := "crawl-42"
	if _, err := workerA.Create(ctx, id, session.CreateOptions{TTL: time.Hour}); err != nil {
		fmt.Println(err)
		return
	}

	get := func(m *session.Manager, path string) {
		jar, err := m.Jar(ctx, id)
		if err != nil {
			fmt.Println(err)
			return
		}
		resp, err := (&http.Client{Jar: jar}).Get(srv.URL + path)
		if err != nil {
			fmt.Println(err)
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		fmt.Printf("%s: %d %s\n", path, resp.StatusCode, body)
	}
	get(workerA, "/login")
	get(workerB, "/orders")
	// Output:
	// /login: 200 logged in
	// /orders: 200 orders of alice
}

// A Transport sends the session's token, refreshed when due, and never an
// expired one.
func ExampleManager_Transport() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, r.Header.Get("Authorization"))
	}))
	defer srv.Close()

	refreshes := 0
	m, err := session.New(session.Config{
		RefreshSkew: time.Minute,
		Refresh: func(ctx context.Context, id string, cur session.Token) (session.Token, error) {
			refreshes++ // a real refresher would call the site's token endpoint
			return session.Token{Type: "Bearer", Value: "fresh", Expires: time.Now().Add(time.Hour)}, nil
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx := context.Background()
	if _, err := m.Create(ctx, "s1", session.CreateOptions{
		Token: session.Token{Type: "Bearer", Value: "expired", Expires: time.Now().Add(-time.Second)},
	}); err != nil {
		fmt.Println(err)
		return
	}
	client := &http.Client{Transport: m.Transport(srv.Client().Transport, "s1")}
	for range 3 {
		resp, err := client.Get(srv.URL)
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("sent %q\n", body)
	}
	fmt.Println("refreshes:", refreshes)
	// Output:
	// sent "Bearer fresh"
	// sent "Bearer fresh"
	// sent "Bearer fresh"
	// refreshes: 1
}

// Rotating keys: a Manager whose ring has the new key appended still
// reads what the old key sealed; a ring without the old key cannot.
func ExampleNewKeyring() {
	ctx := context.Background()
	k1, k2 := newKey(1), newKey(2)
	old, _ := session.NewKeyring(k1)
	rotated, _ := session.NewKeyring(k1, k2)
	newOnly, _ := session.NewKeyring(k2)
	store := session.NewMemoryStore(nil)

	before, err := session.New(session.Config{Store: store, Keyring: old})
	if err != nil {
		fmt.Println(err)
		return
	}
	after, _ := session.New(session.Config{Store: store, Keyring: rotated})
	newOnlyM, _ := session.New(session.Config{Store: store, Keyring: newOnly})
	if _, err := before.Create(ctx, "s1", session.CreateOptions{Token: session.Token{Type: "Bearer", Value: "t0k3n"}}); err != nil {
		fmt.Println(err)
	}
	s, err := after.Get(ctx, "s1")
	fmt.Println(err == nil && s.Token.Value == "t0k3n")
	_, err = newOnlyM.Get(ctx, "s1")
	fmt.Println(errors.Is(err, session.ErrTampered))
	// Output:
	// true
	// true
}
