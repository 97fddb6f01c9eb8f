package preflightinput_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/egresskit/egresskit/internal/preflightinput"
	"github.com/egresskit/egresskit/internal/probeinput"
	"github.com/egresskit/egresskit/probe"
)

func TestTargets(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		want     []probe.Target
		wantErr  error
		wantLine int
	}{
		{"one", "https://example.com/\n", []probe.Target{{URL: "https://example.com/"}}, nil, 0},
		{"no trailing newline", "http://a.example/x", []probe.Target{{URL: "http://a.example/x"}}, nil, 0},
		{"comments and blanks", "# fleet\n\n  http://a.example/  \r\n\t# more\nhttp://b.example/ p1\n",
			[]probe.Target{{URL: "http://a.example/"}, {URL: "http://b.example/", Egress: "p1"}}, nil, 0},
		{"proxy egress", "http://a.example/ socks5://u:p@127.0.0.1:1080\n",
			[]probe.Target{{URL: "http://a.example/", Egress: "socks5://u:p@127.0.0.1:1080"}}, nil, 0},
		{"empty", "", nil, probe.ErrNoTargets, 0},
		{"only comments", "# a\n\n# b\n", nil, probe.ErrNoTargets, 0},
		{"no scheme", "http://a.example/\nexample.com/x\n", nil, probeinput.ErrUnsupportedScheme, 2},
		{"ftp", "\n\nftp://example.com/\n", nil, probeinput.ErrUnsupportedScheme, 3},
		{"no host", "http://\n", nil, probeinput.ErrMissingHost, 1},
		{"bad port", "http://a.example:99999/\n", nil, probeinput.ErrBadPort, 1},
		{"three fields", "http://a.example/ p1 extra\n", nil, probeinput.ErrSyntax, 1},
		{"bad proxy port", "http://a.example/\nhttp://b.example/ http://u:p@127.0.0.1:0\n", nil, probeinput.ErrBadPort, 2},
		{"100 KB line", "http://a.example/\nhttp://b.example/" + strings.Repeat("x", 100<<10) + "\nhttp://c.example/\n", nil, probeinput.ErrTooLong, 2},
		{"long URL", "http://b.example/" + strings.Repeat("x", probeinput.MaxURLLength) + "\n", nil, probeinput.ErrTooLong, 1},
		{"control character", "http://a.example/\x7f\n", nil, probeinput.ErrMalformedURL, 1},
		{"byte order mark", "\xef\xbb\xbfhttp://a.example/\r\nhttp://b.example/\r\n",
			[]probe.Target{{URL: "http://a.example/"}, {URL: "http://b.example/"}}, nil, 0},
		{"byte order mark before a comment", "\xef\xbb\xbf# fleet\nhttp://a.example/\n", []probe.Target{{URL: "http://a.example/"}}, nil, 0},
		{"byte order mark only at the start", "http://a.example/\n\xef\xbb\xbfhttp://b.example/\n", nil, probeinput.ErrMalformedURL, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := preflightinput.Targets(strings.NewReader(tt.in))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Targets(%.40q) error = %v, want %v", tt.in, err, tt.wantErr)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Targets(%.40q) = %v, want %v", tt.in, got, tt.want)
			}
			if tt.wantLine == 0 {
				return
			}
			var te *probe.TargetError
			var pe *probe.InvalidProxyError
			switch {
			case errors.As(err, &te):
				if te.Line != tt.wantLine {
					t.Errorf("TargetError.Line = %d, want %d", te.Line, tt.wantLine)
				}
			case errors.As(err, &pe):
				if pe.Line != tt.wantLine {
					t.Errorf("InvalidProxyError.Line = %d, want %d", pe.Line, tt.wantLine)
				}
			default:
				t.Errorf("error %v names no line", err)
			}
			if !strings.Contains(err.Error(), "line ") {
				t.Errorf("error %q does not name the line", err)
			}
			if strings.Contains(err.Error(), "u:p@") || len(err.Error()) > 400 {
				t.Errorf("error %q leaks credentials or echoes the input", err)
			}
		})
	}
}

