package egress_test

import (
	"bufio"
	"encoding/base64"
	"encoding/binary"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// httpProxy is a small HTTP forward proxy for tests: CONNECT tunnels and
// absolute-form requests, optional Basic credentials, a Via marker on
// forwarded requests, counters, and scripted failures.
//
// What it imitates, and where the real program is compared:
//   - 407 with Proxy-Authenticate for missing or wrong credentials: squid
//     5.7 (TestRealAuthRefused);
//   - withAuthStatus(401): tinyproxy 1.11.1's answer to a wrong password,
//     401 with WWW-Authenticate, Server: tinyproxy/1.11.1 and no Via, and
//     its 407 when no credentials are sent (TestRealAuthRefused);
//   - failRaw: squid's and tinyproxy's own error pages, byte for byte in
//     the parts egress reads (TestRealDeadTarget);
//   - Proxy-Status on its own errors (fail, and a dead target's 502): RFC
//     9209 as written. Neither squid 5.7 nor tinyproxy 1.11.1 sends
//     Proxy-Status; these cases check the RFC path, not a real program.
type httpProxy struct {
	name       string
	user, pass string // required credentials; "" = none
	authStatus int    // status for bad credentials: 407, or 401 as tinyproxy
	tls        bool

	srv  *httptest.Server
	fwd  *http.Transport
	wg   sync.WaitGroup // tunnel handlers
	addr string

	mu          sync.Mutex
	conns       map[net.Conn]struct{} // open tunnel connections
	requests    int                   // requests seen, any kind
	forwarded   int                   // absolute-form requests forwarded
	tunnels     int                   // CONNECT tunnels established
	inFlight    int
	maxInFlight int
	failStatus  int    // scripted: answer every request with this status
	failPS      string // scripted: Proxy-Status error type of that answer
	rawReply    string // scripted: raw response to every request
}

type proxyOption func(*httpProxy)

func withCredentials(user, pass string) proxyOption {
	return func(p *httpProxy) { p.user, p.pass = user, pass }
}

func withAuthStatus(code int) proxyOption { return func(p *httpProxy) { p.authStatus = code } }

func withTLS() proxyOption { return func(p *httpProxy) { p.tls = true } }

func newHTTPProxy(t *testing.T, name string, opts ...proxyOption) *httpProxy {
	t.Helper()
	p := &httpProxy{
		name:       name,
		authStatus: http.StatusProxyAuthRequired,
		fwd:        &http.Transport{},
		conns:      make(map[net.Conn]struct{}),
	}
	for _, o := range opts {
		o(p)
	}
	p.start(nil)
	t.Cleanup(p.Close)
	return p
}

func (p *httpProxy) start(ln net.Listener) {
	p.srv = httptest.NewUnstartedServer(p)
	if ln != nil {
		p.srv.Listener.Close()
		p.srv.Listener = ln
	}
	if p.tls {
		p.srv.StartTLS()
	} else {
		p.srv.Start()
	}
	p.addr = p.srv.Listener.Addr().String()
}

// URL returns the proxy URL, with the given userinfo ("" for none).
func (p *httpProxy) URL(userinfo string) string {
	scheme := "http"
	if p.tls {
		scheme = "https"
	}
	if userinfo != "" {
		userinfo += "@"
	}
	return scheme + "://" + userinfo + p.addr
}

// Kill stops the proxy: its address refuses connections.
func (p *httpProxy) Kill() {
	p.closeTunnels()
	p.srv.Close()
	p.wg.Wait()
}

// Revive restarts a killed proxy on the same address.
func (p *httpProxy) Revive(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatalf("relisten %s: %v", p.addr, err)
	}
	p.start(ln)
}

// Close stops the proxy and waits for its handlers.
func (p *httpProxy) Close() {
	p.Kill()
	p.fwd.CloseIdleConnections()
}

func (p *httpProxy) closeTunnels() {
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
}

// failRaw makes the proxy answer every request with the raw HTTP
// response raw ("" = normally), to imitate a real proxy's own error page
// byte for byte, reason phrase included.
func (p *httpProxy) failRaw(raw string) {
	p.mu.Lock()
	p.rawReply = raw
	p.mu.Unlock()
}

func (p *httpProxy) failRawReply() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rawReply
}

func (p *httpProxy) fail(status int, proxyStatus string) {
	p.mu.Lock()
	p.failStatus, p.failPS = status, proxyStatus
	p.mu.Unlock()
}

