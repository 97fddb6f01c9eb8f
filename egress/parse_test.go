package egress

import (
	"fmt"
	"strings"
	"testing"
)

func TestParseProxyStatus(t *testing.T) {
	tests := []struct {
		lines     []string
		wantName  string
		wantError string
		wantOK    bool
	}{
		{nil, "", "", false},
		{[]string{"squid; error=dns_timeout"}, "squid", "dns_timeout", true},
		{[]string{`squid; error=dns_timeout; details="no answer from 10.0.0.53"`}, "squid", "dns_timeout", true},
		{[]string{`"Squid Proxy";error=connection_refused`}, "Squid Proxy", "connection_refused", true},
		{[]string{"origin-cdn; error=http_response_timeout, our-proxy; received-status=504"}, "our-proxy", "", true},
		{[]string{"origin-cdn; error=tls_alert_received", "our-proxy; error=proxy_internal_error"}, "our-proxy", "proxy_internal_error", true},
		{[]string{"p; rcode=SERVFAIL; error=dns_error; info-code=23"}, "p", "dns_error", true},
		{[]string{"p; received-status=503; next-hop=example.com; next-protocol=h2"}, "p", "", true},
		{[]string{"p; error=\"dns_timeout\""}, "p", "", true}, // error must be a token
		{[]string{"p; flag; error=proxy_loop_detected"}, "p", "proxy_loop_detected", true},
		{[]string{"p; bytes=:AQID:; dec=-1.5; b=?1; error=connection_limit_reached"}, "p", "connection_limit_reached", true},
		{[]string{"p; error=dns_timeout,"}, "", "", false},
		{[]string{"p error=dns_timeout"}, "", "", false},
		{[]string{`"unterminated; error=dns_timeout`}, "", "", false},
		{[]string{"1proxy; error=dns_timeout"}, "", "", false},
		{[]string{"p; Error=dns_timeout"}, "", "", false},
	}
	for _, tt := range tests {
		got, ok := parseProxyStatus(tt.lines)
		if ok != tt.wantOK || got.name != tt.wantName || got.error != tt.wantError {
			t.Errorf("parseProxyStatus(%q) = {%q %q} %v, want {%q %q} %v", tt.lines, got.name, got.error, ok, tt.wantName, tt.wantError, tt.wantOK)
		}
	}
}

func FuzzParseProxyStatus(f *testing.F) {
	for _, s := range []string{
		"squid; error=dns_timeout",
		`"x"; error=connection_refused; details="a \"b\""`,
		"a, b; error=proxy_internal_error; received-status=502",
		"p; x=:AAA=:; y=?0; z=-12.5",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ps, ok := parseProxyStatus([]string{s})
		if !ok && (ps.name != "" || ps.error != "") {
			t.Fatalf("parseProxyStatus(%q) = %+v with ok false", s, ps)
		}
		if ps.error != "" {
			if !strings.Contains(s, "error="+ps.error) {
				t.Fatalf("parseProxyStatus(%q).error = %q, not in the input", s, ps.error)
			}
			_, _ = proxyStatusKind(ps.error) // must not panic
		}
	})
}

func TestSOCKSFailure(t *testing.T) {
	tests := []struct {
		seen []byte
		want string
	}{
		{nil, failHandshake},
		{[]byte{4, 0}, failHandshake},
		{[]byte{5, 0xff}, failAuth},
		{[]byte{5, 2}, failAuth},            // hung up on our credentials
		{[]byte{5, 2, 1, 1}, failAuth},      // credentials refused
		{[]byte{5, 2, 1, 0}, failHandshake}, // hung up after authentication
		{[]byte{5, 2, 1, 0, 5, 4, 0, 1}, failDestination},
		{[]byte{5, 0, 5, 1, 0, 1}, failProxy},
		{[]byte{5, 0, 5, 2, 0, 1}, failProxy},
		{[]byte{5, 0, 5, 3, 0, 1}, failProxy},
		{[]byte{5, 0, 5, 5, 0, 1}, failDestination},
		{[]byte{5, 0, 5, 6, 0, 1}, failDestination},
		{[]byte{5, 0, 5, 7, 0, 1}, failHandshake},
		{[]byte{5, 0, 5, 0, 1, 9}, failHandshake},
	}
	for _, tt := range tests {
		if got := socksFailure(tt.seen); got != tt.want {
			t.Errorf("socksFailure(%v) = %q, want %q", tt.seen, got, tt.want)
		}
	}
}

// socksReplyKind maps each SOCKS5 reply code (RFC 1928 section 6) to the
// failure it names: the destination's fault for host unreachable (0x04),
// connection refused (0x05) and TTL expired (0x06); a protocol mismatch for
// a "succeeded" reply that still failed (0x00) and for command (0x07) or
// address type (0x08) not supported; the proxy's own fault for every other
// code (general failure, ruleset, network unreachable, unassigned).
func socksReplyKind(rep byte) string {
	switch rep {
	case 0x04, 0x05, 0x06:
		return failDestination
	case 0x00, 0x07, 0x08:
		return failHandshake
	}
	return failProxy
}

