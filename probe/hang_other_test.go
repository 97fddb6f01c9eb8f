//go:build !linux

package probe_test

import "testing"

// newHangAddr returns the address of a listener that accepts and never
// answers; on systems where a full accept queue does not drop SYNs the
// hang is in the response rather than in the TCP handshake.
func newHangAddr(t testing.TB) string {
	t.Helper()
	return newHoldListener(t).addr()
}
