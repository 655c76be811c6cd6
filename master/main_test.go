package master

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain fails the package if goroutines outlive the tests: every master, etcd
// client and embedded etcd a test starts must be stopped by it. Stopped etcd members
// and closed keep-alive connections take a few seconds to wind down.
func TestMain(m *testing.M) {
	before := goleak.IgnoreCurrent()
	code := m.Run()
	if code == 0 {
		deadline := time.Now().Add(15 * time.Second)
		err := goleak.Find(before)
		for err != nil && time.Now().Before(deadline) {
			time.Sleep(250 * time.Millisecond)
			err = goleak.Find(before)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
