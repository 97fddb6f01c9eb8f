// Package configerr holds the one error value every constructor of the
// module wraps for a configuration it cannot honour, so that
// errors.Is(err, egresskit.ErrInvalidConfig) holds whichever constructor
// refused it.
package configerr

import (
	"errors"
	"fmt"
	"math"
)

// ErrInvalid is egresskit.ErrInvalidConfig.
var ErrInvalid = errors.New("egresskit: invalid config")

// Field returns an ErrInvalid naming field: "egresskit: invalid config:
// FIELD <what>".
func Field(field, format string, args ...any) error {
	return &fieldError{field: field, what: fmt.Sprintf(format, args...)}
}

// In returns err with field's parent name in front of the field it names
// (In("Breaker", "... OpenTimeout is ...") names Breaker.OpenTimeout), or
// err itself when it is not an ErrInvalid built by Field.
func In(parent string, err error) error {
	var fe *fieldError
	if err == nil {
		return nil
	}
	if errors.As(err, &fe) {
		return &fieldError{field: parent + "." + fe.field, what: fe.what}
	}
	return err
}

// Finite reports whether f is a number that is not NaN or infinite.
func Finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

type fieldError struct{ field, what string }

func (e *fieldError) Error() string { return ErrInvalid.Error() + ": " + e.field + " " + e.what }
func (e *fieldError) Unwrap() error { return ErrInvalid }