// FuzzSOCKSFailure reads arbitrary proxy bytes as the three SOCKS5 phases —
// method selection, RFC 1929 authentication when the proxy chose it, reply
// — and checks that socksFailure names the phase where the handshake
// broke: no SOCKS5 answer is a handshake failure; "no acceptable method",
// a hang-up after our credentials or a refusal of them is an auth failure;
// a reply is mapped by its code (socksReplyKind). Bytes after the reply
// code never change the answer.
func FuzzSOCKSFailure(f *testing.F) {
	f.Add([]byte{5, 2, 1, 0, 5, 4, 0, 1})
	f.Add([]byte{5, 0xff})
	f.Add([]byte{5, 2, 1, 7})
	f.Add([]byte{5, 0, 5, 0x08, 0, 1})
	f.Add([]byte{5, 0, 4, 5})
	f.Add([]byte{5, 1, 5, 1})
	f.Add([]byte{5, 0, 5})
	f.Add([]byte{5, 2, 1, 0, 5})
	f.Fuzz(func(t *testing.T, b []byte) {
		want, end := failHandshake, len(b)
		var rep byte // the reply code, when the bytes got that far
		hasRep := false
		switch {
		case len(b) < 2 || b[0] != 5:
			// not a SOCKS5 method selection
		case b[1] == 0xff:
			want, end = failAuth, 2
		case b[1] == 0x02 && (len(b) < 4 || b[3] != 0):
			want, end = failAuth, min(len(b), 4)
		default:
			off := 2
			if b[1] == 0x02 {
				off = 4
			}
			if len(b) >= off+2 && b[off] == 5 {
				want, end = socksReplyKind(b[off+1]), off+2
				rep, hasRep = b[off+1], true
			}
		}
		if got := socksFailure(b); got != want {
			t.Fatalf("socksFailure(%v) = %q, want %q", b, got, want)
		}
		if got, ok := socksReply(b); got != rep || ok != hasRep {
			t.Fatalf("socksReply(%v) = %#x, %v; want %#x, %v", b, got, ok, rep, hasRep)
		}
		if end < len(b) {
			// What follows the decisive byte does not matter.
			if got := socksFailure(b[:end]); got != want {
				t.Fatalf("socksFailure(%v) = %q, want %q as for %v", b[:end], got, want, b)
			}
		}
	})
}

func TestParseProxy(t *testing.T) {
	tests := []struct {
		raw          string
		wantKind     proxyKind
		wantAddr     string
		wantRedacted string
	}{
		{"", kindDirect, "", "direct"},
		{"Direct", kindDirect, "", "direct"},
		{"http://proxy.example:3128/", kindHTTP, "proxy.example:3128", "http://proxy.example:3128"},
		{"http://proxy.example", kindHTTP, "proxy.example:80", "http://proxy.example:80"},
		{"HTTPS://u:p@proxy.example", kindHTTPS, "proxy.example:443", "https://proxy.example:443"},
		{"socks5://u:p@10.0.0.1", kindSOCKS5, "10.0.0.1:1080", "socks5://10.0.0.1:1080"},
		{"socks5h://[::1]:9050", kindSOCKS5H, "[::1]:9050", "socks5h://[::1]:9050"},
	}
	for _, tt := range tests {
		got, err := parseProxy("id", tt.raw)
		if err != nil || got.kind != tt.wantKind || got.addr != tt.wantAddr || got.redacted != tt.wantRedacted {
			t.Errorf("parseProxy(%q) = {%v %q %q}, %v; want {%v %q %q}", tt.raw, got.kind, got.addr, got.redacted, err, tt.wantKind, tt.wantAddr, tt.wantRedacted)
		}
	}
}

// FuzzParseProxy checks that parsing never panics and that neither its
// errors nor the String forms ever contain the password, wherever the
// rest of the URL goes wrong.
func FuzzParseProxy(f *testing.F) {
	const marker = "Pw-Zx19-marker"
	for _, s := range [][3]string{
		{"http", "user", "proxy.example:3128"},
		{"socks5h", "u", "[::1]:99999"},
		{"ftp", "a", "c"},
		{"http", "u", "h:x1/path?q#f"},
		{"https", "", ""},
		{"socks5", "", "h"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, scheme, user, rest string) {
		if strings.Contains(scheme+user+rest, marker[:4]) {
			return
		}
		raw := scheme + "://" + user + ":" + marker + "@" + rest
		p, err := parseProxy("fuzz", raw)
		text := p.redacted + redactProxy(raw) + Endpoint{ID: "fuzz", Proxy: raw}.String() +
			fmt.Sprintf("%#v", Endpoint{ID: "fuzz", Proxy: raw})
		if err != nil {
			text += err.Error()
		}
		if strings.Contains(text, marker[:4]) {
			t.Fatalf("parseProxy(%q) leaks the password: %q", raw, text)
		}
	})
}

