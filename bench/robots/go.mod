module github.com/egresskit/egresskit/bench/robots

go 1.26.0

require (
	github.com/egresskit/egresskit v0.0.0
	github.com/jimsmart/grobotstxt v1.0.3
	github.com/temoto/robotstxt v1.1.2
)

replace github.com/egresskit/egresskit => ../..
