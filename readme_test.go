package egresskit_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/egresskit/egresskit/internal/redistest"
	"github.com/egresskit/egresskit/redisstore"
)

// readmeBlock returns the first ```go block after the heading in
// README.md.
func readmeBlock(t *testing.T, heading string) string {
	t.Helper()
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("README.md has no heading %q", heading)
	}
	_, code, ok := strings.Cut(after, "```go\n")
	if !ok {
		t.Fatalf("README.md: no go block under %q", heading)
	}
	code, _, ok = strings.Cut(code, "\n```")
	if !ok {
		t.Fatalf("README.md: the go block under %q does not end", heading)
	}
	return code
}

// TestReadmeRedis takes the program of the README's Redis section, as a
// reader pastes it, and runs it against a real redis-server (its address
// put in place of 127.0.0.1:6379) and a local page: it prints the page's
// status, and the store's Close sent the OK it held back.
func TestReadmeRedis(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	addr := redistest.Addr(t)
	src := readmeBlock(t, "## Sharing state across a fleet (Redis)")
	if !strings.Contains(src, `"127.0.0.1:6379"`) || !strings.Contains(src, "package main") {
		t.Fatalf("the README's Redis program names no 127.0.0.1:6379 or is not a program:\n%s", src)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "main.go")
	if err := os.WriteFile(file, []byte(strings.Replace(src, "127.0.0.1:6379", addr, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/robots.txt" {
			http.NotFound(w, r)
			return
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// go run resolves the program's imports in this module, as go get
	// would in the reader's.
	out, err := exec.CommandContext(ctx, "go", "run", file, srv.URL+"/page").CombinedOutput()
	if err != nil {
		t.Fatalf("the README's Redis program: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != "200 OK" {
		t.Errorf("the README's Redis program printed %q, want 200 OK", got)
	}
	// Its state is in Redis under the default prefix, with the OK that
	// the store held back and its Close sent.
	client := redistest.Dial(t, addr)
	keys, _ := client.Keys(ctx, "egresskit:*").Result()
	t.Cleanup(func() {
		if len(keys) > 0 {
			client.Del(context.Background(), keys...)
		}
	})
	st, err := redisstore.New(client, redisstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	status, err := st.Status(ctx, strings.TrimPrefix(srv.URL, "http://"))
	if err != nil || status.Recent.OK != 1 {
		t.Errorf("the host's state in Redis: %d OKs, %v; want the program's 1", status.Recent.OK, err)
	}
}
