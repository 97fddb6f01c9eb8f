// Package wallclock holds only a test: no test of the repository, in any
// of its modules, fails on a span of the real clock (time.Since,
// time.Until, or the difference of two time.Now readings) compared with a
// bound, outside a testing/synctest bubble, where time is fake. A test
// asserts what happened (an error's cause, a count, an order) on a fake
// clock or in a bubble, and bounds a hang with a deadline. The check reads
// the source: a span that reaches an assertion another way (a duration a
// server reports, a timestamp in a log) is not seen.
package wallclock
