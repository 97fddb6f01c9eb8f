// Package peek lets the conformance scenarios of package sessiontest read
// what package session keeps unexported: a Jar's counters, and whether an
// error is a failed token refresh. Package session sets the functions.
package peek

// JarStats counts what a Jar did with the cookies it was given.
type JarStats struct {
	// Stored counts cookies written to the store.
	Stored uint64
	// Deleted counts deletions asked for by a Max-Age < 0 or a past
	// Expires.
	Deleted uint64
	// Evicted counts cookies the store evicted to keep Config.MaxCookies.
	Evicted uint64
	// TooLarge counts cookies dropped for a name plus value larger than
	// Config.MaxCookieSize, or a Domain or Path over 1024 bytes.
	TooLarge uint64
	// BadDomain counts cookies ignored for a Domain attribute the host may
	// not set (another domain, a public suffix, a name for an IP host).
	BadDomain uint64
	// Errors counts store and keyring errors.
	Errors uint64
}

var (
	// Stats returns the counters of jar, a *session.Jar.
	Stats func(jar any) JarStats
	// Refresh returns the session of a failed token refresh that err
	// wraps, and whether it wraps one.
	Refresh func(err error) (id string, ok bool)
)
