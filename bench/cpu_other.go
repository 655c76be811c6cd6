//go:build !unix

package bench

import "time"

// cpuTime is not measured on this platform; results report 0 CPU seconds.
func cpuTime() time.Duration { return 0 }
