package console

import (
	"net/http"
	"time"
)

// SetNow sets the clock of a handler New returned.
func SetNow(h http.Handler, now func() time.Time) { h.(*server).now = now }

// TokenBits is tokenBits, for the tests.
var TokenBits = tokenBits
