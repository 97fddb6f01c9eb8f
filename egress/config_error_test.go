package egress_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/egresskit/egresskit/egress"
	"github.com/egresskit/egresskit/internal/configerr"
)

// TestNewRefusesInvalidConfig: New refuses a configuration it cannot
// honour with an error that is egresskit.ErrInvalidConfig (configerr.ErrInvalid), names the field
// and never shows a credential.
func TestNewRefusesInvalidConfig(t *testing.T) {
	for _, tc := range []struct {
		field string
		cfg   egress.Config
	}{
		{"Endpoints", egress.Config{}},
		{"Proxy", egress.Config{Endpoints: []egress.Endpoint{{ID: "a", Proxy: "http://user:s3cret@127.0.0.1:99999"}}}},
		{"Rate", egress.Config{Endpoints: []egress.Endpoint{{ID: "a", Proxy: "direct", Rate: -1}}}},
	} {
		_, err := egress.New(tc.cfg)
		if !errors.Is(err, configerr.ErrInvalid) {
			t.Errorf("New (bad %s) = %v, want ErrInvalidConfig", tc.field, err)
			continue
		}
		var ce *egress.ConfigError
		if !errors.As(err, &ce) || ce.Field != tc.field {
			t.Errorf("New (bad %s) = %q, does not name the field", tc.field, err)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("New = %q shows a credential", err)
		}
	}
}