// TestSubsetMovement measures, below the API, how subsets of size 2 move
// when an endpoint joins twenty: a host's subset changes only by the new
// endpoint taking one place, for about 2/21 of hosts, so about 1/21 of all
// (host, place) assignments move.
func TestSubsetMovement(t *testing.T) {
	var members []*endpoint
	for i := range 20 {
		members = append(members, &endpoint{seed: endpointSeed(fmt.Sprintf("ep-%02d", i))})
	}
	added := &endpoint{seed: endpointSeed("ep-new")}
	const hosts = 50000
	changedHosts, movedPlaces := 0, 0
	for i := range hosts {
		hh := hostHash(fmt.Sprintf("site-%d.example", i))
		before := topK(members, hh, 2, true)
		after := topK(append(members[:20:20], added), hh, 2, true)
		changed := false
		for _, e := range after {
			if !inSubset(before, e) {
				if e != added {
					t.Fatalf("host %d gained an old endpoint", i)
				}
				movedPlaces++
				changed = true
			}
		}
		if changed {
			changedHosts++
		}
	}
	hostFrac := float64(changedHosts) / hosts
	placeFrac := float64(movedPlaces) / (2 * hosts)
	t.Logf("subset size 2, 20→21 endpoints: %.4f of hosts changed subset (ideal 2/21 = %.4f), %.4f of assignments moved (ideal 1/21 = %.4f)",
		hostFrac, 2.0/21, placeFrac, 1.0/21)
	if placeFrac > 1.0/20+0.01 {
		t.Errorf("%.4f of assignments moved, want ≤ %.4f", placeFrac, 1.0/20+0.01)
	}
	if hostFrac > 2.0/20+0.01 {
		t.Errorf("%.4f of hosts changed subset, want ≤ %.4f", hostFrac, 2.0/20+0.01)
	}
}

func TestTopKOrder(t *testing.T) {
	var members []*endpoint
	for i := range 100 {
		members = append(members, &endpoint{seed: endpointSeed(fmt.Sprint(i)), weight: float64(1 + i%3)})
	}
	hh := hostHash("example.com")
	for k := 0; k <= 101; k += 7 {
		got := topK(members, hh, k, false)
		if len(got) != min(k, 100) {
			t.Fatalf("topK(k=%d) has %d members", k, len(got))
		}
		for i := 1; i < len(got); i++ {
			if score(hh, got[i-1]) < score(hh, got[i]) {
				t.Fatalf("topK(k=%d) not in descending weight order at %d", k, i)
			}
		}
		// With equal weights the shortcut ranks as the score does.
		equal := make([]*endpoint, len(members))
		for i, e := range members {
			equal[i] = &endpoint{seed: e.seed, weight: 3}
		}
		a, b := topK(equal, hh, k, true), topK(equal, hh, k, false)
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("topK(k=%d) with equal weights: uniform ranking differs from the score at %d", k, i)
			}
		}
		// Nothing outside beats the last member.
		for _, e := range members {
			if len(got) > 0 && !inSubset(got, e) && score(hh, e) > score(hh, got[len(got)-1]) {
				t.Fatalf("topK(k=%d) misses a heavier member", k)
			}
		}
	}
}

// FuzzParseProxyCutPassword puts an unencoded '/', '?' or '#' inside the
// password, which cuts the URL's authority short: the URL must be
// rejected, and no part of the password may appear in the error or in
// the String forms.
func FuzzParseProxyCutPassword(f *testing.F) {
	const head, tail = "Qk7", "Zx19tail"
	f.Add("http", "user", byte('/'), "proxy.example:3128")
	f.Add("socks5h", "u", byte('?'), "[::1]:1080")
	f.Add("https", "", byte('#'), "h")
	f.Add("http", "u", byte('/'), "12@h:1")
	f.Fuzz(func(t *testing.T, scheme, user string, sep byte, rest string) {
		if sep != '/' && sep != '?' && sep != '#' {
			return
		}
		if strings.Contains(scheme+user+rest, head) || strings.Contains(scheme+user+rest, tail[:4]) {
			return
		}
		raw := scheme + "://" + user + ":" + head + string(sep) + tail + "@" + rest
		p, err := parseProxy("fuzz", raw)
		if err == nil {
			t.Fatalf("parseProxy(%q) accepted a URL whose password holds an unencoded %q: %+v", raw, sep, p.redacted)
		}
		text := err.Error() + redactProxy(raw) + Endpoint{ID: "fuzz", Proxy: raw}.String() +
			fmt.Sprintf("%#v", Endpoint{ID: "fuzz", Proxy: raw})
		if strings.Contains(text, head) || strings.Contains(text, tail[:4]) {
			t.Fatalf("parseProxy(%q) leaks a piece of the password: %q", raw, text)
		}
	})
}