func TestProxies(t *testing.T) {
	in := "# pool\nhttp://u:secret-pw@127.0.0.1:3128\nresi socks5h://127.0.0.1:1080\n\ndirect\n"
	got, err := preflightinput.Proxies(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(got))
	for i, e := range got {
		ids[i] = e.ID
	}
	if want := []string{"http://127.0.0.1:3128", "resi", "direct"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("Proxies IDs = %v, want %v", ids, want)
	}
	if got[0].Proxy != "http://u:secret-pw@127.0.0.1:3128" {
		t.Errorf("Proxies kept proxy %q, want the URL with its credentials", got[0].Proxy)
	}
	for _, bad := range []struct {
		in   string
		want error
		line int
	}{
		{"http://127.0.0.1:3128\nhttp://u:secret-pw@127.0.0.1:65536\n", probeinput.ErrBadPort, 2},
		{"a b c\n", probeinput.ErrSyntax, 1},
		{"p1 http://127.0.0.1:1\np1 http://127.0.0.1:2\n", probeinput.ErrSyntax, 2},
		{"ftp://127.0.0.1:21\n", probeinput.ErrUnsupportedScheme, 1},
		{"", preflightinput.ErrNoProxies, 0},
	} {
		_, err := preflightinput.Proxies(strings.NewReader(bad.in))
		var pe *probe.InvalidProxyError
		if !errors.Is(err, bad.want) {
			t.Errorf("Proxies(%q) error = %v, want %v", bad.in, err, bad.want)
		} else if bad.line > 0 && (!errors.As(err, &pe) || pe.Line != bad.line) {
			t.Errorf("Proxies(%q) error = %v, want line %d", bad.in, err, bad.line)
		}
		if err != nil && strings.Contains(err.Error(), "secret-pw") {
			t.Errorf("Proxies error %q leaks the password", err)
		}
	}
}

func FuzzTargets(f *testing.F) {
	for _, s := range []string{
		"https://example.com/\n",
		"# c\nhttp://a.example/ p1\nhttp://b.example:8080/x?y=1 socks5://u:p@127.0.0.1:1080\n",
		"ftp://x\n",
		"http://[::1]:80/\r\n",
		"http://a.example/ direct\n\n",
		"http://%zz/\n",
		"\xff\xfe\n",
		"\xef\xbb\xbfhttp://a.example/\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		targets, err := preflightinput.Targets(strings.NewReader(in))
		// A byte order mark in front changes nothing.
		if !strings.HasPrefix(in, "\ufeff") {
			bt, berr := preflightinput.Targets(strings.NewReader("\ufeff" + in))
			if !reflect.DeepEqual(bt, targets) || fmt.Sprint(berr) != fmt.Sprint(err) {
				t.Fatalf("with a BOM: %v, %v; without: %v, %v", bt, berr, targets, err)
			}
		}
		if err != nil {
			if targets != nil {
				t.Fatalf("Targets returned targets with error %v", err)
			}
			return
		}
		if len(targets) == 0 {
			t.Fatal("Targets returned no targets and no error")
		}
		for _, tg := range targets {
			if tg.URL == "" || strings.ContainsAny(tg.URL, " \t\n") || !strings.HasPrefix(strings.ToLower(tg.URL), "http") {
				t.Fatalf("Targets accepted target %q", tg.URL)
			}
		}
	})
}

func FuzzProxies(f *testing.F) {
	for _, s := range []string{
		"http://u:p@127.0.0.1:3128\n",
		"resi socks5h://127.0.0.1:1080\ndirect\n",
		"a b c\n",
		"http://127.0.0.1:99999\n",
		"# c\n\nhttps://[::1]/\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		eps, err := preflightinput.Proxies(strings.NewReader(in))
		if err != nil {
			if eps != nil {
				t.Fatalf("Proxies returned endpoints with error %v", err)
			}
			return
		}
		seen := map[string]bool{}
		for _, e := range eps {
			if e.ID == "" || seen[e.ID] {
				t.Fatalf("Proxies produced endpoint ID %q (seen %v)", e.ID, seen[e.ID])
			}
			seen[e.ID] = true
		}
	})
}

func TestProxiesLabels(t *testing.T) {
	in := "fra-1 http://u:p=w@10.0.0.5:3128 region=eu kind=datacenter\nhttp://10.0.0.6:3128 region=us\ndirect\n"
	eps, err := preflightinput.Proxies(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []map[string]string{{"region": "eu", "kind": "datacenter"}, {"region": "us"}, nil}
	for i, e := range eps {
		if !reflect.DeepEqual(e.Labels, want[i]) {
			t.Errorf("endpoint %d (%s) labels = %v, want %v", i, e.ID, e.Labels, want[i])
		}
	}
	if eps[0].ID != "fra-1" || eps[0].Proxy != "http://u:p=w@10.0.0.5:3128" {
		t.Errorf("endpoint 0 = %q %q", eps[0].ID, eps[0].Proxy)
	}
	if _, err := preflightinput.Proxies(strings.NewReader("http://10.0.0.5:3128 =eu\n")); !errors.Is(err, probeinput.ErrSyntax) {
		t.Errorf("a label without key: %v, want ErrSyntax", err)
	}
}
