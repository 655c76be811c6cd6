package master

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/lancectx/lancectx/ctxstore/fts"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/registry"
	"github.com/lancectx/lancectx/storekind"
	"github.com/lancectx/lancectx/wal"
)

// The full-text index of context stores (ctxstore/fts): segments of postings over
// text_payload kept beside the base table under fts.Dir, which Lance ignores, covering
// base fragments by id. The index task builds it after the vector index (the same
// task, so the sweep and the API's index requests serve both): a new segment over the
// fragments no segment covers, segments of vanished fragments dropped. It writes no
// table version and takes no lock: a compaction or a merge that commits meanwhile only
// leaves some fragments uncovered, which the worker's retrieve scans until the next
// build (worker/contexts_fts.go).

// withTextIndex runs after the vector index part of an index task (its detail and
// error given) and builds the store's full-text index; the task's detail tells both.
// A vector part that skipped (no embeddings to train on) does not stop the text part.
func (m *Master) withTextIndex(ctx context.Context, kind storekind.Kind, entry registry.Entry, detail string, err error) (string, error) {
	if kind.Name != storekind.Context.Name {
		return detail, err
	}
	var skip *skipError
	if err != nil && !errors.As(err, &skip) {
		return detail, err
	}
	text, terr := m.runTextIndex(ctx, kind, entry)
	switch {
	case terr != nil && errors.As(terr, &skip):
		return detail, err
	case terr != nil:
		return detail, terr
	case err != nil:
		// The vector part skipped; the text part did its work: report it, done.
		return fmt.Sprintf("vector index skipped (%v); %s", err, text), nil
	}
	return detail + "; " + text, nil
}

// runTextIndex brings the full-text index of a context store up to date with the
// latest version of its base table.
func (m *Master) runTextIndex(ctx context.Context, kind storekind.Kind, entry registry.Entry) (string, error) {
	target := kind.Target(entry.Name)
	ds, err := lance.OpenStore(ctx, m.datasetStore(kind, entry.Name))
	if err != nil {
		return "", fmt.Errorf("text index %s: %w", target, err)
	}
	inc := wal.Incarnation(ds)
	if inc != entry.Incarnation {
		return "", skipf("store %q is being deleted or re-created (its base table is incarnation %q, the registry says %q)",
			target, inc, entry.Incarnation)
	}
	t0 := time.Now()
	res, err := fts.Build(ctx, ds, fts.BuildOptions{Incarnation: inc})
	m.met.indexSeconds.WithLabelValues("text_" + res.Op).Observe(time.Since(t0).Seconds())
	if err != nil {
		return "", fmt.Errorf("text index %s: %w", target, err)
	}
	m.met.indexOps.WithLabelValues("text_" + res.Op).Inc()
	return fmt.Sprintf("text index %s on version %d: %d documents added, %d of %d rows indexed in %d segments, %d old segment files deleted",
		res.Op, ds.Version(), res.Docs, res.Indexed, ds.CountRows(), res.Segments, res.Deleted), nil
}

// textIndexDue says whether the full-text index of ds lags enough to need a task: by
// the vector index's thresholds, on the rows its segments do not cover.
func (m *Master) textIndexDue(ctx context.Context, ds *lance.Dataset) (bool, error) {
	if ds.CountRows() < m.set.ContextIndexMinRows {
		return false, nil
	}
	man, err := fts.ReadManifest(ctx, ds.Store())
	if errors.Is(err, fts.ErrCorrupt) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	unindexed, indexed := fts.Unindexed(man, ds, wal.Incarnation(ds))
	if indexed == 0 {
		return unindexed > 0, nil
	}
	return unindexed >= m.set.minUnindexed(indexCoverage{Indexed: indexed}), nil
}

// textIndexDueQuiet is textIndexDue for the sweep: a store whose index manifest cannot
// be read now is left to the next pass.
func (m *Master) textIndexDueQuiet(ctx context.Context, ds *lance.Dataset) bool {
	due, err := m.textIndexDue(ctx, ds)
	return err == nil && due
}
