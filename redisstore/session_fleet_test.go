package redisstore_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/egresskit/egresskit/internal/redistest"
	"github.com/egresskit/egresskit/internal/sessionkit"
	"github.com/egresskit/egresskit/redisstore"
	"github.com/egresskit/egresskit/session"
	"github.com/egresskit/egresskit/session/sessionstore"
	"github.com/redis/go-redis/v9"
)

// sessWorker is one worker process of a fleet: its own Redis client,
// session store and Manager, sharing only the Redis server, the prefix and
// the Keyring with the others.
type sessWorker struct {
	client *redis.Client
	store  sessionstore.Store
	prefix string
	keys   *session.Keyring
	m      *session.Manager
}

// sessFleet returns n workers on the server of t, using Redis time.
func sessFleet(t *testing.T, n int, tweak func(*session.Config)) []sessWorker {
	t.Helper()
	addr := redistest.Addr(t)
	prefix := redistest.Prefix(t)
	keys, err := session.NewKeyring(newKey(1))
	if err != nil {
		t.Fatal(err)
	}
	ws := make([]sessWorker, n)
	for i := range ws {
		c := redistest.Dial(t, addr)
		st, err := redisstore.NewSessionStore(c, redisstore.SessionConfig{Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		cfg := session.Config{Store: st, Keyring: keys}
		if tweak != nil {
			tweak(&cfg)
		}
		ws[i] = sessWorker{client: c, store: st, prefix: prefix, keys: keys, m: mustManager(cfg)}
	}
	return ws
}

func sessJar(t *testing.T, m *session.Manager, id string) *session.Jar {
	t.Helper()
	j, err := m.Jar(context.Background(), id)
	if err != nil {
		t.Fatalf("Jar = %v, want nil", err)
	}
	return j
}

func sessNew(t *testing.T, m *session.Manager, o session.CreateOptions) string {
	t.Helper()
	id := sessionkit.NewID()
	if _, err := m.Create(context.Background(), id, o); err != nil {
		t.Fatalf("Create = %v, want nil", err)
	}
	return id
}

// TestSessionFleetCookieShared: a cookie worker A receives through its
// own Redis client is sent by worker B through another.
func TestSessionFleetCookieShared(t *testing.T) {
	ws := sessFleet(t, 2, nil)
	id := sessNew(t, ws[0].m, session.CreateOptions{})
	mux := http.NewServeMux()
	mux.HandleFunc("/login", func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: "sid", Value: "worker-a-logged-in", Path: "/", HttpOnly: true})
	})
	mux.HandleFunc("/me", func(w http.ResponseWriter, r *http.Request) {
		if c, err := r.Cookie("sid"); err != nil || c.Value != "worker-a-logged-in" {
			http.Error(w, "who are you", http.StatusUnauthorized)
		}
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	a := &http.Client{Jar: sessJar(t, ws[0].m, id)}
	b := &http.Client{Jar: sessJar(t, ws[1].m, id)}
	for _, step := range []struct {
		c    *http.Client
		path string
	}{{a, "/login"}, {b, "/me"}} {
		resp, err := step.c.Get(srv.URL + step.path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s = %d, want 200: worker B did not send worker A's cookie", step.path, resp.StatusCode)
		}
	}
}

// TestSessionFleetConcurrentCookies: 16 goroutines spread over two
// workers (two Redis clients), each adding its own cookie to one session,
// end with all 16 stored.
func TestSessionFleetConcurrentCookies(t *testing.T) {
	ws := sessFleet(t, 2, nil)
	id := sessNew(t, ws[0].m, session.CreateOptions{})
	u, _ := url.Parse("https://shop.example.com/")
	const n = 16
	var wg sync.WaitGroup
	jars := make([]*session.Jar, n)
	for i := range n {
		jars[i] = sessJar(t, ws[i%2].m, id)
		wg.Go(func() {
			jars[i].SetCookies(u, []*http.Cookie{{Name: fmt.Sprint("w", i), Value: fmt.Sprint("v", i)}})
		})
	}
	wg.Wait()
	for i, j := range jars {
		if err := j.Err(); err != nil {
			t.Errorf("jar %d: Err() = %v, want nil", i, err)
		}
	}
	s, err := ws[1].m.Get(context.Background(), id)
	if err != nil || len(s.Cookies) != n || s.Version != 1+n {
		t.Fatalf("after %d concurrent writers: %d cookies, version %d, %v; want %d, %d", n, len(s.Cookies), s.Version, err, n, 1+n)
	}
	for _, w := range ws {
		if got := len(sessJar(t, w.m, id).Cookies(u)); got != n {
			t.Errorf("Cookies() = %d cookies, want %d", got, n)
		}
	}
}

// TestSessionNoPlaintextInRedis reads every key the store wrote, raw, and
// finds neither the secret values nor the names they were stored under.
func TestSessionNoPlaintextInRedis(t *testing.T) {
	ctx := context.Background()
	ws := sessFleet(t, 1, nil)
	w := ws[0]
	const secret = "Pl41nT3xtCanary"
	id := sessNew(t, w.m, session.CreateOptions{
		Endpoint: secret + "-endpoint",
		Header:   http.Header{"X-Api-Key": {secret + "-header"}},
		Token:    session.Token{Type: "Bearer", Value: session.Secret(secret + "-token"), Refresh: session.Secret(secret + "-refresh"), Expires: time.Now().Add(time.Hour)},
	})
	u, _ := url.Parse("https://" + strings.ToLower(secret) + ".example/")
	j := sessJar(t, w.m, id)
	j.SetCookies(u, []*http.Cookie{{Name: secret + "-name", Value: secret + "-cookie", Path: "/" + secret}})
	if err := j.Err(); err != nil {
		t.Fatal(err)
	}
	if s, err := w.m.Get(ctx, id); err != nil || len(s.Cookies) != 1 || s.Token.Value == "" {
		t.Fatalf("Get = %v, %v; want the session with its cookie and token", s, err)
	}

	var raw bytes.Buffer
	keys, err := w.client.Keys(ctx, w.prefix+":*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 4 {
		t.Errorf("the store wrote %d keys %q, want 4", len(keys), keys)
	}
	for _, key := range keys {
		raw.WriteString(key)
		switch typ := w.client.Type(ctx, key).Val(); typ {
		case "hash":
			for f, v := range w.client.HGetAll(ctx, key).Val() {
				fmt.Fprintf(&raw, "\n%s=%s", f, v)
			}
		case "zset":
			for _, m := range w.client.ZRange(ctx, key, 0, -1).Val() {
				fmt.Fprintf(&raw, "\n%s", m)
			}
		default:
			t.Errorf("key %s has type %s, want hash or zset", key, typ)
		}
		raw.WriteByte('\n')
	}
	// Header names are field names ("h/X-Api-Key"), in the clear by the
	// session package's design; their values, the cookies' names, domains
	// and paths, the token and the endpoint are not.
	for _, needle := range []string{secret, strings.ToLower(secret), "example", "Bearer"} {
		if bytes.Contains(raw.Bytes(), []byte(needle)) {
			t.Errorf("Redis holds %q in the clear:\n%q", needle, raw.String())
		}
	}
	if raw.Len() < 200 {
		t.Errorf("read %d bytes from Redis, too few to hold the session", raw.Len())
	}
}

// sessTokenServer issues tokens on POST /token and serves GET /api to the
// holders of a valid one, counting both.
type sessTokenServer struct {
	*httptest.Server
	mu      sync.Mutex // guards the fields below
	valid   map[string]bool
	issued  int
	served  int
	refused int
}

func newSessTokenServer(initial string) *sessTokenServer {
	ts := &sessTokenServer{valid: map[string]bool{initial: true}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		ts.issued++
		tok := fmt.Sprint("issued-", ts.issued)
		ts.valid[tok] = true
		io.WriteString(w, tok)
	})
	mux.HandleFunc("GET /api", func(w http.ResponseWriter, r *http.Request) {
		ts.mu.Lock()
		defer ts.mu.Unlock()
		if !ts.valid[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")] {
			ts.refused++
			http.Error(w, "bad token", http.StatusUnauthorized)
			return
		}
		ts.served++
	})
	ts.Server = httptest.NewServer(mux)
	return ts
}

