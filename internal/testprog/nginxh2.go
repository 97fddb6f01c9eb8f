package testprog

import (
	"crypto/x509"
	"fmt"
	"strconv"
	"testing"
)

// ProxyNginx is a running nginx that serves HTTPS with HTTP/2 on and
// passes every request to an upstream HTTP server.
type ProxyNginx struct {
	*Proc
	// URL is "https://127.0.0.1:PORT".
	URL string
	// CA is the pool that verifies its certificate (made for the test).
	CA *x509.CertPool
	// Version is nginx's version ("nginx/1.22.1").
	Version string
}

// HTTP2Nginx starts a real nginx (tested with 1.22) on a free loopback
// port, speaking TLS with a certificate of a test authority and HTTP/2
// (`listen ... ssl http2`, 128 concurrent streams, nginx's default), and
// passing every request to upstream ("127.0.0.1:PORT", plain HTTP/1.1)
// without buffering. It is killed when the test ends; the test is skipped
// when nginx is missing, unless EGRESSKIT_REQUIRE_PROGRAMS is set.
func HTTP2Nginx(t testing.TB, upstream string) *ProxyNginx {
	t.Helper()
	path := Need(t, "nginx")
	dir := programDir(t)
	port := FreePort(t)
	ca := newTestCA(t)
	cert, key := ca.issue(t, dir, "127.0.0.1")
	n := &ProxyNginx{URL: "https://127.0.0.1:" + strconv.Itoa(port), CA: ca.pool}
	n.Version = version(path, []string{"-v"}, "nginx version: ", "")
	conf := fmt.Sprintf(`daemon off;
master_process off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log;
events { worker_connections 512; }
http {
  access_log off;
  client_body_temp_path %[1]s;
  proxy_temp_path %[1]s;
  fastcgi_temp_path %[1]s;
  uwsgi_temp_path %[1]s;
  scgi_temp_path %[1]s;
  server {
    listen 127.0.0.1:%[2]d ssl http2;
    ssl_certificate %[3]s;
    ssl_certificate_key %[4]s;
    http2_max_concurrent_streams 128;
    location / {
      proxy_pass http://%[5]s;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_read_timeout 60s;
    }
  }
}
`, dir, port, cert, key, upstream)
	cfg := WriteFile(t, dir, "nginx.conf", conf)
	n.Proc = Start(t, Spec{Path: path, Args: []string{"-p", dir, "-c", cfg}, Dir: dir, Port: port})
	return n
}
