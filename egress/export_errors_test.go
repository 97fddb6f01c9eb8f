package egress

// The configuration errors' reasons, for the external tests.
var (
	ErrEmptyPool        = errEmptyPool
	ErrEmptyID          = errEmptyID
	ErrDuplicateID      = errDuplicateID
	ErrUnknownScheme    = errUnknownScheme
	ErrNoHost           = errNoHost
	ErrBadPort          = errBadPort
	ErrMalformedProxy   = errMalformedProxy
	ErrBadCapacity      = errBadCapacity
	ErrBadRate          = errBadRate
	ErrBadWeight        = errBadWeight
	ErrBadSetting       = errBadSetting
	ErrBadPattern       = errBadPattern
	ErrOverlappingRules = errOverlappingRules
	ErrUnknownLabel     = errUnknownLabel
	ErrBadRule          = errBadRule
	ErrNoEligible       = errNoEligible
)
