package master

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/lancectx/lancectx/ctxstore"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/registry"
	"github.com/lancectx/lancectx/storekind"
	"github.com/lancectx/lancectx/wal"
)

// The vector index of context stores: an IVF_FLAT index in Lance's own format on the
// embedding column (lance.BuildVectorIndex), which LanceDB lists and uses, and which the
// worker's search probes for the fragments it covers (worker/contexts_search.go).
//
// The index sweep (leader only) picks the context stores whose base table has at least
// CONTEXT_INDEX_MIN_ROWS rows and either no index or CONTEXT_INDEX_MIN_UNINDEXED_ROWS
// rows in fragments the index does not cover, and enqueues an index task for each
// (deduplicated per target by the queue). The task builds the index the first time
// and later extends it with a delta segment over the new fragments (same centroids, so
// no retraining). It takes no lock: its commit is conditional (lance's commit rebases
// over appends and deletes, and refuses when a compaction rewrote a fragment the new
// segment covers), so a concurrent merge or compaction makes it start again from the
// latest version, a bounded number of times, then end cleanly for the next sweep.
// Compaction in turn never rewrites an indexed fragment (lance.Compact skips them).

// KindIndex builds or extends a context store's vector index.
const KindIndex = "index"

// contextIndexName is the name of a context store's vector index: LanceDB's default
// for the embedding column, so LanceDB's own queries pick it.
const contextIndexName = ctxstore.ColEmbedding + "_idx"

// indexCommitAttempts bounds the builds of one task that lose their commit to a
// concurrent rewrite; past it the task ends and the next sweep tries again.
const indexCommitAttempts = 3

// DefaultContextIndexMaxBytes is CONTEXT_INDEX_MAX_BYTES's default: 4 GiB of
// embeddings (1.4M rows of 768 dimensions, 700k of 1536), about 10 GiB at a build's
// peak (measured: 6.1 GiB for 1M × 768, bench/RESULTS.md row 13.5).
const DefaultContextIndexMaxBytes = 4 << 30

// indexBytes is what an index task over rows rows of dim dimensions holds of their
// embeddings.
func indexBytes(rows int64, dim int) int64 { return rows * int64(dim) * 4 }

// indexFits says whether a task of op ("build" or "extend") on a store with coverage c
// and dim-dimension embeddings stays within CONTEXT_INDEX_MAX_BYTES, and what it would
// hold.
func (s Settings) indexFits(op string, c indexCoverage, dim int) (bool, int64) {
	rows := c.Rows
	if op == "extend" {
		rows = c.Unindexed
	}
	b := indexBytes(rows, dim)
	return s.ContextIndexMaxBytes <= 0 || b <= s.ContextIndexMaxBytes, b
}

// indexSweepMaxInspect bounds the manifests one sweep pass opens; a cursor carries the
// next pass on where this one stopped.
const indexSweepMaxInspect = 512

// indexCoverage is what a base table's manifest says of its vector index.
type indexCoverage struct {
	// Rows are the live rows of the base table; Indexed and Unindexed split them by
	// whether the index covers their fragment.
	Rows, Indexed, Unindexed int64
	// Exists: the table has a vector index named contextIndexName.
	Exists bool
	// Segments counts its entries (the build and its extensions).
	Segments int
}

// coverageOf reads the vector index coverage of ds from its manifest (no I/O).
func coverageOf(ds *lance.Dataset) (indexCoverage, error) {
	var c indexCoverage
	idx, err := ds.Indices()
	if err != nil {
		return c, err
	}
	covered := map[uint64]bool{}
	for _, ix := range idx {
		if ix.Name != contextIndexName || !strings.HasSuffix(ix.Type, "VectorIndexDetails") {
			continue
		}
		c.Exists = true
		c.Segments++
		for _, f := range ix.Fragments {
			covered[f] = true
		}
	}
	for _, f := range ds.Fragments() {
		n := int64(f.GetPhysicalRows()) - int64(f.GetDeletionFile().GetNumDeletedRows())
		c.Rows += n
		if covered[f.GetId()] {
			c.Indexed += n
		} else {
			c.Unindexed += n
		}
	}
	return c, nil
}

// minUnindexed is the unindexed-row count that makes an indexed store due for an
// extension: CONTEXT_INDEX_MIN_UNINDEXED_ROWS, or 10% of the indexed rows when 0.
func (s Settings) minUnindexed(c indexCoverage) int64 {
	if s.ContextIndexMinUnindexedRows > 0 {
		return s.ContextIndexMinUnindexedRows
	}
	return max(c.Indexed/10, 1)
}

// indexDue says whether a store with coverage c needs an index task, and why.
func (s Settings) indexDue(c indexCoverage) (bool, string) {
	switch {
	case c.Rows < s.ContextIndexMinRows:
		return false, ""
	case !c.Exists:
		return true, "build"
	case c.Unindexed >= s.minUnindexed(c):
		return true, "extend"
	}
	return false, ""
}

