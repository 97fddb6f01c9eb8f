package egress_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/egresskit/egresskit/egress"
)

// TestCredentialsNeverLeak drives every path that can produce text —
// configuration errors, proxy failures, choices, snapshots, String, Go
// syntax, structured logs — and greps it all for a unique password.
func TestCredentialsNeverLeak(t *testing.T) {
	const user, pass = "leakuser", "LEAK-pw-4Tq9zR"
	userinfo := user + ":" + pass
	forbidden := []string{pass, base64.StdEncoding.EncodeToString([]byte(userinfo))}

	var out bytes.Buffer
	text := slog.New(slog.NewTextHandler(&out, nil))
	jsonLog := slog.New(slog.NewJSONHandler(&out, nil))
	record := func(label string, v any) {
		fmt.Fprintf(&out, "%s: %v | %+v | %#v\n", label, v, v, v)
		text.Info(label, "value", v)
		jsonLog.Info(label, "value", v)
	}

	// Configuration errors.
	for _, raw := range []string{
		"ftp://" + userinfo + "@proxy.example:21",
		"http://" + userinfo + "@proxy.example:99999",
		"http://" + userinfo + "@:8080",
		"http://" + userinfo + " @proxy.example",
		"http://" + userinfo + "@proxy.example:%zz",
		"socks5://:" + pass + "@proxy.example",
		userinfo + "@proxy.example:3128",
	} {
		e := egress.Endpoint{ID: "cfg", Proxy: raw}
		record("endpoint", e)
		_, err := egress.New(egress.Config{Endpoints: []egress.Endpoint{e}})
		if err == nil {
			t.Fatalf("New(%q) succeeded", "cfg")
		}
		record("config error", err)
	}

	// Proxy failures with credentials in the URL.
	target := newTarget(t, http.StatusOK, false)
	tlsTarget := newTarget(t, http.StatusOK, true)
	hp := newHTTPProxy(t, "hp", withCredentials(user, "the-right-one"))
	sp := newSOCKSProxy(t, "sp", user, "the-right-one")
	tp := newHTTPProxy(t, "tp", withTLS())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := ln.Addr().String()
	ln.Close()
	eps := []egress.Endpoint{
		{ID: "http-407", Proxy: hp.URL(userinfo), Labels: map[string]string{"kind": "datacenter"}},
		{ID: "socks-auth", Proxy: sp.URL("socks5h", userinfo)},
		{ID: "dead", Proxy: "http://" + userinfo + "@" + deadAddr},
		{ID: "dead-socks", Proxy: "socks5://" + userinfo + "@" + deadAddr},
		{ID: "tls-untrusted", Proxy: tp.URL(userinfo)},
	}
	cfg := egress.Config{Endpoints: eps, TLSClientConfig: trustServer(tlsTarget)}
	record("config", cfg.Endpoints)
	if b, err := json.Marshal(cfg.Endpoints); err != nil {
		t.Fatal(err)
	} else {
		record("json", string(b))
	}
	pool := newPool(t, cfg)
	for _, e := range eps {
		record("endpoint", e)
		for _, url := range []string{target.URL, tlsTarget.URL} {
			r := fetch(egress.WithForced(context.Background(), e.ID), pool, url)
			if r.err == nil {
				t.Fatalf("request through %s succeeded", e.ID)
			}
			record("choice", r.choice)
			record("error", r.err)
			record("error text", r.err.Error())
		}
	}
	for _, st := range pool.Endpoints() {
		record("state", st)
	}
	record("states", pool.Endpoints())
	c, _ := pool.Select(context.Background(), "example.com")
	record("select", c)

	if testing.Verbose() {
		t.Log(out.String())
	}
	for _, f := range forbidden {
		if strings.Contains(out.String(), f) {
			t.Errorf("output contains %q:\n%s", f, out.String())
		}
	}
	if !strings.Contains(out.String(), "http-407") {
		t.Fatal("the output misses what it should record")
	}
}

func TestEndpointString(t *testing.T) {
	tests := []struct {
		e    egress.Endpoint
		want string
	}{
		{egress.Endpoint{ID: "dc-1", Proxy: "http://u:secret@proxy.example:3128"}, "dc-1 http://proxy.example:3128"},
		{egress.Endpoint{ID: "res-1", Proxy: "SOCKS5H://u:secret@[::1]:1080"}, "res-1 socks5h://[::1]:1080"},
		{egress.Endpoint{ID: "home", Proxy: ""}, "home direct"},
		{egress.Endpoint{ID: "bad", Proxy: "http://u:sec ret@x"}, "bad <malformed proxy URL>"},
		{egress.Endpoint{ID: "slash", Proxy: "http://u:12/secret@proxy.example:3128"}, "slash <malformed proxy URL>"},
		{egress.Endpoint{ID: "http-default-port", Proxy: "http://u:secret@proxy.example"}, "http-default-port http://proxy.example:80"},
	}
	for _, tt := range tests {
		if got := tt.e.String(); got != tt.want {
			t.Errorf("Endpoint{%q}.String() = %q, want %q", tt.e.ID, got, tt.want)
		}
		if got := fmt.Sprintf("%#v", tt.e); strings.Contains(got, "secret") {
			t.Errorf("%%#v of %q = %q, contains the password", tt.e.ID, got)
		}
	}
}
