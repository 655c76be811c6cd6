package objstore_test

import (
	"bytes"
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/lancectx/lancectx/objstore"
)

// BenchmarkFileStorePutIfAbsent writes WAL-entry-sized objects the way the WAL does
// (conditional creates in one directory, the oldest deleted in batches as sealing
// retires them), through the unnamed and the named temp-file path, and reports the
// process CPU per put beside the wall time (an fsync's wait is not the store's cost).
func BenchmarkFileStorePutIfAbsent(b *testing.B) {
	for _, named := range []bool{false, true} {
		b.Run(fmt.Sprintf("named=%v", named), func(b *testing.B) {
			ctx := context.Background()
			s, err := objstore.NewFile(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			if named {
				objstore.UseNamedTempFiles(s)
			}
			body := bytes.Repeat([]byte("0123456789abcdef"), 1024) // 16 KiB
			key := func(i int) string { return fmt.Sprintf("wal/shard/entries/%020d.arrow", i) }
			const lag, batch = 64, 16
			b.ReportAllocs()
			cpu0 := cpuTime()
			b.ResetTimer()
			for i := range b.N {
				if err := s.PutIfAbsent(ctx, key(i), bytes.NewReader(body)); err != nil {
					b.Fatal(err)
				}
				if i >= lag && (i-lag)%batch == batch-1 {
					keys := make([]string, 0, batch)
					for j := i - lag - batch + 1; j <= i-lag; j++ {
						keys = append(keys, key(j))
					}
					if err := s.DeleteBatch(ctx, keys); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.StopTimer()
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
		})
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
