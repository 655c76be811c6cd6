package hostile

import (
	"fmt"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain fails the package if goroutines outlive the tests: a hostile request must
// not leave a handler, a body read or a connection behind once its server is closed.
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
