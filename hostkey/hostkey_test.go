package hostkey

import (
	"errors"
	"net/url"
	"strings"
	"testing"
)

func TestOf(t *testing.T) {
	tests := []struct {
		in   string
		mode Mode
		want string
	}{
		{"http://example.com/", ByHost, "example.com"},
		{"https://Example.COM./path", ByHost, "example.com"},
		{"https://EXAMPLE.com.:443/", ByHost, "example.com"},
		{"http://example.com:80", ByHost, "example.com"},
		{"http://example.com:443", ByHost, "example.com"},
		{"https://example.com:80", ByHost, "example.com"},
		{"http://example.com:8080", ByHost, "example.com:8080"},
		{"http://example.com:08080", ByHost, "example.com:8080"},
		{"http://example.com:", ByHost, "example.com"},
		{"http://user:secret@example.com/", ByHost, "example.com"},
		{"http://a.example.com/", ByHost, "a.example.com"},
		{"http://a.example.com/", ByDomain, "example.com"},
		{"http://b.a.Example.com.:8443/", ByDomain, "example.com:8443"},
		{"http://www.example.co.uk/", ByDomain, "example.co.uk"},
		{"http://foo.github.io/", ByDomain, "foo.github.io"},
		{"http://co.uk/", ByDomain, "co.uk"},
		{"http://localhost:3000/", ByDomain, "localhost:3000"},
		{"http://bücher.example/", ByHost, "xn--bcher-kva.example"},
		{"http://BÜCHER.example./", ByHost, "xn--bcher-kva.example"},
		{"http://xn--bcher-kva.example/", ByHost, "xn--bcher-kva.example"},
		{"http://XN--BCHER-KVA.example/", ByHost, "xn--bcher-kva.example"},
		{"http://例え.テスト/", ByHost, "xn--r8jz45g.xn--zckzah"},
		{"http://www.bücher.de/", ByDomain, "xn--bcher-kva.de"},
		{"http://ｅｘａｍｐｌｅ.com/", ByHost, "example.com"},
		{"http://my_host.example.com/", ByHost, "my_host.example.com"},
		{"http://r3---sn-abc.googlevideo.com/", ByHost, "r3---sn-abc.googlevideo.com"},
		{"http://127.0.0.1:8080/", ByHost, "127.0.0.1:8080"},
		{"http://127.0.0.1:80/", ByDomain, "127.0.0.1"},
		{"http://[::1]:8080/", ByHost, "[::1]:8080"},
		{"http://[0:0:0:0:0:0:0:1]/", ByHost, "[::1]"},
		{"http://[2001:DB8::1]:443/", ByDomain, "[2001:db8::1]"},
		{"http://[fe80::1%25en0]:8080/", ByHost, "[fe80::1%en0]:8080"},
	}
	for _, tt := range tests {
		u, err := url.Parse(tt.in)
		if err != nil {
			t.Fatalf("url.Parse(%q): %v", tt.in, err)
		}
		got, err := Of(u, tt.mode)
		if err != nil || got != tt.want {
			t.Errorf("Of(%q, %v) = %q, %v, want %q, nil", tt.in, tt.mode, got, err, tt.want)
		}
	}
}

