package testprog_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

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

// TestRateLimitedNginxNoDelay checks limit_req's refusing form: at 1 r/s
// with burst=1 nodelay, two requests back to back pass, the second not
// queued (nginx's own $limit_req_status says PASSED, not DELAYED: no
// clock is read here), and the third is refused.
func TestRateLimitedNginxNoDelay(t *testing.T) {
	n := testprog.RateLimitedNginx(t, testprog.NginxLimit{PerSecond: 1, Burst: 1, NoDelay: true, RetryAfter: 2})
	for i, want := range []int{200, 200, 429} {
		resp, err := http.Get(n.URL + "/p/" + strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("request %d: %d, want %d", i+1, resp.StatusCode, want)
		}
	}
	// nginx logs a request after answering it: wait for the three lines.
	var got []string
	for range 200 {
		got = got[:0]
		for line := range strings.SplitSeq(n.Log(), "\n") {
			if f := strings.Fields(line); len(f) == 4 {
				got = append(got, f[3])
			}
		}
		if len(got) >= 3 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if want := []string{"PASSED", "PASSED", "REJECTED"}; !slices.Equal(got, want) {
		t.Errorf("limit_req did %v, want %v (nodelay: the second passes at once, not DELAYED)", got, want)
	}
}

// TestRateLimitedHAProxy checks the HAProxy the convergence tests rely on:
// 3 requests per 10 s pass, the 4th is a 429 with Retry-After: 2, and so
// is a 5th at once.
func TestRateLimitedHAProxy(t *testing.T) {
	h := testprog.RateLimitedHAProxy(t, testprog.HAProxyLimit{Requests: 3, Period: 10 * time.Second, RetryAfter: 2})
	get := func(i int) (int, string) {
		t.Helper()
		resp, err := http.Get(h.URL + "/p/" + strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Retry-After")
	}
	for i, want := range []int{200, 200, 200, 429} {
		if status, ra := get(i); status != want || (status == 429) != (ra == "2") {
			t.Errorf("request %d: %d with Retry-After %q, want %d (Retry-After 2 on a 429) (haproxy %s)", i+1, status, ra, want, h.Version)
		}
	}
	if status, _ := get(4); status != 429 {
		t.Errorf("request 5 at once: %d, want 429", status)
	}
}

// TestRateLimitedHAProxyAdvertised checks the advertised fixed window: 3
// requests per 10 s pass with X-RateLimit-Remaining 2, 1, 0 and the same
// X-RateLimit-Reset of at most 10 s; the 4th is a 429 whose Retry-After is
// that reset.
func TestRateLimitedHAProxyAdvertised(t *testing.T) {
	h := testprog.RateLimitedHAProxy(t, testprog.HAProxyLimit{Requests: 3, Period: 10 * time.Second, Advertise: true})
	// Start early in a window, so that the four requests share it.
	if s := time.Now().Unix() % 10; s >= 7 {
		time.Sleep(time.Duration(10-s) * time.Second)
	}
	get := func(i int) (int, http.Header) {
		t.Helper()
		resp, err := http.Get(h.URL + "/p/" + strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, resp.Header
	}
	var reset string
	for i, remaining := range []string{"2", "1", "0"} {
		status, hd := get(i)
		if i == 0 {
			reset = hd.Get("X-RateLimit-Reset")
		}
		if n, err := strconv.Atoi(reset); err != nil || n < 1 || n > 10 {
			t.Fatalf("X-RateLimit-Reset %q, want 1 to 10 seconds (haproxy %s)", reset, h.Version)
		}
		if status != 200 || hd.Get("X-RateLimit-Limit") != "3" || hd.Get("X-RateLimit-Remaining") != remaining || hd.Get("X-RateLimit-Reset") != reset {
			t.Errorf("request %d: %d with limit %q, remaining %q, reset %q; want 200, 3, %s, %s", i+1, status,
				hd.Get("X-RateLimit-Limit"), hd.Get("X-RateLimit-Remaining"), hd.Get("X-RateLimit-Reset"), remaining, reset)
		}
	}
	if status, hd := get(3); status != 429 || hd.Get("Retry-After") != reset || hd.Get("X-RateLimit-Remaining") != "0" {
		t.Errorf("request 4: %d with Retry-After %q, remaining %q; want 429, %s, 0", status, hd.Get("Retry-After"), hd.Get("X-RateLimit-Remaining"), reset)
	}
}

// TestRateLimitedNginx checks the rate-limited nginx the convergence tests
// rely on: at 1 r/s without burst, the first of three requests sent back
// to back is a 200 without Retry-After, the other two are 429s with
// Retry-After: 2, and the access log counts them.
func TestRateLimitedNginx(t *testing.T) {
	n := testprog.RateLimitedNginx(t, testprog.NginxLimit{PerSecond: 1, RetryAfter: 2})
	want := []struct {
		status     int
		retryAfter string
	}{{200, ""}, {429, "2"}, {429, "2"}}
	for i, w := range want {
		resp, err := http.Get(n.URL + "/p/" + strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != w.status || resp.Header.Get("Retry-After") != w.retryAfter {
			t.Errorf("request %d: %d with Retry-After %q, want %d with %q", i+1, resp.StatusCode, resp.Header.Get("Retry-After"), w.status, w.retryAfter)
		}
	}
	// nginx logs a request after its response is sent.
	got := n.Statuses()
	for deadline := time.Now().Add(2 * time.Second); got[200]+got[429] < 3 && time.Now().Before(deadline); got = n.Statuses() {
		time.Sleep(10 * time.Millisecond)
	}
	if got[200] != 1 || got[429] != 2 || len(got) != 2 {
		t.Errorf("Statuses() = %v, want 1×200, 2×429 (nginx %s)", got, n.Version)
	}
}

// TestLimitersAtNeighbours starts every kind of testprog.Limiters at 1.5
// requests a second with Retry-After: 3 (the advertised kind with its
// own) and sends it 20 requests at once: some are answered 200, some 429,
// each 429 with the Retry-After set.
func TestLimitersAtNeighbours(t *testing.T) {
	for _, k := range testprog.Limiters {
		t.Run(k.Name, func(t *testing.T) {
			s := testprog.Setting{PerSecond: 1.5, RetryAfter: 3}
			if k.Advertised {
				s.RetryAfter = 0
			}
			lim := k.StartAt(t, s)
			var (
				mu       sync.Mutex
				statuses = map[int]int{}
				wg       sync.WaitGroup
			)
			for i := range 20 {
				wg.Go(func() {
					resp, err := http.Get(lim.URL + "/page/" + strconv.Itoa(i))
					if err != nil {
						t.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if ra := resp.Header.Get("Retry-After"); resp.StatusCode == 429 && !k.Advertised && ra != "3" {
						t.Errorf("429 with Retry-After %q, want 3", ra)
					}
					mu.Lock()
					statuses[resp.StatusCode]++
					mu.Unlock()
				})
			}
			wg.Wait()
			if statuses[200] == 0 || statuses[429] == 0 || statuses[200]+statuses[429] != 20 {
				t.Errorf("statuses %v of 20 requests at once, want some 200 and the rest 429", statuses)
			}
		})
	}
}

// TestLimitersPerHost starts nginx and HAProxy limiting by host name, at
// 1 request per 10 s: the first request of each of two host names
// through one client address is 200, the second of the first name 429.
func TestLimitersPerHost(t *testing.T) {
	for _, tt := range []struct {
		name string
		url  func(t *testing.T) string
	}{
		{"nginx", func(t *testing.T) string {
			return testprog.RateLimitedNginx(t, testprog.NginxLimit{PerSecond: 0.1, NoDelay: true, PerHost: true}).URL
		}},
		{"haproxy", func(t *testing.T) string {
			return testprog.RateLimitedHAProxy(t, testprog.HAProxyLimit{Requests: 1, Period: 10 * time.Second, PerHost: true}).URL
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			addr := strings.TrimPrefix(tt.url(t), "http://")
			_, port, _ := net.SplitHostPort(addr)
			tr := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, network, addr)
			}}
			defer tr.CloseIdleConnections()
			for i, tc := range []struct {
				host string
				want int
			}{{"a.test", 200}, {"b.test", 200}, {"a.test", 429}} {
				resp, err := (&http.Client{Transport: tr}).Get(fmt.Sprintf("http://%s:%s/page/%d", tc.host, port, i))
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != tc.want {
					t.Errorf("request %d to %s: %d, want %d", i+1, tc.host, resp.StatusCode, tc.want)
				}
			}
		})
	}
}
