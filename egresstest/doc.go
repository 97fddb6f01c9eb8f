// Package egresstest is a test kit for code that sends HTTP requests through
// egresskit, in the spirit of net/http/httptest.
//
// It offers two kinds of targets.
//
// In-memory transports, for unit tests and for testing/synctest bubbles
// (they start no goroutines and open no sockets, so fake time advances):
//
//   - [NewScript] returns a [Transport] that replays a declared sequence of
//     responses or errors, one [Step] per request, the last step repeating.
//   - [NewHandlerTransport] returns a [Transport] that serves each request
//     by calling an [http.Handler] directly.
//
// A Transport records every request ([Call]), counts requests, and counts
// response bodies that were handed out and never closed.
//
// Real fault servers on 127.0.0.1, for end-to-end tests of timeouts and
// connection handling. Each is a [*Server] whose Close waits for every
// goroutine it started:
//
//   - [NewHangServer]: accepts connections and never answers.
//   - [NewTLSStallServer]: accepts TCP and never completes the TLS handshake.
//   - [NewTrickleServer]: sends the body a few bytes at a time.
//   - [NewResetServer]: resets the connection (TCP RST) in the middle of the body.
//   - [NewThrottleServer] and [NewThrottleDateServer]: answer 429 with
//     Retry-After in seconds or as an HTTP date.
//   - [NewChallengeServer]: serves a bot-challenge interstitial (403 with
//     "cf-mitigated: challenge" and a "Just a moment..." page).
package egresstest
