// Command lancectx is the lancectx service and its operator tools.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCmd().ExecuteContext(ctx); err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		fmt.Fprintln(os.Stderr, "lancectx:", err)
		os.Exit(1)
	}
}

// exitError carries a specific exit code out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func newRootCmd() *cobra.Command {
	var logLevel string
	store := &storeFlags{}
	root := &cobra.Command{
		Use:           "lancectx",
		Short:         "Rollout store on Lance datasets",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level: %w", err)
			}
			slog.SetDefault(slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: lvl})))
			return store.resolve()
		},
	}
	store.register(root)
	root.PersistentFlags().StringVar(&logLevel, "log-level", envOr("LANCECTX_LOG_LEVEL", "info"), "log level: debug, info, warn, error (env LANCECTX_LOG_LEVEL)")
	root.AddCommand(newDatasetCmd(store))
	root.AddCommand(newWorkerCmd(store))
	root.AddCommand(newMasterCmd(store))
	root.AddCommand(newServeCmd(store))
	root.AddCommand(newAdoptCmd(store))
	root.AddCommand(newEtcdCmd())
	root.AddCommand(newRolloutsCmd())
	root.AddCommand(newExperimentsCmd())
	root.AddCommand(newTasksCmd())
	root.AddCommand(newQueryCmd())
	return root
}

func envOr(key, def string) string {
	if v, ok := os.LookupEnv(key); ok && v != "" {
		return v
	}
	return def
}
