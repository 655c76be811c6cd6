// Command lancebench is the lancectx side of the LanceDB benchmark (see bench/run.sh).
// Each command prints one JSON object; `lancebench` alone prints the usage.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"

	"github.com/lancectx/lancectx/bench"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	err := bench.Main(ctx, os.Args[1:], os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "lancebench:", err)
		if errors.Is(err, bench.ErrUsage) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}