// indexSweep enqueues index tasks for the context stores that need one. The stats
// snapshot preselects the stores with enough rows (its row count includes pending
// rows, an upper bound of the base's); the sweep then reads each one's latest manifest
// (bounded concurrency, OBSERVE_TIMEOUT_SECS each, at most indexSweepMaxInspect a pass
// from a rotating cursor) for its index coverage. Biggest stores first within a pass.
func (m *Master) indexSweep(ctx context.Context) error {
	var pre []ExperimentStats
	for _, r := range m.stats.Snapshot().Rows {
		if kindOf(r.Kind) == storekind.Context.Name && r.RowCount >= m.set.ContextIndexMinRows {
			pre = append(pre, r)
		}
	}
	m.indexMu.Lock()
	cursor := m.indexCursor
	m.indexMu.Unlock()
	// Rows are sorted by name; start after the cursor and wrap.
	start := sort.Search(len(pre), func(i int) bool { return pre[i].Name > cursor })
	n := min(len(pre), indexSweepMaxInspect)
	batch := make([]ExperimentStats, 0, n)
	for k := 0; k < n; k++ {
		batch = append(batch, pre[(start+k)%len(pre)])
	}
	next := ""
	if n < len(pre) {
		next = batch[n-1].Name
	}
	type due struct {
		target string
		rows   int64
	}
	var (
		mu    sync.Mutex
		dues  []due
		fails int
		first error
		// tooBig are the stores due for a build or extension that would hold more
		// embeddings than CONTEXT_INDEX_MAX_BYTES; biggest the largest of them.
		tooBig  int
		biggest string
		bigB    int64
	)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for _, r := range batch {
		g.Go(func() error {
			octx, cancel := context.WithTimeout(gctx, m.set.ObserveTimeout)
			defer cancel()
			ds, err := lance.OpenStore(octx, m.datasetStore(storekind.Context, r.Name))
			var c indexCoverage
			if err == nil {
				c, err = coverageOf(ds)
			}
			textDue := err == nil && m.textIndexDueQuiet(octx, ds)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				fails++
				if first == nil {
					first = fmt.Errorf("context store %q: %w", r.Name, err)
				}
				return nil // one unreadable store must not hide the others
			}
			vecDue, op := m.set.indexDue(c)
			if vecDue {
				// A table whose schema is not a context store's is left to the task,
				// which says so.
				if opts, oerr := ctxstore.FromArrow(ds.Schema().Arrow()); oerr == nil {
					if fits, b := m.set.indexFits(op, c, opts.EmbeddingDim); !fits {
						vecDue = false
						tooBig++
						if b > bigB {
							biggest, bigB = r.Name, b
						}
					}
				}
			}
			if vecDue || textDue {
				dues = append(dues, due{target: storekind.Context.Target(r.Name), rows: c.Rows})
			}
			return nil
		})
	}
	_ = g.Wait()
	m.indexMu.Lock()
	m.indexCursor = next
	m.indexMu.Unlock()
	sort.Slice(dues, func(i, j int) bool {
		if dues[i].rows != dues[j].rows {
			return dues[i].rows > dues[j].rows
		}
		return dues[i].target < dues[j].target
	})
	cands := make([]candidateRow, len(dues))
	for i, d := range dues {
		cands[i] = candidateRow{name: d.target, backlog: d.rows}
	}
	if fails > 0 {
		m.log.Warn("index sweep: some context stores could not be read", "failed", fails, "first_err", first)
	}
	m.met.indexTooBig.Set(float64(tooBig))
	if tooBig > 0 {
		m.log.Warn("index sweep: context stores left without a vector index: their embeddings exceed CONTEXT_INDEX_MAX_BYTES (searched exactly meanwhile)",
			"stores", tooBig, "largest", biggest, "embedding_bytes", bigB, "max_bytes", m.set.ContextIndexMaxBytes)
	}
	_, err := m.enqueueSweep(ctx, LoopContextIndex, KindIndex, cands)
	if err == nil && fails > 0 && len(cands) == 0 && fails == len(batch) {
		return fmt.Errorf("index sweep: no context store could be read: %w", first)
	}
	return err
}

