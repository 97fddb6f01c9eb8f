package egress

import (
	"crypto/tls"
	"net"
	"strconv"
	"time"
)

// Config configures a Pool. Apart from Endpoints, the zero value of every
// field selects the documented default.
type Config struct {
	// Endpoints are the pool's endpoints; at least one is required.
	Endpoints []Endpoint

	// Rules restrict, per host pattern, the endpoints a request may leave
	// from, by their labels (see Rule). New validates them against
	// Endpoints. Default none: every endpoint is eligible for every host.
	Rules []Rule

	// SubsetSize is how many endpoints each host maps to. Default 2.
	SubsetSize int
	// FailWhenFull makes RoundTrip fail with ErrAtCapacity when every
	// usable endpoint is at capacity, instead of waiting for a slot while
	// the request's context allows (the default).
	FailWhenFull bool
	// HostCacheSize bounds the number of hosts whose subset is cached.
	// Default 16384; negative disables the cache.
	HostCacheSize int

	// MaxConnsPerHost limits each endpoint's connections per target host
	// (per proxy, for http:// targets sent through an HTTP proxy).
	// Default 0: no limit beyond the endpoint's Capacity.
	MaxConnsPerHost int
	// MaxIdleConns limits each endpoint's idle keep-alive connections.
	// Default 64.
	MaxIdleConns int
	// MaxIdleConnsPerHost limits each endpoint's idle keep-alive
	// connections per target host. Default 4: a crawler touches many hosts.
	MaxIdleConnsPerHost int
	// IdleConnTimeout closes keep-alive connections idle for longer.
	// Default 30s; negative means no limit.
	IdleConnTimeout time.Duration
	// DialTimeout bounds dialling a proxy (or the target, when direct).
	// Default 10s; negative means no limit.
	DialTimeout time.Duration
	// KeepAlive is the TCP keep-alive period. Default 30s; negative
	// disables keep-alive probes.
	KeepAlive time.Duration
	// TLSHandshakeTimeout bounds each TLS handshake, with the target or an
	// https:// proxy. Default 10s; negative means no limit.
	TLSHandshakeTimeout time.Duration
	// ResponseHeaderTimeout bounds the wait for a response's headers once
	// the request is written, so that a target or proxy that never answers
	// cannot hold a request forever. Default 30s; negative means no limit,
	// which is safe only when every request's context has a deadline. The
	// limit costs net/http a timer per request (four allocations, under a
	// microsecond of CPU).
	ResponseHeaderTimeout time.Duration
	// TLSClientConfig is the TLS configuration for targets. Nil means
	// the crypto/tls defaults.
	TLSClientConfig *tls.Config
	// ProxyTLSConfig is the TLS configuration for https:// proxies. Nil
	// means the crypto/tls defaults; ServerName defaults to the proxy's
	// host.
	ProxyTLSConfig *tls.Config
	// Resolver resolves proxy names and, for socks5:// endpoints and
	// direct ones, target names. With the DNS cache on (the default) the
	// cache answers for target names in front of it: it sends its
	// queries through Resolver.Dial when that is set, and leaves names
	// without a dot and those of the hosts file to Resolver (see
	// DNSConfig). Nil means net.DefaultResolver.
	Resolver *net.Resolver

	// DNS configures the cache of target names for direct and socks5://
	// endpoints. The zero value caches, asking the servers of
	// /etc/resolv.conf.
	DNS DNSConfig

	// Health tunes the health score and the quarantine.
	Health HealthConfig

	// Now returns the current time. Nil means time.Now. It is called
	// without any lock held.
	Now func() time.Time
}

// settings is a Config with its defaults applied.
type settings struct {
	subsetSize            int
	failWhenFull          bool
	cacheSize             int
	maxConnsPerHost       int
	maxIdleConns          int
	maxIdleConnsPerHost   int
	idleConnTimeout       time.Duration
	dialTimeout           time.Duration
	keepAlive             time.Duration
	tlsHandshakeTimeout   time.Duration
	responseHeaderTimeout time.Duration
	tlsClientConfig       *tls.Config
	proxyTLSConfig        *tls.Config
	resolver              *net.Resolver
	health                HealthConfig
	now                   func() time.Time
}

// orDefault returns d for 0, 0 (no limit) for negative values, else v.
func orDefault(v, d time.Duration) time.Duration {
	switch {
	case v == 0:
		return d
	case v < 0:
		return 0
	}
	return v
}

func (c *Config) settings() (settings, error) {
	s := settings{
		subsetSize:            c.SubsetSize,
		failWhenFull:          c.FailWhenFull,
		cacheSize:             c.HostCacheSize,
		maxConnsPerHost:       c.MaxConnsPerHost,
		maxIdleConns:          c.MaxIdleConns,
		maxIdleConnsPerHost:   c.MaxIdleConnsPerHost,
		idleConnTimeout:       orDefault(c.IdleConnTimeout, 30*time.Second),
		dialTimeout:           orDefault(c.DialTimeout, 10*time.Second),
		keepAlive:             c.KeepAlive,
		tlsHandshakeTimeout:   orDefault(c.TLSHandshakeTimeout, 10*time.Second),
		responseHeaderTimeout: orDefault(c.ResponseHeaderTimeout, 30*time.Second),
		tlsClientConfig:       c.TLSClientConfig,
		proxyTLSConfig:        c.ProxyTLSConfig,
		resolver:              c.Resolver,
		now:                   c.Now,
	}
	bad := func(field string, v int) (settings, error) {
		return s, &configError{Field: field, Value: strconv.Itoa(v), Err: errBadSetting}
	}
	switch {
	case s.subsetSize < 0:
		return bad("SubsetSize", s.subsetSize)
	case s.maxConnsPerHost < 0:
		return bad("MaxConnsPerHost", s.maxConnsPerHost)
	case s.maxIdleConns < 0:
		return bad("MaxIdleConns", s.maxIdleConns)
	case s.maxIdleConnsPerHost < 0:
		return bad("MaxIdleConnsPerHost", s.maxIdleConnsPerHost)
	}
	if s.subsetSize == 0 {
		s.subsetSize = 2
	}
	if s.cacheSize == 0 {
		s.cacheSize = 16384
	}
	if s.maxIdleConns == 0 {
		s.maxIdleConns = 64
	}
	if s.maxIdleConnsPerHost == 0 {
		s.maxIdleConnsPerHost = 4
	}
	if s.keepAlive == 0 {
		s.keepAlive = 30 * time.Second
	}
	if s.now == nil {
		s.now = time.Now
	}
	h, err := c.Health.withDefaults()
	if err != nil {
		return s, err
	}
	s.health = h
	return s, nil
}
