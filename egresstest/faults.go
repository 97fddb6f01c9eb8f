package egresstest

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"strconv"
	"time"
)

// NewHangServer starts a server that accepts connections, reads requests
// and never answers: the connection stays open until the client gives up
// or the server is closed.
func NewHangServer() *Server {
	return startRaw("http", func(s *Server, c net.Conn) {
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return // connection closed
			}
			s.count(false)
			io.Copy(io.Discard, req.Body)
		}
	})
}

// NewTLSStallServer starts a server whose URL has the https scheme and
// which accepts TCP connections, reads the TLS ClientHello, and never
// answers it: the handshake never completes.
func NewTLSStallServer() *Server {
	return startRaw("https", func(_ *Server, c net.Conn) {
		io.Copy(io.Discard, c)
	})
}

// NewResetServer starts a server that answers each request with a 200
// whose Content-Length promises more than it sends: after n bytes of body
// (n < 0 counts as 0) it resets the connection (TCP RST, via SetLinger(0)).
// A client reading the body gets an error after at most n bytes.
func NewResetServer(n int) *Server {
	n = max(n, 0)
	head := "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: " +
		strconv.Itoa(n+4096) + "\r\n\r\n"
	payload := append([]byte(head), bytes.Repeat([]byte{'x'}, n)...)
	return startRaw("http", func(s *Server, c net.Conn) {
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		s.count(false)
		io.Copy(io.Discard, req.Body)
		if _, err := c.Write(payload); err != nil {
			return
		}
		if tc, ok := c.(*net.TCPConn); ok {
			tc.SetLinger(0)
		}
		c.Close()
	})
}

// NewTrickleServer starts a server that answers each request with a 200
// and a body of size bytes (Content-Length set), sent chunk bytes at a
// time with a pause of every between chunks. Defaults: size ≤ 0 means
// 1024, chunk ≤ 0 means 1, every ≤ 0 means 100ms.
func NewTrickleServer(size, chunk int, every time.Duration) *Server {
	if size <= 0 {
		size = 1024
	}
	if chunk <= 0 {
		chunk = 1
	}
	if every <= 0 {
		every = 100 * time.Millisecond
	}
	var s *Server
	s = startHTTP(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.Itoa(size))
		w.WriteHeader(http.StatusOK)
		rc := http.NewResponseController(w)
		buf := bytes.Repeat([]byte{'x'}, chunk)
		for sent := 0; sent < size; {
			if sent > 0 {
				select {
				case <-time.After(every):
				case <-r.Context().Done():
					return
				case <-s.done:
					return
				}
			}
			k := min(chunk, size-sent)
			if _, err := w.Write(buf[:k]); err != nil {
				return
			}
			if rc.Flush() != nil {
				return
			}
			sent += k
		}
	})
	return s
}

// NewThrottleServer starts a server that answers every request with 429
// Too Many Requests and "Retry-After: <seconds>", after rounded up to a
// whole second (negative counts as 0).
func NewThrottleServer(after time.Duration) *Server {
	secs := strconv.FormatInt(int64((max(after, 0)+time.Second-1)/time.Second), 10)
	return startHTTP(func(w http.ResponseWriter, _ *http.Request) {
		throttle(w, secs)
	})
}

// NewThrottleDateServer starts a server that answers every request with
// 429 Too Many Requests and a Retry-After HTTP date (IMF-fixdate) at least
// after from the time of the request.
func NewThrottleDateServer(after time.Duration) *Server {
	return startHTTP(func(w http.ResponseWriter, _ *http.Request) {
		at := time.Now().Add(max(after, 0) + time.Second - 1) // the format drops fractions
		throttle(w, at.UTC().Format(http.TimeFormat))
	})
}

func throttle(w http.ResponseWriter, retryAfter string) {
	w.Header().Set("Retry-After", retryAfter)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusTooManyRequests)
	io.WriteString(w, "429 too many requests: slow down\n")
}

// NewChallengeServer starts a server that answers every request with the
// bot-challenge interstitial of [ChallengeStep]: 403, "cf-mitigated:
// challenge" and a "Just a moment..." page.
func NewChallengeServer() *Server {
	st := ChallengeStep()
	return startHTTP(func(w http.ResponseWriter, _ *http.Request) {
		for k, v := range st.Header {
			w.Header()[k] = v
		}
		w.WriteHeader(st.Status)
		io.WriteString(w, st.Body)
	})
}

// challengePage is a minimal stand-in for a CDN's JavaScript challenge
// interstitial, carrying the usual tell-tale markers.
const challengePage = `<!DOCTYPE html>
<html lang="en-US">
<head>
<title>Just a moment...</title>
<meta http-equiv="refresh" content="360">
</head>
<body>
<noscript>Enable JavaScript and cookies to continue</noscript>
<script>window._cf_chl_opt = {cType: 'managed'};</script>
<script src="/cdn-cgi/challenge-platform/h/g/orchestrate/chl_page/v1"></script>
</body>
</html>
`

// ChallengeStep returns the Step of a Cloudflare-like managed challenge:
// status 403, headers "cf-mitigated: challenge", "Server: cloudflare" and
// "Content-Type: text/html", and a "Just a moment..." page. A crawler must
// treat it as a refusal, never solve it.
func ChallengeStep() Step {
	return Step{
		Status: http.StatusForbidden,
		Header: http.Header{
			"Cf-Mitigated":  {"challenge"},
			"Server":        {"cloudflare"},
			"Content-Type":  {"text/html; charset=UTF-8"},
			"Cache-Control": {"private, max-age=0, no-store, no-cache, must-revalidate"},
		},
		Body: challengePage,
	}
}
