//go:build unix

package bench

import (
	"syscall"
	"time"
)

// cpuTime is the user+system CPU time of the whole process so far (all threads), so a
// delta around a measured call counts its background goroutines too. Unlike wall time it
// barely moves when other processes compete for the cores.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
