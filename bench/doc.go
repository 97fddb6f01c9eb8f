// Package bench measures egresskit side by side with its peers and with
// the physical limit of the machine: the same GET, read to the end and
// closed, sent through
//
//   - impl=bare: a bare http.Client over the base transport;
//   - impl=chain: the full egresskit chain with in-memory host state
//     (classify, retry, breaker, limiter at a rate that never binds, no
//     observer; over loopback, one direct egress endpoint configured like
//     the bare client's transport, so without the pool's default 30s
//     response-header timeout, which the bare client does not have either);
//   - impl=redis: the same chain with its host state in Redis;
//   - impl=retryablehttp: go-retryablehttp's RoundTripper alone;
//   - impl=failsafe: failsafe-go's failsafehttp RoundTripper with a retry
//     policy, a circuit breaker and a rate limiter that never binds.
//
// BenchmarkOverhead sends over an in-memory base transport, so that it
// measures only what each layer adds per request; BenchmarkLoopback sends
// to a loopback HTTP/1.1 keep-alive server from 64 goroutines and reports
// requests per second. BenchmarkHosts, BenchmarkSelect and BenchmarkProbe
// measure the memory kept per host, egress selection over 1,000 endpoints
// and a pre-flight probe of 1,000 targets.
//
// BenchmarkPoliteness crawls real rate limiters (nginx and HAProxy, the
// kinds in internal/testprog's Limiters) at 2 and 10 requests a second
// with egresskit (in memory, and two chains sharing Redis), a bare
// http.Client, Colly's LimitRule and autothrottle-ref, this module's own
// reference implementation of the AutoThrottle algorithm as Scrapy
// documents it (not Scrapy); BenchmarkSlowServer crawls a server whose
// latency grows with the requests in flight.
//
// The Redis contender uses the server at EGRESSKIT_REDIS_ADDR (default
// 127.0.0.1:6379) and is skipped when none answers.
//
// run.sh (make results) runs everything with -count=6, compares the
// contenders with benchstat and rewrites RESULTS.md; cmd/benchratios
// computes the ratios it quotes from the raw benchmark output.
//
// The package lives in its own module so that the core module does not
// depend on the peers it is compared with.
package bench
