module github.com/egresskit/egresskit

go 1.26.0

require (
	github.com/hashicorp/go-retryablehttp v0.7.8
	github.com/jimsmart/grobotstxt v1.0.3
	github.com/miekg/dns v1.1.73
	github.com/redis/go-redis/v9 v9.23.0
	github.com/sony/gobreaker/v2 v2.4.0
	go.uber.org/goleak v1.3.0
	golang.org/x/net v0.62.0
	golang.org/x/sys v0.49.0
	golang.org/x/time v0.16.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/hashicorp/go-cleanhttp v0.5.2 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)
