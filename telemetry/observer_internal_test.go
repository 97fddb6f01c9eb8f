package telemetry

import "testing"

// TestFanoutEmpty: a Fanout left with no observer is the empty list, which
// does nothing; one left with one observer is that observer.
func TestFanoutEmpty(t *testing.T) {
	var one Observer = ObserverFunc(nil)
	for name, o := range map[string]Observer{
		"none":         Fanout(),
		"nils":         Fanout(nil, nil),
		"empty nested": Fanout(observers{}, Fanout(nil)),
	} {
		if l, ok := o.(observers); !ok || len(l) != 0 {
			t.Errorf("%s: Fanout returned %#v, want an empty list", name, o)
		}
	}
	if l, ok := Fanout(nil, one, observers{nil}).(observers); ok {
		t.Errorf("Fanout(nil, o) = %#v, want o itself", l)
	}
}
