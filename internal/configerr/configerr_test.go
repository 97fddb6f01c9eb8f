package configerr

import (
	"errors"
	"testing"
)

func TestField(t *testing.T) {
	err := In("HostState", In("Breaker", Field("OpenTimeout", "is %v, negative", -1)))
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("%v is not ErrInvalid", err)
	}
	if want := "egresskit: invalid config: HostState.Breaker.OpenTimeout is -1, negative"; err.Error() != want {
		t.Errorf("err = %q, want %q", err, want)
	}
	other := errors.New("other")
	if In("X", other) != other || In("X", nil) != nil {
		t.Errorf("In changed an error that names no field")
	}
}
