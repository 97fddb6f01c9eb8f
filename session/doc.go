// Package session keeps the state of a crawl session — its cookies, headers,
// token and bound egress endpoint — in a Store shared by many workers, so a
// multi-step login or a paginated workflow started by one worker can be
// continued by another.
//
// A Manager ties a Store to a Keyring. Every value reaches the Store sealed
// with AES-256-GCM under the newest key of the ring, bound to its session ID
// and field name as associated data; the Store sees opaque bytes only. A
// record that does not open — tampered with, moved to another session or
// field, or sealed under an unknown key — is reported as ErrTampered, never
// as an empty session.
//
// Concurrent workers never read, modify and write a whole record: cookies
// are merged one field per cookie, headers and tokens are set field by
// field, and every such update is one atomic Store operation. Leases give a
// worker exclusive use of a session among lease holders; each carries a
// fencing token, and a write fenced with an older token than the newest
// lease is rejected with ErrStaleLease.
//
// The Jar returned by (*Manager).Jar is an http.CookieJar with the semantics
// of net/http/cookiejar (domain and path matching, host-only cookies, expiry,
// Secure, the public suffix list). The http.RoundTripper returned by
// (*Manager).Transport injects the session's headers and token, refreshes the
// token before it expires at most once across the fleet, and routes the
// request through the session's bound egress endpoint.
//
// Secret values — cookie values, header values, tokens, keys — never appear
// in an error, in the fmt output of a Session, Token or Key, or in a log
// value.
//
// This package is what a crawler author uses. The contract a store
// implements — the Store interface, the records it keeps — is package
// sessionstore; package sessiontest holds the scenarios every store must
// pass.
package session
