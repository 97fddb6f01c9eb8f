package session

import "fmt"

const redacted = "[redacted]"

// Secret is a credential — a token value, a refresh token, key material —
// as a crawler author hands it to a Token or a Key. Every way of printing
// it, and of a struct that holds it in an exported field (fmt verbs, slog's
// text and JSON handlers, text and JSON marshalling), yields "[redacted]";
// convert it with string(s) to use the value.
type Secret string

// Format writes "[redacted]" for every verb, so fmt never prints the
// value, nor does slog's text handler.
func (Secret) Format(f fmt.State, _ rune) { f.Write([]byte(redacted)) }

// MarshalText returns "[redacted]", so encoding/json, slog's JSON handler
// and similar encoders never write the value.
func (Secret) MarshalText() ([]byte, error) { return []byte(redacted), nil }
