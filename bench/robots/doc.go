// Package robots compares robots.txt parsers for egresskit's robots package:
// compliance with the matcher vectors re-expressed from Google's robots.txt
// test suite, and the cost of one Allowed check on a 100 KiB file. It lives in
// its own module so that the core module does not depend on the parsers it is
// compared with.
//
//	go test -v -run Compliance .
//	go test -run '^$' -bench . -benchmem .
package robots
