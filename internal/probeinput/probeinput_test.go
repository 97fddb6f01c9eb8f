package probeinput

import "testing"

func TestValidHeaderValue(t *testing.T) {
	if err := ValidHeaderValue("crawler/1 (+https://example.org/bot; tab\there)"); err != nil {
		t.Errorf("ValidHeaderValue(ordinary agent) = %v, want nil", err)
	}
	for _, v := range []string{"crawler/1\r\nX-Evil: 1", "crawler\n", "a\x00b", "a\x7fb"} {
		if err := ValidHeaderValue(v); err == nil {
			t.Errorf("ValidHeaderValue(%q) = nil, want an error", v)
		}
	}
}
