package otel

// DefaultBuckets is defaultBuckets, for the external tests.
var DefaultBuckets = defaultBuckets
