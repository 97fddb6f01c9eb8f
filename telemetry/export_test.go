package telemetry

// Unexported values the external tests assert on.
var (
	ErrProvenance  = errProvenance
	ErrReservedKey = errReservedKey
	ErrAuditClosed = errAuditClosed
	Genesis        = genesis
)
