package worker

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

var crashIterations = flag.Int("crash-iterations", 0,
	"kill -9 iterations of TestCrashKill9 (0: env LANCECTX_CRASH_ITERATIONS, else the CI default; the issue's full run is 50)")

// binDir holds the lancectx binary, built once for the tests that run it as a
// subprocess.
var (
	binDir    string
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "lancectx-worker-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	before := goleak.IgnoreCurrent()
	code := m.Run()
	_ = os.RemoveAll(binDir)
	if code == 0 {
		// Every test closes its workers: no shard loop, merge or HTTP goroutine may
		// outlive them. Closed keep-alive connections take a moment to wind down.
		var err error
		for range 50 {
			if err = goleak.Find(before); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// lancectxBinary builds cmd/lancectx once per test binary run (without -race: the
// subprocess is the system under test, the race detector runs in the test process).
func lancectxBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		binPath = filepath.Join(binDir, "lancectx")
		cmd := exec.Command("go", "build", "-o", binPath, "github.com/lancectx/lancectx/cmd/lancectx")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build ./cmd/lancectx: %v\n%s", err, strings.TrimSpace(string(out)))
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}
