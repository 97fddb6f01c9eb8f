package telemetry

// Unexported values the external tests assert on.
var ErrProvenance = errProvenance