// runIndex builds or extends the vector index of a context store (see the comment at
// the top of this file). It acts on whatever the latest version lacks, whatever the
// thresholds: they are the sweep's, and a task asked for through the API means it.
func (m *Master) runIndex(ctx context.Context, kind storekind.Kind, entry registry.Entry) (string, error) {
	target := kind.Target(entry.Name)
	if kind.Name != storekind.Context.Name {
		return "", skipf("%s is a %s: only context stores have a vector index", target, kind.Noun)
	}
	st := m.datasetStore(kind, entry.Name)
	for attempt := 1; ; attempt++ {
		ds, err := lance.OpenStore(ctx, st)
		if err != nil {
			return "", fmt.Errorf("index %s: %w", target, err)
		}
		if inc := wal.Incarnation(ds); inc != entry.Incarnation {
			return "", skipf("store %q is being deleted or re-created (its base table is incarnation %q, the registry says %q)",
				target, inc, entry.Incarnation)
		}
		opts, err := ctxstore.FromArrow(ds.Schema().Arrow())
		if err != nil {
			return "", fmt.Errorf("index %s: not a context store table: %w", target, err)
		}
		c, err := coverageOf(ds)
		if err != nil {
			return "", fmt.Errorf("index %s: %w", target, err)
		}
		op := "extend"
		if !c.Exists {
			op = "build"
		} else if usable, err := indexServes(ctx, ds, opts); err != nil {
			return "", fmt.Errorf("index %s: %w", target, err)
		} else if !usable {
			// An index of that name searches cannot use (another metric, another type,
			// e.g. one built with LanceDB): replace it.
			op = "build"
		} else if c.Unindexed == 0 {
			m.met.indexOps.WithLabelValues("noop").Inc()
			return fmt.Sprintf("nothing to index: the index covers all %d rows (version %d)", c.Rows, ds.Version()), nil
		}
		// Checked again for a build an extension falls back to: the bound is on what
		// the work done holds, whichever op does it.
		tooBig := func(op string) error {
			fits, b := m.set.indexFits(op, c, opts.EmbeddingDim)
			if fits {
				return nil
			}
			m.met.indexOps.WithLabelValues("too_big").Inc()
			rows := c.Rows
			if op == "extend" {
				rows = c.Unindexed
			}
			return skipf("%s: a vector index %s would hold %d rows × %d dimensions = %d bytes of embeddings, over CONTEXT_INDEX_MAX_BYTES (%d; "+
				"the build's peak is about 2.5 times that): raise it on a master with the memory; searches stay exact meanwhile",
				target, op, rows, opts.EmbeddingDim, b, m.set.ContextIndexMaxBytes)
		}
		if err := tooBig(op); err != nil {
			return "", err
		}
		t0 := time.Now()
		var out *lance.Dataset
		if op == "extend" {
			out, err = lance.ExtendVectorIndex(ctx, ds, ctxstore.ColEmbedding, contextIndexName)
			if errors.Is(err, lance.ErrNoVectorIndex) {
				// An index of that name lancectx cannot extend (another type): replace it.
				op = "build"
				if err := tooBig(op); err != nil {
					return "", err
				}
			}
		}
		if op == "build" {
			out, err = lance.BuildVectorIndex(ctx, ds, ctxstore.ColEmbedding, lance.VectorIndexOptions{
				Name: contextIndexName, Metric: opts.DistanceMetric})
		}
		m.met.indexSeconds.WithLabelValues(op).Observe(time.Since(t0).Seconds())
		switch {
		case err == nil:
			m.met.indexOps.WithLabelValues(op).Inc()
			added := c.Unindexed
			m.met.indexRows.Add(float64(added))
			after, _ := coverageOf(out)
			return fmt.Sprintf("%s %s index %s on version %d: %d rows added, %d of %d rows indexed in %d segments; version %d",
				op, opts.DistanceMetric, contextIndexName, ds.Version(), added, after.Indexed, after.Rows, after.Segments, out.Version()), nil
		case errors.Is(err, lance.ErrVectorInput) && c.Rows > 0:
			// No vector to train on (every embedding null): nothing an index would serve.
			return "", skipf("%s: %v", target, err)
		case lance.IsConflict(err) && attempt < indexCommitAttempts && ctx.Err() == nil:
			m.met.indexOps.WithLabelValues("conflict").Inc()
			m.log.Info("index: a concurrent commit rewrote what the index covers; starting again from the latest version",
				"target", target, "attempt", attempt, "err", err)
			continue
		case lance.IsConflict(err):
			m.met.indexOps.WithLabelValues("conflict").Inc()
			return fmt.Sprintf("not indexed: lost to concurrent commits %d times (%v); the next sweep tries again", attempt, err), nil
		}
		return "", fmt.Errorf("index %s: %s: %w", target, op, err)
	}
}

// indexServes says whether the vector index of ds is one a search in the store's metric
// uses: a one-partition probe that reports the index it went through ("" when it had to
// search exactly: an index in another metric, or of a type lancectx does not read).
func indexServes(ctx context.Context, ds *lance.Dataset, o ctxstore.Options) (bool, error) {
	q := make([]float32, o.EmbeddingDim)
	for i := range q {
		q[i] = 1 // not zero: a cosine query must have a norm
	}
	res, err := ds.VectorSearch(ctx, ctxstore.ColEmbedding, q, 1,
		lance.VectorSearchOptions{Metric: o.DistanceMetric, NProbes: 1, Index: contextIndexName, IndexedOnly: true})
	if err != nil {
		return false, err
	}
	return res.Index != "", nil
}