func TestOfErrors(t *testing.T) {
	long := strings.Repeat("a", 64) + ".example"
	longName := strings.Repeat("abcdefghi.", 26) + "com" // 263 bytes
	tests := []struct {
		host string
		mode Mode
		want error
	}{
		{"", ByHost, ErrEmptyHost},
		{":8080", ByHost, ErrEmptyHost},
		{".", ByHost, ErrEmptyHost},
		{".:80", ByHost, ErrEmptyHost},
		{"example.com:0", ByHost, ErrInvalidHost},
		{"example.com:65536", ByHost, ErrInvalidHost},
		{"example.com:-1", ByHost, ErrInvalidHost},
		{"example.com:+80", ByHost, ErrInvalidHost},
		{"example.com:http", ByHost, ErrInvalidHost},
		{"[fe80::1%\xc0]", ByHost, ErrInvalidHost},
		{"[fe80::1%a b]", ByHost, ErrInvalidHost},
		{"exa mple.com", ByHost, ErrInvalidHost},
		{"a..example.com", ByHost, ErrInvalidHost},
		{".example.com", ByHost, ErrInvalidHost},
		{"example.com..", ByHost, ErrInvalidHost},
		{"ex/ample.com", ByHost, ErrInvalidHost},
		{"user@example.com", ByHost, ErrInvalidHost},
		{"[::1", ByHost, ErrInvalidHost},
		{"[]:80", ByHost, ErrInvalidHost},
		{"[::1]x", ByHost, ErrInvalidHost},
		{"[not-an-ip]", ByHost, ErrInvalidHost},
		{"::1", ByHost, ErrInvalidHost},
		{long, ByHost, ErrInvalidHost},
		{longName, ByHost, ErrInvalidHost},
		{"xn--a.example", ByHost, ErrInvalidHost},
		{"xn--abc-.example", ByHost, ErrInvalidHost},
		{"\x00.example", ByHost, ErrInvalidHost},
		{"\xff.example", ByHost, ErrInvalidHost},
		{"example.com", Mode(7), ErrInvalidHost},
	}
	for _, tt := range tests {
		got, err := Of(&url.URL{Scheme: "http", Host: tt.host}, tt.mode)
		if !errors.Is(err, tt.want) {
			t.Errorf("Of(%q, %v) = %q, %v, want error %v", tt.host, tt.mode, got, err, tt.want)
		}
		if err != nil && tt.host != "" && strings.Contains(err.Error(), tt.host) {
			t.Errorf("Of(%q) error %q repeats the host", tt.host, err)
		}
	}
	if got, err := Of(nil, ByHost); !errors.Is(err, ErrEmptyHost) {
		t.Errorf("Of(nil) = %q, %v, want %v", got, err, ErrEmptyHost)
	}
	u, _ := url.Parse("mailto:someone@example.com")
	if got, err := Of(u, ByHost); !errors.Is(err, ErrEmptyHost) {
		t.Errorf("Of(mailto) = %q, %v, want %v", got, err, ErrEmptyHost)
	}
}

func TestModeString(t *testing.T) {
	for m, want := range map[Mode]string{ByHost: "host", ByDomain: "domain", 9: "unknown"} {
		if got := m.String(); got != want {
			t.Errorf("Mode(%d).String() = %q, want %q", m, got, want)
		}
	}
}

// canonical are hosts already in key form, with the key each mode gives.
var canonical = []struct{ host, byHost, byDomain string }{
	{"example.com", "example.com", "example.com"},
	{"www.example.com", "www.example.com", "example.com"},
	{"www.example.com:8080", "www.example.com:8080", "example.com:8080"},
	{"a.b.example.co.uk:8443", "a.b.example.co.uk:8443", "example.co.uk:8443"},
	{"my_host.example.com", "my_host.example.com", "example.com"},
	{"foo.github.io", "foo.github.io", "foo.github.io"},
	{"co.uk", "co.uk", "co.uk"},
	{"localhost:3000", "localhost:3000", "localhost:3000"},
	{"127.0.0.1", "127.0.0.1", "127.0.0.1"},
	{"127.0.0.1:41234", "127.0.0.1:41234", "127.0.0.1:41234"},
	{"10.0.255.0:65535", "10.0.255.0:65535", "10.0.255.0:65535"},
	{"[::1]", "[::1]", "[::1]"},
	{"[::1]:8080", "[::1]:8080", "[::1]:8080"},
	{"[2001:db8::1]:1", "[2001:db8::1]:1", "[2001:db8::1]:1"},
	{"[::ffff:1.2.3.4]", "[::ffff:1.2.3.4]", "[::ffff:1.2.3.4]"},
	{"192.168.0.9:9090", "192.168.0.9:9090", "192.168.0.9:9090"},
	{"[2001:db8::a0f9]:19", "[2001:db8::a0f9]:19", "[2001:db8::a0f9]:19"},
	{"r3---sn-abc.googlevideo.com", "r3---sn-abc.googlevideo.com", "googlevideo.com"},
	{"zz9.example0.org:9", "zz9.example0.org:9", "example0.org:9"},
	{label63 + ".example", label63 + ".example", label63 + ".example"},
	{name253, name253, name253[len(name253)-len("abcdefghi.com"):]},
}

// label63 is a label of the greatest length, name253 a name of the
// greatest length.
var (
	label63 = strings.Repeat("a", 63)
	name253 = strings.Repeat("abcdefghi.", 25) + "com"
)

