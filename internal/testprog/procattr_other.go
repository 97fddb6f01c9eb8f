//go:build !linux

package testprog

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts the program in a process group of its own, so that Kill
// reaches its children too.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}
