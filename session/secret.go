package session

import (
	"fmt"
	"log/slog"
)

const redacted = "[redacted]"

// Secret is a credential — a token value, a refresh token. Every way of
// printing it (fmt verbs, String, GoString, slog, text and JSON marshalling)
// yields "[redacted]"; convert it with string(s) to use the value.
type Secret string

// String returns "[redacted]".
func (Secret) String() string { return redacted }

// GoString returns "[redacted]".
func (Secret) GoString() string { return redacted }

// Format writes "[redacted]" for every verb.
func (Secret) Format(f fmt.State, _ rune) { f.Write([]byte(redacted)) }

// LogValue returns "[redacted]".
func (Secret) LogValue() slog.Value { return slog.StringValue(redacted) }

// MarshalText returns "[redacted]", so encoding/json and similar encoders
// never write the value.
func (Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }
