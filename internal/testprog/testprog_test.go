package testprog_test

import (
	"net"
	"os"
	"strconv"
	"testing"

	"github.com/egresskit/egresskit/internal/testprog"
)

// TestStartAndKill starts a real nginx and checks that Start waits for its
// port and Kill frees it.
func TestStartAndKill(t *testing.T) {
	path := testprog.Need(t, "nginx")
	dir := t.TempDir()
	port := testprog.FreePort(t)
	conf := testprog.WriteFile(t, dir, "nginx.conf", `daemon off;
master_process off;
pid `+dir+`/nginx.pid;
error_log stderr;
events {}
http {
  access_log off;
  client_body_temp_path `+dir+`;
  proxy_temp_path `+dir+`;
  fastcgi_temp_path `+dir+`;
  uwsgi_temp_path `+dir+`;
  scgi_temp_path `+dir+`;
  server { listen 127.0.0.1:`+strconv.Itoa(port)+`; location / { return 204; } }
}
`)
	p := testprog.Start(t, testprog.Spec{Path: path, Args: []string{"-p", dir, "-c", conf}, Port: port})
	if p.Exited() {
		t.Fatal("nginx exited at once")
	}
	p.Kill()
	if !p.Exited() {
		t.Fatal("Kill returned before nginx exited")
	}
	if c, err := net.Dial("tcp", p.Addr); err == nil {
		c.Close()
		t.Fatalf("port %s still accepts connections after Kill", p.Addr)
	}
}

func TestLookupMissing(t *testing.T) {
	if _, err := testprog.Lookup("egresskit-no-such-program"); err == nil {
		t.Fatal("Lookup of a missing program returned no error")
	}
	if os.Getenv(testprog.EnvRequire) == "" {
		t.Log(testprog.EnvRequire, "unset: missing programs skip their tests")
	}
}
