package probe

import "github.com/egresskit/egresskit/internal/probeinput"

// Names the external tests use that are not part of the package's API.

var (
	Diagnose   = diagnose
	Percentile = percentile
)

// Success and Started are the judgements the report spells
// out (success, and a stage other than "queued").
func (r TargetResult) Success() bool { return r.success() }
func (r TargetResult) Started() bool { return !r.notStarted() }

// Stage names TargetResult.Stage's type; the constants are its values.
type Stage = string

const (
	StageQueued   = "queued"
	StageDNS      = "dns"
	StageConnect  = "connect"
	StageTLS      = "tls"
	StageRequest  = "request"
	StageResponse = "response"
	StageProxy    = "proxy"
)

const (
	DefaultPerHost = probeinput.DefaultPerHost
	DefaultWorkers = probeinput.DefaultWorkers
)

var (
	ErrMalformedURL      = probeinput.ErrMalformedURL
	ErrUnsupportedScheme = probeinput.ErrUnsupportedScheme
	ErrMissingHost       = probeinput.ErrMissingHost
	ErrBadPort           = probeinput.ErrBadPort
	ErrTooLong           = probeinput.ErrTooLong
	ErrSyntax            = probeinput.ErrSyntax
	ErrUnknownEgress     = probeinput.ErrUnknownEgress
	ErrExcludedEgress    = probeinput.ErrExcludedEgress
)

const MaxURLLength = probeinput.MaxURLLength
