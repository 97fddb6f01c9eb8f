package telemetry

import "time"

// Unexported values the external tests assert on.
var (
	ErrProvenance  = errProvenance
	ErrReservedKey = errReservedKey
	ErrAuditClosed = errAuditClosed
	ErrAuditLocked = errAuditLocked
	Genesis        = genesis
)

// SetLockWait sets how long a writer waits for another's lock, until the
// test ends.
func SetLockWait(cleanup func(func()), d time.Duration) {
	old := lockWait
	lockWait = d
	cleanup(func() { lockWait = old })
}

// TryLock and Unlock take and release a file's lock as a writer does.
var (
	TryLock = tryLock
	Unlock  = unlock
)
