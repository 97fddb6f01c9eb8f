package testprog

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts the program in a process group of its own, so that Kill
// reaches its children too, and kills it when the test binary dies.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
