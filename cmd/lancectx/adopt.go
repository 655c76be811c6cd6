package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/lancectx/lancectx/adopt"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/worker"
)

// adoptFlags are the settings of `lancectx adopt` and of the --adopt step of serve and
// worker.
type adoptFlags struct {
	concurrency int
	json        bool
	noStats     bool
	envErr      error
}

func (af *adoptFlags) register(f *pflag.FlagSet, prefix string) {
	def := adopt.DefaultConcurrency
	if v := envOr("LANCECTX_ADOPT_CONCURRENCY", ""); v != "" {
		n, err := parsePositive(v)
		if err != nil {
			af.envErr = fmt.Errorf("LANCECTX_ADOPT_CONCURRENCY: %w", err)
		} else {
			def = n
		}
	}
	f.IntVar(&af.concurrency, prefix+"concurrency", def, "stores adopted at once (env LANCECTX_ADOPT_CONCURRENCY)")
	f.BoolVar(&af.noStats, prefix+"no-stats", false, "do not seed the master's stats table from the reference's _stats table")
}

func parsePositive(s string) (int, error) {
	var n int
	if _, err := fmt.Sscanf(s, "%d", &n); err != nil || n <= 0 {
		return 0, fmt.Errorf("not a positive integer: %q", s)
	}
	return n, nil
}

func newAdoptCmd(store *storeFlags) *cobra.Command {
	af := &adoptFlags{}
	cmd := &cobra.Command{
		Use:   "adopt DATA_DIR_URI",
		Short: "Take over the stores of a lance-context data directory, keeping their datasets and history",
		Long: `Adopt the stores a lance-context (the Rust reference system) data directory holds: the stores its
registry datasets (_registry.rollout.lance, _registry.generic.lance, _registry.datagen.lance) name and
every {name}.rollout.lance directory. Each rollout store keeps its Lance dataset and history: the
reference's pending MemWAL generations (_mem_wal/) are merged into its base table in one commit
(newest generation wins per id), it is registered as a lancectx store, and its _mem_wal is
retired. Generic and datagen stores are reported and left alone (lancectx has no such stores yet).
The master's stats table is seeded from the reference's _stats table.

Stop the lance-context workers first (they flush on a clean stop): a store whose write-ahead log
holds entries no generation covers is not adopted. Running adopt again is safe: adopted stores
report "already registered", an interrupted adoption is finished. One line per store is printed
(--json: one JSON object per line); the exit code is 1 when a store failed.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runAdopt(cmd.Context(), store, args[0], af, cmd.OutOrStdout())
		},
	}
	af.register(cmd.Flags(), "")
	cmd.Flags().BoolVar(&af.json, "json", false, "print one JSON object per store, then the summary")
	return cmd
}

// openDataDir opens a data directory that must exist: a local path is checked first,
// because opening it would create it.
func openDataDir(ctx context.Context, store *storeFlags, uri string) (objstore.Store, error) {
	u, err := objstore.ParseURI(uri)
	if err != nil {
		return nil, &exitError{code: 2, err: fmt.Errorf("bad data directory URI %q: %w", uri, err)}
	}
	if u.Scheme == "file" {
		fi, err := os.Stat(u.Path)
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("data directory %s does not exist", u.Path)
		}
		if err != nil {
			return nil, fmt.Errorf("data directory %s: %w", u.Path, err)
		}
		if !fi.IsDir() {
			return nil, fmt.Errorf("data directory %s is not a directory", u.Path)
		}
	}
	st, err := store.open(ctx, uri)
	if err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			return nil, err
		}
		return nil, &exitError{code: 2, err: fmt.Errorf("open data directory %s: %w", worker.MaskURI(uri), err)}
	}
	return st, nil
}

func runAdopt(ctx context.Context, store *storeFlags, uri string, af *adoptFlags, out io.Writer) error {
	if af.envErr != nil {
		return &exitError{code: 2, err: fmt.Errorf("environment: %w", af.envErr)}
	}
	if af.concurrency <= 0 {
		return &exitError{code: 2, err: errors.New("--concurrency must be positive")}
	}
	data, err := openDataDir(ctx, store, uri)
	if err != nil {
		return err
	}
	defer data.Close()
	enc := json.NewEncoder(out)
	sum, err := adopt.Run(ctx, adopt.Options{Data: data, DataURI: objstore.CanonicalURI(uri), Concurrency: af.concurrency,
		NoStats: af.noStats, Logger: slog.Default(), Report: func(r adopt.StoreReport) {
			if af.json {
				_ = enc.Encode(r)
				return
			}
			fmt.Fprintln(out, formatReport(r))
		}})
	if err != nil {
		return err
	}
	if af.json {
		_ = enc.Encode(sum)
	} else {
		fmt.Fprintln(out, formatSummary(sum))
	}
	if sum.Failed > 0 {
		return &exitError{code: 1, err: fmt.Errorf("%d of %d stores were not adopted; see their lines above, fix, and run adopt again", sum.Failed, sum.Found)}
	}
	return nil
}

// formatReport is one store's line: kind, name, what was found, outcome.
func formatReport(r adopt.StoreReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-8s %-32s rows=%-8d version=%-6d versions=%-6d pending_generations=%-4d %s", r.Kind, r.Name, r.Rows, r.Version,
		r.Versions, r.Pending, r.Outcome)
	if r.MergedGenerations > 0 || r.Outcome == adopt.Adopted {
		fmt.Fprintf(&b, ": merged %d generations (%d rows, %d older copies hidden); now rows=%d version=%d",
			r.MergedGenerations, r.MergedRows, r.DuplicatesHidden, r.RowsAfter, r.VersionAfter)
	}
	if r.Message != "" {
		fmt.Fprintf(&b, ": %s", r.Message)
	}
	if r.Source == "directory" && r.Kind == adopt.KindRollout {
		b.WriteString(" [found as a directory, in no registry]")
	}
	return b.String()
}

func formatSummary(s adopt.Summary) string {
	msg := fmt.Sprintf("found %d stores: %d adopted, %d already registered, %d not adopted, %d failed in %.1f s; stats: %s",
		s.Found, s.Adopted, s.AlreadyRegistered, s.NotAdopted, s.Failed, s.Seconds, s.Stats.Outcome)
	if s.Stats.Outcome == "seeded" {
		msg += fmt.Sprintf(" (%d rows, version %d)", s.Stats.Rows, s.Stats.Version)
	}
	if s.StatsError != "" {
		msg += " (error: " + s.StatsError + ")"
	}
	return msg
}

// adoptAtStart runs the adoption before a worker (or serve) starts serving, logging
// each store; failures are logged and the server starts anyway (the stores concerned
// are simply not served until a later run adopts them).
func adoptAtStart(ctx context.Context, log *slog.Logger, data objstore.Store, dataDir string, af *adoptFlags) error {
	sum, err := adopt.Run(ctx, adopt.Options{Data: data, DataURI: objstore.CanonicalURI(dataDir), Concurrency: af.concurrency,
		NoStats: af.noStats, Logger: log, Report: func(r adopt.StoreReport) {
			lvl := slog.LevelInfo
			if r.Outcome == adopt.Failed {
				lvl = slog.LevelWarn
			}
			log.Log(ctx, lvl, "adopt: "+formatReport(r), "store", r.Name, "kind", r.Kind, "outcome", string(r.Outcome))
		}})
	if errors.Is(err, adopt.ErrNoDataDir) {
		log.Info("adopt: nothing to adopt: the data directory holds no datasets")
		return nil
	}
	if err != nil {
		return err
	}
	log.Info("adopt: " + formatSummary(sum))
	return nil
}
