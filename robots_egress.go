package egresskit

import (
	"errors"
	"net/http"

	"github.com/egresskit/egresskit/egress"
)

// robotsAttempts is how many endpoints a robots.txt fetch tries when the
// egress route fails.
const robotsAttempts = 3

// robotsThroughEgress fetches robots.txt through the egress pool, so that
// a site sees the same address ask for its robots.txt as for its pages
// (the pool maps both to the host's subset), and the pool's TLS settings
// apply to both. A fetch that failed on the egress route — a proxy down,
// refusing credentials, failing its handshake — is tried again, on the
// endpoint the pool now prefers, up to robotsAttempts times: a failing
// proxy must not make a host's robots.txt look unreachable, which would
// disallow the whole host.
type robotsThroughEgress struct{ pool *egress.Pool }

func (r robotsThroughEgress) RoundTrip(req *http.Request) (*http.Response, error) {
	for i := 1; ; i++ {
		resp, err := r.pool.RoundTrip(req)
		var pe *egress.ProxyError
		if err == nil || i == robotsAttempts || req.Context().Err() != nil ||
			!errors.As(err, &pe) || !pe.EndpointFault() {
			return resp, err
		}
	}
}

// CloseIdleConnections closes the pool's idle connections.
func (r robotsThroughEgress) CloseIdleConnections() { r.pool.CloseIdleConnections() }
