//go:build chaos

package chaos

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

var (
	longFlag     = flag.Bool("chaos.long", false, "long mode: about 10 minutes of chaos (also LANCECTX_CHAOS=long)")
	seedFlag     = flag.Uint64("chaos.seed", 0, "seed of the chaos schedule and the load (0: random, printed)")
	durationFlag = flag.Duration("chaos.duration", 0, "length of the chaos phase (0: the mode's default)")
)

// lancectxBin is the binary every subprocess runs, built once by TestMain.
var lancectxBin string

// procs is every process group the test binary started and has not seen exit. It is
// the package's one piece of shared mutable state, because TestMain (which kills what
// is left when the tests end, pass or fail, or when the binary is interrupted) cannot
// reach the tests' own values.
var procs = newReaper()

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	defer func() {
		if left := procs.killAll(); len(left) > 0 {
			fmt.Fprintf(os.Stderr, "chaos: killed %d process groups left running: %s\n", len(left), strings.Join(left, ", "))
		}
	}()
	// An interrupted run (Ctrl-C, SIGTERM from CI) kills the cluster before it exits;
	// Pdeathsig on every child covers a binary that dies without running this.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-sigs
		left := procs.killAll()
		fmt.Fprintf(os.Stderr, "chaos: %v: killed %d process groups\n", s, len(left))
		os.Exit(1)
	}()

	if bin := os.Getenv("LANCECTX_CHAOS_BIN"); bin != "" {
		lancectxBin = bin
		return m.Run()
	}
	dir, err := os.MkdirTemp("", "lancectx-chaos-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	lancectxBin = filepath.Join(dir, "lancectx")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	build := exec.CommandContext(ctx, "go", "build", "-o", lancectxBin, "github.com/lancectx/lancectx/cmd/lancectx")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "chaos: go build lancectx: %v\n%s", err, out)
		return 1
	}
	fmt.Fprintf(os.Stderr, "chaos: built %s in %s\n", lancectxBin, time.Since(start).Round(time.Millisecond))
	return m.Run()
}