// TestOfCanonical checks that a host already in key form gives its key
// without allocating: always by host, and by domain for IP addresses. A
// name's registrable domain costs one allocation, in
// publicsuffix.PublicSuffix (the error of its check for an IP address).
func TestOfCanonical(t *testing.T) {
	for _, c := range canonical {
		u := &url.URL{Scheme: "http", Host: c.host}
		for mode, want := range map[Mode]string{ByHost: c.byHost, ByDomain: c.byDomain} {
			if got, err := Of(u, mode); err != nil || got != want {
				t.Errorf("Of(%q, %v) = %q, %v, want %q, nil", c.host, mode, got, err, want)
			}
			allowed := 0.0
			if mode == ByDomain && !canonicalIPv4(hostOnly(c.host)) && c.host[0] != '[' {
				allowed = 1
			}
			if n := testing.AllocsPerRun(100, func() { Of(u, mode) }); n > allowed {
				t.Errorf("Of(%q, %v) allocates %v times, want %v", c.host, mode, n, allowed)
			}
		}
	}
}

// hostOnly is hostport without an unbracketed port.
func hostOnly(hostport string) string {
	if i := strings.LastIndexByte(hostport, ':'); i >= 0 && hostport[0] != '[' {
		return hostport[:i]
	}
	return hostport
}

// FuzzOf checks that Of never panics, that a key is canonical (it is
// lower-case ASCII without a trailing dot, and keying it again returns it
// unchanged), and that the allocation-free path for hosts already in key
// form gives the key the full normalisation gives.
func FuzzOf(f *testing.F) {
	for _, s := range []string{
		"example.com", "Example.COM.", "a.b.example.co.uk:8080", "[::1]:443",
		"127.0.0.1", "bücher.de", ":80", "", "[fe80::1%en0]", "xn--bcher-kva.de",
		"a..b", "ｅｘａｍｐｌｅ.com", "\xff", "[", "host:99999",
		"127.0.0.1:8080", "01.2.3.4", "1.2.3", "1.2.3.4.5", "256.1.1.1", "[1.2.3.4]",
		"[::FFFF:1.2.3.4]", "[0:0::1]:8080", "example.com:080", "example.com:80",
		"example.com:65535", "example.com:", "my_host.example.com", "localhost:3000",
		"foo.github.io:8443", "www.example.co.uk", "a.co.uk:1", "[2001:db8::1]:65536",
		"[1:2]", "[1:2]:8080", "[::1::2]", "[::1]:", "[::1]x", "Example.com:8080", "a-b.c_d.example",
		"www.xn--bcher-kva.de", "xn-x.de", "x.xn-.de", ".example.com", "example.com.",
		strings.Repeat("a", 63) + ".com", strings.Repeat("a", 64) + ".com",
		strings.Repeat("a.", 126) + "b", strings.Repeat("a.", 126) + "bc",
	} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, host string, domain bool) {
		mode := ByHost
		if domain {
			mode = ByDomain
		}
		key, err := Of(&url.URL{Scheme: "https", Host: host}, mode)
		if host != "" {
			if k, ok := fast(host, mode); ok {
				if sk, serr := slow(host, mode); serr != nil || sk != k {
					t.Fatalf("fast(%q, %v) = %q, but slow = %q, %v", host, mode, k, sk, serr)
				}
			}
		}
		if err != nil {
			if !errors.Is(err, ErrEmptyHost) && !errors.Is(err, ErrInvalidHost) {
				t.Fatalf("Of(%q) error %v is neither ErrEmptyHost nor ErrInvalidHost", host, err)
			}
			return
		}
		if key == "" || strings.HasSuffix(key, ".") || !ascii(key) {
			t.Fatalf("Of(%q) = %q, not a canonical key", host, key)
		}
		if !strings.HasPrefix(key, "[") && key != strings.ToLower(key) {
			t.Fatalf("Of(%q) = %q, not lower case", host, key)
		}
		again, err := Of(&url.URL{Scheme: "http", Host: key}, mode)
		if err != nil || again != key {
			t.Fatalf("Of(Of(%q) = %q) = %q, %v, want the key unchanged", host, key, again, err)
		}
	})
}

func BenchmarkOf(b *testing.B) {
	for _, mode := range []Mode{ByHost, ByDomain} {
		for _, in := range []string{
			"https://www.example.com/a", "https://www.example.com:8443/", "https://WWW.Bücher.de:8443/",
			"http://127.0.0.1:41234/", "http://[::1]:8080/",
		} {
			u, _ := url.Parse(in)
			b.Run("mode="+mode.String()+"/host="+u.Host, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := Of(u, mode); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
