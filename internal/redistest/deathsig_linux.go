package redistest

import (
	"os/exec"
	"syscall"
)

// setDeathSignal kills the server when the test binary dies without
// stopping it.
func setDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
