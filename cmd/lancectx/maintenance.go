package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/lancectx/lancectx/lance"
)

func newCompactCmd(store *storeFlags) *cobra.Command {
	var o lance.CompactOptions
	cmd := &cobra.Command{
		Use:   "compact URI",
		Short: "Rewrite small fragments (and fragments with deleted rows) into target-size fragments",
		Long: `Rewrite neighbouring small fragments, and fragments carrying deletions, into fragments of
the target size, streaming rows in bounded batches. Commits like Lance (ReserveFragments,
then Rewrite); indices and table metadata carry over. Prints a JSON summary.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ds, err := openAt(cmd, store, args[0], 0, "")
			if err != nil {
				return err
			}
			o.Name = args[0]
			_, res, err := ds.Compact(cmd.Context(), o)
			if err != nil {
				return err
			}
			return printJSON(cmd.OutOrStdout(), res)
		},
	}
	f := cmd.Flags()
	f.Int64Var(&o.TargetRowsPerFragment, "target-rows", 1<<20, "target rows per fragment")
	f.Int64Var(&o.TargetBytesPerFragment, "target-bytes", 1<<30, "fragments with this many bytes of data are never merged")
	f.Float64Var(&o.MaterializeDeletionsThreshold, "materialize-deletions-threshold", 0, "rewrite fragments whose deleted/physical ratio is above this (0: any deletion)")
	f.BoolVar(&o.KeepDeletions, "keep-deletions", false, "do not rewrite fragments just to drop deleted rows")
	f.IntVar(&o.BatchRows, "batch-rows", 8192, "rows per read batch (bounds memory with --page-bytes)")
	f.IntVar(&o.PageBytes, "page-bytes", 8<<20, "per-column page buffer of the file writer")
	f.IntVar(&o.MaxGroups, "max-groups", 0, "rewrite at most this many groups in this pass (0: all)")
	return cmd
}

func newCleanupCmd(store *storeFlags) *cobra.Command {
	var (
		o         lance.CleanupOptions
		olderThan time.Duration
	)
	cmd := &cobra.Command{
		Use:   "cleanup URI --older-than D",
		Short: "Remove old versions and the files only they reference, in bounded, resumable passes",
		Long: `Remove versions older than --older-than (keeping the latest, the newest --retain-versions
and every tagged version) and delete the data, deletion, transaction and index files no
retained version references. The pass is bounded by --max-objects and --timeout, deletes in
batches, logs progress, and stops at a failing store with the dataset consistent; run it
again to continue. Prints a JSON summary: versions_removed, objects_deleted, bytes_removed,
remaining, complete, seconds.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			ds, err := openAt(cmd, store, args[0], 0, "")
			if err != nil {
				return err
			}
			o.OlderThan = olderThan
			o.Name = args[0]
			if o.Timeout > 0 {
				// The pass stops starting batches at --timeout; the context is the hard stop
				// shortly after, for a batch stuck in the store.
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, o.Timeout+30*time.Second)
				defer cancel()
			}
			res, err := ds.Cleanup(ctx, o)
			if perr := printJSON(cmd.OutOrStdout(), res); perr != nil {
				return perr
			}
			return err
		},
	}
	f := cmd.Flags()
	f.DurationVar(&olderThan, "older-than", 0, "remove versions committed more than this long ago (e.g. 1h, 168h; 0: all but retained)")
	f.IntVar(&o.RetainVersions, "retain-versions", 1, "always keep the newest N versions")
	f.IntVar(&o.MaxObjects, "max-objects", 0, "stop after deleting this many objects (0: no limit); the next run continues")
	f.DurationVar(&o.Timeout, "timeout", 0, "stop starting deletes after this long (0: no limit)")
	f.BoolVar(&o.DeleteUnverified, "delete-unverified", false, "delete unreferenced files without waiting --unverified-age (safe only when no writer is mid-commit)")
	f.DurationVar(&o.UnverifiedAge, "unverified-age", lance.DefaultUnverifiedAge, "unreferenced files not proven garbage must be this old")
	f.BoolVar(&o.VerifyExpired, "verify-expired", false, "read removed manifests so the files they reference count as proven garbage (Lance's behaviour)")
	f.IntVar(&o.DeleteBatchSize, "delete-batch", 1000, "keys per batch delete request")
	f.IntVar(&o.DeleteConcurrency, "delete-concurrency", 4, "batch deletes in flight")
	_ = cmd.MarkFlagRequired("older-than")
	return cmd
}
