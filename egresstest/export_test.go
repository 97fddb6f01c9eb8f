package egresstest

// The errors of the in-memory transport, for the external tests.
var (
	ErrInvalidRequest = errInvalidRequest
	ErrBodyClosed     = errBodyClosed
)
