package redisstore_test

import (
	"context"
	"crypto/tls"
	"errors"
	"testing"
	"time"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/internal/redistest"
	"github.com/egresskit/egresskit/internal/sentinel"
	"github.com/egresskit/egresskit/internal/sessionkit"
	"github.com/egresskit/egresskit/redisstore"
	"github.com/egresskit/egresskit/session"
	"github.com/redis/go-redis/v9"
)

// TestTLS runs a session with its token, and a halt, through a real
// redis-server that speaks only TLS with client certificates: two
// Managers sharing the SessionStore and a Keyring read each other's
// token, and two States each other's halt. The server has no plain port,
// refuses a plain client on its TLS port, and refuses a TLS client
// without a certificate.
func TestTLS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, tlsCfg := redistest.StartTLS(t)
	dial := func(cfg *tls.Config) *redis.Client {
		opt, err := redistest.Options(srv.Addr)
		if err != nil {
			t.Fatal(err)
		}
		opt.TLSConfig = cfg
		opt.MaxRetries = -1
		c := redis.NewClient(opt)
		t.Cleanup(func() { c.Close() })
		return c
	}
	client := dial(tlsCfg)
	if err := client.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING over TLS: %v", err)
	}
	if port, err := client.ConfigGet(ctx, "port").Result(); err != nil || port["port"] != "0" {
		t.Errorf("CONFIG GET port = %v, %v; want 0 (no plain port)", port, err)
	}
	if err := dial(nil).Ping(ctx).Err(); err == nil {
		t.Error("PING in the clear to the TLS port succeeded, want refused")
	}
	noCert := tlsCfg.Clone()
	noCert.Certificates = nil
	if err := dial(noCert).Ping(ctx).Err(); err == nil {
		t.Error("PING over TLS without a client certificate succeeded, want refused")
	}

	keyring, err := session.NewKeyring(session.Key{ID: 1, Secret: session.Secret("0123456789abcdef0123456789abcdef")})
	if err != nil {
		t.Fatal(err)
	}
	manager := func() *session.Manager {
		st, err := redisstore.NewSessionStore(dial(tlsCfg), redisstore.SessionConfig{Prefix: "tls"})
		if err != nil {
			t.Fatal(err)
		}
		return mustManager(session.Config{Store: st, Keyring: keyring})
	}
	a, b := manager(), manager()
	id := sessionkit.NewID()
	if _, err := a.Create(ctx, id, session.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := session.Token{Type: "Bearer", Value: "tls-token-value", Expires: time.Now().Add(time.Hour)}
	if err := a.SetToken(ctx, id, want); err != nil {
		t.Fatal(err)
	}
	got, err := b.Token(ctx, id)
	if err != nil || got.Type != want.Type || got.Value != want.Value || !got.Expires.Equal(want.Expires) {
		t.Errorf("token read by the second Manager = %+v, %v; want %+v", got, err, want)
	}

	cfg := fleetConfig("tls")
	s1, err := redisstore.New(dial(tlsCfg), cfg)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := redisstore.New(dial(tlsCfg), cfg)
	if err != nil {
		t.Fatal(err)
	}
	adm, err := s1.Admit(ctx, "tls.example")
	if err != nil {
		t.Fatal(err)
	}
	if eff, err := s1.Record(ctx, "tls.example", adm, classify.Result{Outcome: classify.Refused}); err != nil || !eff.Halted {
		t.Fatalf("Record(Refused) over TLS = %+v, %v", eff, err)
	}
	if _, err := s2.Admit(ctx, "tls.example"); !errors.Is(err, sentinel.ErrHalted) {
		t.Errorf("second State over TLS: Admit = %v, want ErrHalted", err)
	}
}