func (p *httpProxy) counts() (requests, forwarded, tunnels, maxInFlight int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.requests, p.forwarded, p.tunnels, p.maxInFlight
}

func (p *httpProxy) authorized(r *http.Request) bool {
	if p.user == "" {
		return true
	}
	v, ok := strings.CutPrefix(r.Header.Get("Proxy-Authorization"), "Basic ")
	if !ok {
		return false
	}
	b, err := base64.StdEncoding.DecodeString(v)
	return err == nil && string(b) == p.user+":"+p.pass
}

func (p *httpProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.requests++
	p.inFlight++
	p.maxInFlight = max(p.maxInFlight, p.inFlight)
	failStatus, failPS := p.failStatus, p.failPS
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.inFlight--
		p.mu.Unlock()
	}()
	if !p.authorized(r) {
		if p.authStatus == http.StatusUnauthorized && r.Header.Get("Proxy-Authorization") != "" {
			// tinyproxy 1.11.1 answers a wrong password so, to CONNECT
			// and to absolute-form alike, with no Via (compared with
			// the real program in TestRealAuthRefused).
			w.Header().Set("Server", "tinyproxy/1.11.1")
			w.Header().Set("WWW-Authenticate", `Basic realm="Tinyproxy"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("Proxy-Authenticate", `Basic realm="test"`)
		w.WriteHeader(http.StatusProxyAuthRequired)
		return
	}
	if raw := p.failRawReply(); raw != "" {
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			io.WriteString(conn, raw)
			conn.Close()
		}
		return
	}
	if failStatus != 0 {
		if failPS != "" {
			w.Header().Set("Proxy-Status", p.name+"; error="+failPS+`; details="scripted"`)
		}
		w.WriteHeader(failStatus)
		return
	}
	if r.Method == http.MethodConnect {
		p.tunnel(w, r)
		return
	}
	if !r.URL.IsAbs() {
		http.Error(w, "not a proxy request", http.StatusBadRequest)
		return
	}
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.Header.Del("Proxy-Authorization")
	out.Header.Del("Proxy-Connection")
	out.Header.Add("Via", "1.1 "+p.name)
	resp, err := p.fwd.RoundTrip(out)
	if err != nil {
		w.Header().Set("Proxy-Status", p.name+"; error=connection_refused")
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	p.mu.Lock()
	p.forwarded++
	p.mu.Unlock()
	maps.Copy(w.Header(), resp.Header)
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}

func (p *httpProxy) tunnel(w http.ResponseWriter, r *http.Request) {
	dst, err := net.Dial("tcp", r.Host)
	if err != nil {
		w.Header().Set("Proxy-Status", p.name+"; error=connection_refused")
		w.WriteHeader(http.StatusBadGateway)
		return
	}
	conn, brw, err := w.(http.Hijacker).Hijack()
	if err != nil {
		dst.Close()
		return
	}
	p.wg.Add(1)
	defer p.wg.Done()
	p.mu.Lock()
	p.conns[conn], p.conns[dst] = struct{}{}, struct{}{}
	p.tunnels++
	p.mu.Unlock()
	io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n")
	splice(conn, brw.Reader, dst)
	p.mu.Lock()
	delete(p.conns, conn)
	delete(p.conns, dst)
	p.mu.Unlock()
}

// splice copies both ways until either side ends, then closes both.
func splice(client net.Conn, clientReader io.Reader, dst net.Conn) {
	var once sync.Once
	closeBoth := func() { client.Close(); dst.Close() }
	done := make(chan struct{})
	go func() {
		defer close(done)
		io.Copy(dst, clientReader)
		once.Do(closeBoth)
	}()
	io.Copy(client, dst)
	once.Do(closeBoth)
	<-done
}

// socksProxy is a small SOCKS5 server for tests (RFC 1928, RFC 1929).
// Its answers to a missing method (0xff), a wrong password (a non-zero
// RFC 1929 status) and a refused target (reply 5) are those of microsocks
// 1.0.3, compared with the real program in TestRealAuthRefused and
// TestRealDeadTarget; its scripted replies (script) follow RFC 1928.
type socksProxy struct {
	name       string
	user, pass string

	ln net.Listener
	wg sync.WaitGroup

	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	connects int    // tunnels established
	lastATYP byte   // address type of the last CONNECT
	lastHost string // host of the last CONNECT
	reply    byte   // scripted: answer every CONNECT with this reply code
	onReply  func() // called before replying to CONNECT
}

func newSOCKSProxy(t *testing.T, name, user, pass string) *socksProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &socksProxy{name: name, user: user, pass: pass, ln: ln, conns: make(map[net.Conn]struct{})}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.Close)
	return p
}

// URL returns the proxy URL for scheme, with userinfo ("" for none).
func (p *socksProxy) URL(scheme, userinfo string) string {
	if userinfo != "" {
		userinfo += "@"
	}
	return scheme + "://" + userinfo + p.ln.Addr().String()
}

// script makes the proxy answer every CONNECT with reply (0 = normally)
// after calling onReply (nil = nothing).
func (p *socksProxy) script(reply byte, onReply func()) {
	p.mu.Lock()
	p.reply, p.onReply = reply, onReply
	p.mu.Unlock()
}

func (p *socksProxy) Close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *socksProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.track(c)
		p.wg.Add(1)
		go p.handle(c)
	}
}

func (p *socksProxy) track(c net.Conn) {
	p.mu.Lock()
	p.conns[c] = struct{}{}
	p.mu.Unlock()
}

func (p *socksProxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

func (p *socksProxy) seen() (connects int, atyp byte, host string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.connects, p.lastATYP, p.lastHost
}

func (p *socksProxy) handle(c net.Conn) {
	defer p.wg.Done()
	defer p.untrack(c)
	br := bufio.NewReader(c)
	var hdr [2]byte
	if _, err := io.ReadFull(br, hdr[:]); err != nil || hdr[0] != 5 {
		return
	}
	methods := make([]byte, hdr[1])
	if _, err := io.ReadFull(br, methods); err != nil {
		return
	}
	want := byte(0)
	if p.user != "" {
		want = 2
	}
	if !strings.ContainsRune(string(methods), rune(want)) {
		c.Write([]byte{5, 0xff})
		return
	}
	c.Write([]byte{5, want})
	if want == 2 {
		user, pass, ok := readUserPass(br)
		if !ok || user != p.user || pass != p.pass {
			c.Write([]byte{1, 1})
			return
		}
		c.Write([]byte{1, 0})
	}
	var req [4]byte
	if _, err := io.ReadFull(br, req[:]); err != nil || req[0] != 5 || req[1] != 1 {
		return
	}
	var host string
	switch req[3] {
	case 1, 4:
		ip := make([]byte, 4)
		if req[3] == 4 {
			ip = make([]byte, 16)
		}
		if _, err := io.ReadFull(br, ip); err != nil {
			return
		}
		host = net.IP(ip).String()
	case 3:
		n, err := br.ReadByte()
		if err != nil {
			return
		}
		name := make([]byte, n)
		if _, err := io.ReadFull(br, name); err != nil {
			return
		}
		host = string(name)
	default:
		return
	}
	var port [2]byte
	if _, err := io.ReadFull(br, port[:]); err != nil {
		return
	}
	p.mu.Lock()
	p.lastATYP, p.lastHost = req[3], host
	reply, onReply := p.reply, p.onReply
	p.mu.Unlock()
	if onReply != nil {
		onReply()
	}
	if reply != 0 {
		c.Write([]byte{5, reply, 0, 1, 0, 0, 0, 0, 0, 0})
		return
	}
	dst, err := net.Dial("tcp", net.JoinHostPort(host, strconv.Itoa(int(binary.BigEndian.Uint16(port[:])))))
	if err != nil {
		c.Write([]byte{5, 5, 0, 1, 0, 0, 0, 0, 0, 0})
		return
	}
	p.track(dst)
	defer p.untrack(dst)
	p.mu.Lock()
	p.connects++
	p.mu.Unlock()
	c.Write([]byte{5, 0, 0, 1, 127, 0, 0, 1, 0, 0})
	splice(c, br, dst)
}

func readUserPass(r *bufio.Reader) (user, pass string, ok bool) {
	ver, err := r.ReadByte()
	if err != nil || ver != 1 {
		return "", "", false
	}
	read := func() (string, bool) {
		n, err := r.ReadByte()
		if err != nil {
			return "", false
		}
		b := make([]byte, n)
		_, err = io.ReadFull(r, b)
		return string(b), err == nil
	}
	if user, ok = read(); !ok {
		return "", "", false
	}
	pass, ok = read()
	return user, pass, ok
}
