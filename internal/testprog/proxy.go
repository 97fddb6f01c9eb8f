package testprog

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
)

// ProxyOptions configures a real proxy started by Squid, Tinyproxy or
// Microsocks.
type ProxyOptions struct {
	// User and Pass are the one account the proxy accepts. Empty User
	// means the proxy asks for no credentials.
	User, Pass string
	// TLS adds a TLS port (https:// proxy) with a certificate issued by a
	// test CA generated for this proxy. Only Squid supports it.
	TLS bool
}

// Proxy is a real proxy program running on loopback for one test. It is
// killed when the test ends.
type Proxy struct {
	*Proc

	// Program is "squid", "tinyproxy" or "microsocks".
	Program string
	// Version is the program's version as it reports it (or as the
	// package manager does when the program has no version flag).
	Version string
	// Scheme is the proxy URL scheme of the plain port: "http" or "socks5".
	Scheme string
	// TLSAddr is the "127.0.0.1:PORT" of the TLS port, or "".
	TLSAddr string
	// CA trusts the TLS port's certificate; nil without TLS.
	CA *x509.CertPool
	// Dir holds the proxy's configuration and logs.
	Dir string

	opts      ProxyOptions
	forwarded func() int
}

// URL returns the proxy URL of the plain port with the configured
// credentials, e.g. "http://user:pass@127.0.0.1:3128".
func (p *Proxy) URL() string { return p.URLWith(p.Scheme, p.opts.User, p.opts.Pass) }

// TLSURL returns the https:// URL of the TLS port with the configured
// credentials, or "" without TLS.
func (p *Proxy) TLSURL() string {
	if p.TLSAddr == "" {
		return ""
	}
	return p.URLWith("https", p.opts.User, p.opts.Pass)
}

// URLWith returns the proxy URL with scheme ("http", "https" for the TLS
// port, "socks5", "socks5h") and the given credentials (none when user is
// empty), e.g. to present a wrong password.
func (p *Proxy) URLWith(scheme, user, pass string) string {
	u := url.URL{Scheme: scheme, Host: p.Addr}
	if scheme == "https" {
		u.Host = p.TLSAddr
	}
	if user != "" {
		u.User = url.UserPassword(user, pass)
	}
	return u.String()
}

// TLSConfig returns a client configuration that trusts the TLS port's
// certificate, for egress.Config.ProxyTLSConfig.
func (p *Proxy) TLSConfig() *tls.Config { return &tls.Config{RootCAs: p.CA} }

// Forwarded returns how many requests (squid, tinyproxy) or connections
// (microsocks) the proxy has carried to a target so far, as its log says.
// Requests it refused itself are not counted.
func (p *Proxy) Forwarded() int { return p.forwarded() }

// Port returns the plain port's number.
func (p *Proxy) Port() string {
	_, port, _ := net.SplitHostPort(p.Addr)
	return port
}

// countLines counts the lines of the file at path that contain substr.
func countLines(path, substr string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return strings.Count(string(b), substr)
}

// versions caches program versions by binary path.
var versions sync.Map

// version runs the binary with args once and returns the first line that
// contains marker, with marker's prefix removed; or the Debian package's
// version when pkg is set; or "unknown".
func version(path string, args []string, marker, pkg string) string {
	if v, ok := versions.Load(path); ok {
		return v.(string)
	}
	v := "unknown"
	if pkg != "" {
		if out, err := exec.Command("dpkg-query", "-W", "-f", "${Version}", pkg).Output(); err == nil && len(out) > 0 {
			v = strings.TrimSpace(string(out))
		}
	} else if out, err := exec.Command(path, args...).CombinedOutput(); err == nil || len(out) > 0 {
		for line := range strings.SplitSeq(string(out), "\n") {
			if i := strings.Index(line, marker); i >= 0 {
				v = strings.TrimSpace(line[i+len(marker):])
				break
			}
		}
	}
	versions.Store(path, v)
	return v
}