func (ts *sessTokenServer) refresh(ctx context.Context, id string, cur session.Token) (session.Token, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+"/token", nil)
	if err != nil {
		return session.Token{}, err
	}
	resp, err := ts.Client().Do(req)
	if err != nil {
		return session.Token{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return session.Token{}, fmt.Errorf("token endpoint: %s, %v", resp.Status, err)
	}
	return session.Token{Type: "Bearer", Value: session.Secret(b), Expires: time.Now().Add(time.Hour)}, nil
}

// TestSessionFleetTokenRefreshOnce: 32 concurrent requests through two
// workers (two Redis clients, Redis time for the leases) find the token
// due, and it is refreshed exactly once across the fleet; no request goes
// out with a stale token.
func TestSessionFleetTokenRefreshOnce(t *testing.T) {
	for _, tc := range []struct {
		name    string
		expires time.Duration // the stored token's expiry, from now
		refused bool          // the old token is refused by the server
	}{
		{"expired", -time.Second, true},
		{"near expiry", 10 * time.Second, false}, // due: within the 30s skew
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := newSessTokenServer("initial")
			defer ts.Close()
			ws := sessFleet(t, 2, func(c *session.Config) {
				c.Refresh = ts.refresh
				c.PollInterval = time.Millisecond
			})
			id := sessNew(t, ws[0].m, session.CreateOptions{})
			// Stored by a worker whose clock runs a minute behind, the token
			// is sealed with its refresh due 30s before its expiry: due now.
			behind := mustManager(session.Config{Store: ws[0].store, Keyring: ws[0].keys,
				Now: func() time.Time { return time.Now().Add(-time.Minute) }})
			if err := behind.SetToken(context.Background(), id, session.Token{Type: "Bearer", Value: "initial", Expires: time.Now().Add(tc.expires)}); err != nil {
				t.Fatal(err)
			}
			if tc.refused {
				ts.mu.Lock()
				ts.valid["initial"] = false
				ts.mu.Unlock()
			}

			const n = 32
			var wg sync.WaitGroup
			errs := make(chan error, n)
			for i := range n {
				client := &http.Client{Transport: ws[i%2].m.Transport(ts.Client().Transport, id)}
				wg.Go(func() {
					resp, err := client.Get(ts.URL + "/api")
					if err != nil {
						errs <- err
						return
					}
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						errs <- fmt.Errorf("status %d", resp.StatusCode)
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Errorf("request = %v, want 200", err)
			}
			ts.mu.Lock()
			issued, served, refused := ts.issued, ts.served, ts.refused
			ts.mu.Unlock()
			if issued != 1 || served != n || refused != 0 {
				t.Errorf("refreshes %d, served %d, refused %d; want 1, %d, 0", issued, served, refused, n)
			}
			s, err := ws[1].m.Get(context.Background(), id)
			if err != nil || s.Token.Value != "issued-1" || s.Lease.Token != 0 {
				t.Errorf("stored token %v, lease %+v, %v; want issued-1 and the refresh lease released", s.Token, s.Lease, err)
			}
		})
	}
}
