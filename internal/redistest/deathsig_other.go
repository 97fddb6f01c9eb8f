//go:build unix && !linux

package redistest

import "os/exec"

// setDeathSignal does nothing where there is no parent-death signal.
func setDeathSignal(*exec.Cmd) {}
