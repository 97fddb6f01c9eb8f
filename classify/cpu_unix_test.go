//go:build unix

package classify

import (
	"syscall"
	"time"
)

// cpuTime returns the CPU time (user and system) the process has used. On
// a busy machine the CPU time per operation is a steadier measure than the
// wall time, which includes waiting for a core.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
