package wal

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"
	"golang.org/x/sync/errgroup"

	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/lance/file"
	"github.com/lancectx/lancectx/objstore"
)

// Merge defaults: rows never pass through the worker, so a pass is bounded by what it
// does hold, the candidates' keys (MaxRows), and by how much it copies.
const (
	DefaultMergeMaxGenerations = 1024
	DefaultMergeMaxBytes       = 16 << 30
	DefaultMergeMaxRows        = 256 << 10
	// mergeCommitAttempts bounds recomputations after concurrent commits.
	mergeCommitAttempts = 6
	copyConcurrency     = 4
)

// keyReadConcurrency is how many generations a merge decodes keys of at once. Key
// reads are CPU-bound decoding: they take half the cores (at least one) and leave the
// rest to appends, whose acks otherwise queue behind them for the whole key phase
// (two readers on a 2-core machine stalled acks for 200 ms).
func keyReadConcurrency() int { return max(1, runtime.GOMAXPROCS(0)/2) }

// MergeOptions bound one merge pass. Whole generations are taken, oldest first, until a
// bound is reached; at least one generation is always taken so a pass makes progress.
type MergeOptions struct {
	MaxGenerations int
	MaxBytes       int64
	// MaxRows bounds the keys a pass holds in memory (the dedup set).
	MaxRows int64
}

func (o *MergeOptions) defaults() {
	if o.MaxGenerations <= 0 {
		o.MaxGenerations = DefaultMergeMaxGenerations
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMergeMaxBytes
	}
	if o.MaxRows <= 0 {
		o.MaxRows = DefaultMergeMaxRows
	}
}

// MergeResult reports a merge pass.
type MergeResult struct {
	// Generations merged into the base table by this pass.
	Generations int `json:"generations"`
	// Rows added to the base table.
	Rows int64 `json:"rows"`
	// DuplicatesDeleted: older rows of the same keys hidden with deletion vectors.
	DuplicatesDeleted int64 `json:"duplicates_deleted"`
	// Commits: base versions written (one per key-disjoint part).
	Commits int `json:"commits"`
	// Version is the base version after the pass.
	Version uint64 `json:"version"`
	// Pending generations of the shard left for later passes.
	Pending int `json:"pending"`
}

// Merge folds this shard's sealed generations into the base table (see MergeShard).
// One merge of a shard runs at a time; appends and reads continue meanwhile.
func (s *Shard) Merge(ctx context.Context, opts MergeOptions) (MergeResult, error) {
	select {
	case s.merging <- struct{}{}:
	case <-ctx.Done():
		return MergeResult{}, ctx.Err()
	}
	defer func() { <-s.merging }()
	if s.stale.Load() {
		return MergeResult{}, ErrIncarnation
	}
	env := &mergeEnv{st: s.st, shard: s.id, keyColumn: s.opts.KeyColumn, incarnation: s.opts.Incarnation, writer: s.opts.WorkerID,
		log: s.log, met: s.met, hook: s.runHook}
	if r := s.reader; r != nil && r.keyCache != nil {
		env.keyCache, env.keyScope = r.keyCache, r.keyScope
	}
	res, err := env.run(ctx, opts)
	if env.base != nil {
		s.noteBase(env.base)
	}
	if env.manifest != nil {
		s.setManifest(env.manifest)
		s.localPending.Store(int64(res.Pending))
	}
	if errors.Is(err, ErrIncarnation) {
		s.markStale(err.Error())
	}
	if err != nil {
		n := s.mergeFailures.Add(1)
		s.log.Warn("wal: merge failed", "err", err, "consecutive_failures", n, "merged_generations", res.Generations)
		return res, err
	}
	s.mergeFailures.Store(0)
	s.lastMergeOK.Store(time.Now().UnixNano())
	return res, nil
}

// MergeShard folds the sealed generations of any shard into the base table: the
// generation files are placed into data/ by server-side copy (hard link on local disk),
// never read; only their key column is read, to find older rows of the same keys in
// the base table, which the same commit hides with deletion vectors. The commit also
// advances the shard's watermark in the table metadata (compare-and-swap), so a
// generation is merged exactly once however merges crash or race; then the shard
// manifest drops the merged generations. It is safe to run while the shard's owner
// appends and seals (the drop is a relative update that never changes the epoch).
func MergeShard(ctx context.Context, t MergeTarget, opts MergeOptions, met *Metrics, log *slog.Logger) (MergeResult, error) {
	if met == nil {
		met = NewMetrics(nil)
	}
	if log == nil {
		log = slog.Default()
	}
	env := &mergeEnv{st: t.Store, shard: t.Shard, keyColumn: t.KeyColumn, incarnation: t.Incarnation, log: log, met: met}
	return env.run(ctx, opts)
}

// MergeTarget names the shard of a dataset that MergeShard merges.
type MergeTarget struct {
	// Store is rooted at the dataset directory.
	Store     objstore.Store
	Shard     string
	KeyColumn string
	// Incarnation is the dataset incarnation the merge is for (see IncarnationKey): a
	// base table of another one fails the merge with ErrIncarnation, a shard manifest of
	// another one is left alone, and the commit only lands on this incarnation.
	Incarnation string
}

// mergeEnv is one merge pass.
type mergeEnv struct {
	st          objstore.Store
	shard       string
	keyColumn   string
	incarnation string
	writer      string
	log         *slog.Logger
	met         *Metrics
	hook        func(step string) error
	// keyCache, if set, finds the base rows of the merged keys from its indexes of the
	// key column (under keyScope, the shard's reader's) instead of a scan of it.
	keyCache *lance.KeyCache
	keyScope string
	// results for the caller
	base     *lance.Dataset
	manifest *Manifest
}

func (e *mergeEnv) step(name string) error {
	if e.hook == nil {
		return nil
	}
	return e.hook(name)
}

func (e *mergeEnv) run(ctx context.Context, opts MergeOptions) (MergeResult, error) {
	opts.defaults()
	start := time.Now()
	var res MergeResult
	err := e.pass(ctx, opts, &res)
	if err != nil {
		e.met.mergeFailures.Inc()
	} else {
		e.met.mergeDuration.WithLabelValues("total").Observe(time.Since(start).Seconds())
	}
	e.met.mergeGenerations.Add(float64(res.Generations))
	e.met.mergeRows.Add(float64(res.Rows))
	e.met.mergeDuplicates.Add(float64(res.DuplicatesDeleted))
	if res.Generations > 0 || err != nil {
		e.log.Info("wal: merge pass", "generations", res.Generations, "rows", res.Rows, "duplicates_deleted", res.DuplicatesDeleted,
			"commits", res.Commits, "version", res.Version, "pending", res.Pending, "seconds", time.Since(start).Seconds(), "err", err)
	}
	return res, err
}

// candidate is a generation chosen for this pass, with its keys.
type candidate struct {
	Generation
	keys []string // row order
	// dups are rows whose key repeats later in the same file (never written by this
	// package's sealer, handled anyway): hidden after the commit.
	dups []uint32
}

func (e *mergeEnv) pass(ctx context.Context, opts MergeOptions, res *MergeResult) error {
	for restart := 0; ; restart++ {
		if restart >= 3 {
			return fmt.Errorf("wal: merge of shard %s: the watermark kept moving (a concurrent merger)", e.shard)
		}
		base, err := lance.OpenStore(ctx, e.st)
		if errors.Is(err, lance.ErrDatasetNotFound) {
			return fmt.Errorf("%w: %v", ErrIncarnation, err)
		}
		if err != nil {
			return fmt.Errorf("wal: merge: open base: %w", err)
		}
		if inc := Incarnation(base); inc != e.incarnation {
			return fmt.Errorf("%w: the base table is incarnation %q, the merge is for %q", ErrIncarnation, inc, e.incarnation)
		}
		e.base = base
		kf := base.Schema().Field(e.keyColumn)
		if kf == nil {
			return fmt.Errorf("wal: merge: key column %q is not in the table", e.keyColumn)
		}
		keyOf, err := keyFunc(kf.ArrowType())
		if err != nil {
			return err
		}
		w, err := watermark(base.TableMetadata(), e.shard)
		if err != nil {
			return err
		}
		res.Version = base.Version()
		m, err := readLatestManifest(ctx, e.st, e.shard)
		if err != nil || m == nil {
			return err
		}
		if m.Incarnation != e.incarnation {
			return nil // a shard of a deleted incarnation: nothing of it belongs here
		}
		e.manifest = m
		if m.pendingAbove(w) != len(m.Generations) {
			// A previous merge committed but crashed before dropping: finish that.
			if err := e.drop(ctx, w); err != nil {
				return err
			}
			m = e.manifest
		}
		res.Pending = m.pendingAbove(w)
		cands := chooseCandidates(m.Generations, w, opts)
		if len(cands) == 0 {
			return nil
		}
		t := time.Now()
		if err := e.readKeys(ctx, cands, kf.ID, keyOf); err != nil {
			return err
		}
		parts, partOf := splitDisjoint(cands)
		located, err := e.locateKeys(ctx, base, keyOf, partOf)
		if err != nil {
			return err
		}
		e.met.mergeDuration.WithLabelValues("keys").Observe(time.Since(t).Seconds())
		var fixups map[uint64]*roaring.Bitmap
		for pi, part := range parts {
			next, dups, err := e.commitPart(ctx, base, w, part, located, partOf, keyOf)
			if errors.Is(err, lance.ErrPrecondition) {
				e.met.mergeRetries.Inc()
				e.log.Info("wal: merge watermark moved under us; starting over", "err", err)
				break // restart from the new watermark
			}
			if err != nil {
				return err
			}
			last := part[len(part)-1].Gen
			newIDs := newFragmentIDs(next, len(part))
			for j, c := range part {
				// Only a later part's commit looks these rows up (to hide them under a
				// newer row of the key); a key no later part has needs no entry, and
				// most have none (one part: the ids were unique), which spared
				// a map entry and a slice per merged row.
				for r, k := range c.keys {
					if partOf[k] > pi {
						located[k] = []uint64{newIDs[j]<<32 | uint64(r)}
					}
				}
				if len(c.dups) > 0 {
					if fixups == nil {
						fixups = map[uint64]*roaring.Bitmap{}
					}
					fixups[newIDs[j]] = roaring.BitmapOf(c.dups...)
				}
				res.Generations++
				res.Rows += int64(c.Rows)
			}
			res.DuplicatesDeleted += dups
			res.Commits++
			res.Version = next.Version()
			base, w = next, last
			e.base = next
		}
		if fixups != nil && w == cands[len(cands)-1].Gen {
			next, err := base.CommitFiles(ctx, lance.FilesCommit{Delete: fixups, Expect: map[string]string{WatermarkKey(e.shard): formatWatermark(w)},
				ExpectConfig: e.expectConfig(), Properties: map[string]string{"lancectx.operation": "wal-merge-dedup"}})
			if errors.Is(err, lance.ErrDatasetReplaced) {
				return fmt.Errorf("%w: %v", ErrIncarnation, err)
			}
			if err != nil {
				return fmt.Errorf("wal: merge: hide duplicates inside generations: %w", err)
			}
			base, e.base = next, next
			res.Version = next.Version()
		}
		if w == cands[len(cands)-1].Gen || res.Commits > 0 {
			if err := e.drop(ctx, w); err != nil {
				return err
			}
			res.Pending = e.manifest.pendingAbove(w)
		}
		if w == cands[len(cands)-1].Gen {
			return nil
		}
	}
}

// chooseCandidates takes whole generations above w, oldest first, within the bounds.
func chooseCandidates(gens []Generation, w uint64, opts MergeOptions) []*candidate {
	sorted := make([]Generation, 0, len(gens))
	for _, g := range gens {
		if g.Gen > w {
			sorted = append(sorted, g)
		}
	}
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Gen < sorted[j].Gen })
	var out []*candidate
	var bytes, rows int64
	for _, g := range sorted {
		if len(out) > 0 && (len(out) >= opts.MaxGenerations || bytes+int64(g.Bytes) > opts.MaxBytes || rows+int64(g.Rows) > opts.MaxRows) {
			break
		}
		out = append(out, &candidate{Generation: g})
		bytes += int64(g.Bytes)
		rows += int64(g.Rows)
	}
	return out
}

// readKeys reads the key column of every candidate (and nothing else). The keys of a
// file share one string allocation.
func (e *mergeEnv) readKeys(ctx context.Context, cands []*candidate, keyID int32, keyOf func(arrow.Array, int) string) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(keyReadConcurrency())
	for _, c := range cands {
		g.Go(func() error {
			key := shardDir(e.shard) + c.Path
			r, err := file.Open(gctx, lance.StoreSource(e.st, key), int64(c.Bytes))
			if err != nil {
				return fmt.Errorf("wal: merge: open generation %d: %w", c.Gen, err)
			}
			if r.NumRows() != c.Rows {
				return fmt.Errorf("wal: merge: generation %d has %d rows, the manifest says %d", c.Gen, r.NumRows(), c.Rows)
			}
			if c.Rows == 0 {
				return nil
			}
			rec, err := r.Read(gctx, []int32{keyID}, 0, c.Rows)
			if err != nil {
				return fmt.Errorf("wal: merge: read keys of generation %d: %w", c.Gen, err)
			}
			defer rec.Release()
			col := rec.Column(0)
			var sb strings.Builder
			ends := make([]int, col.Len())
			for i := range ends {
				if col.IsNull(i) {
					return fmt.Errorf("wal: merge: generation %d has a null key at row %d", c.Gen, i)
				}
				sb.WriteString(keyOf(col, i))
				ends[i] = sb.Len()
			}
			arena := sb.String()
			c.keys = make([]string, len(ends))
			prev := 0
			for i, end := range ends {
				c.keys[i] = arena[prev:end]
				prev = end
			}
			if c.UniqueKeys {
				// The sealer wrote one row per key: a map of every key of the file
				// to find none was a tenth of a merge's allocations and time.
				return nil
			}
			seen := make(map[string]int, len(ends))
			for i, k := range c.keys {
				if j, ok := seen[k]; ok {
					c.dups = append(c.dups, uint32(j))
				}
				seen[k] = i
			}
			return nil
		})
	}
	return g.Wait()
}

// splitDisjoint cuts the candidates into consecutive parts whose keys are disjoint: one
// commit cannot hide a row of a fragment it adds, so a key repeated in a later
// generation goes to a later commit, which then finds it in the base.
func splitDisjoint(cands []*candidate) ([][]*candidate, map[string]int) {
	var parts [][]*candidate
	n := 0
	for _, c := range cands {
		n += len(c.keys)
	}
	partOf := make(map[string]int, n) // sized once: growing it was most of the split's time
	p := 0
	for _, c := range cands {
		if len(parts) > 0 {
			for _, k := range c.keys {
				if q, ok := partOf[k]; ok && q == p {
					p++
					break
				}
			}
		}
		if p == len(parts) {
			parts = append(parts, nil)
		}
		parts[p] = append(parts[p], c)
		for _, k := range c.keys {
			partOf[k] = p
		}
	}
	return parts, partOf
}

// locateKeys finds the visible base rows whose key is in want: from the key cache's
// indexes of the key column when the merge has one (lance.LocateKeys: a pass then
// costs what it merges, where the scan cost the whole key column on every pass: with
// 16 writers on a growing datagen store, merge passes went from 0.22 to 0.45 s in
// 10 s and slowed the appends beside them), else by streaming the key column.
func (e *mergeEnv) locateKeys(ctx context.Context, base *lance.Dataset, keyOf func(arrow.Array, int) string, want map[string]int) (map[string][]uint64, error) {
	if e.keyCache != nil {
		out, err := lance.LocateKeys(ctx, base, e.keyCache, e.keyScope, e.keyColumn, want)
		if err != nil {
			return nil, fmt.Errorf("wal: merge: locate base keys: %w", err)
		}
		return out, nil
	}
	return scanKeys(ctx, base, e.keyColumn, keyOf, func(k string) bool { _, ok := want[k]; return ok })
}

// scanKeys finds the visible base rows whose key is in want, streaming only the key
// column: memory is bounded by want, not by the table.
func scanKeys(ctx context.Context, base *lance.Dataset, keyColumn string, keyOf func(arrow.Array, int) string, want func(string) bool) (map[string][]uint64, error) {
	out := map[string][]uint64{}
	if len(base.Fragments()) == 0 {
		return out, nil
	}
	// Row addresses, not row ids: the deletions are positions in fragments, also on a
	// base with stable row ids.
	sc, err := base.Scan(ctx, lance.ScanOptions{Columns: []string{keyColumn}, WithRowAddr: true, BatchSize: 65536})
	if err != nil {
		return nil, err
	}
	defer sc.Release()
	for sc.Next() {
		rec := sc.RecordBatch()
		col := rec.Column(0)
		ids := rec.Column(1).(interface{ Value(int) uint64 })
		for i := 0; i < col.Len(); i++ {
			if col.IsNull(i) {
				continue
			}
			if k := keyOf(col, i); want(k) {
				out[k] = append(out[k], ids.Value(i))
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("wal: merge: scan base keys: %w", err)
	}
	return out, nil
}

// commitPart places a part's files into data/ and commits them with the deletions of
// older rows of their keys and the new watermark. Concurrent commits that add rows or
// touch the same fragments make it recompute the deletions (bounded).
func (e *mergeEnv) commitPart(ctx context.Context, base *lance.Dataset, w uint64, part []*candidate, located map[string][]uint64,
	partOf map[string]int, keyOf func(arrow.Array, int) string) (*lance.Dataset, int64, error) {
	t := time.Now()
	files, err := e.place(ctx, part)
	if err != nil {
		return nil, 0, err
	}
	e.met.mergeDuration.WithLabelValues("copy").Observe(time.Since(t).Seconds())
	if err := e.step("merge:copied"); err != nil {
		return nil, 0, err
	}
	last := part[len(part)-1].Gen
	t = time.Now()
	for attempt := 1; ; attempt++ {
		del := map[uint64]*roaring.Bitmap{}
		var dups int64
		for _, c := range part {
			for _, k := range c.keys {
				for _, addr := range located[k] {
					bm := del[addr>>32]
					if bm == nil {
						bm = roaring.New()
						del[addr>>32] = bm
					}
					bm.Add(uint32(addr))
				}
			}
		}
		for _, bm := range del {
			dups += int64(bm.GetCardinality())
		}
		next, err := base.CommitFiles(ctx, lance.FilesCommit{
			Files:         files,
			Delete:        del,
			TableMetadata: map[string]string{WatermarkKey(e.shard): formatWatermark(last)},
			Expect:        map[string]string{WatermarkKey(e.shard): formatWatermark(w)},
			ExpectConfig:  e.expectConfig(),
			Properties:    map[string]string{"lancectx.operation": "wal-merge", "lancectx.wal.shard": e.shard},
		})
		if err == nil {
			e.met.mergeDuration.WithLabelValues("commit").Observe(time.Since(t).Seconds())
			return next, dups, e.step("merge:committed")
		}
		if errors.Is(err, lance.ErrDatasetReplaced) {
			e.unplace(files)
			return nil, 0, fmt.Errorf("%w: %v", ErrIncarnation, err)
		}
		if errors.Is(err, lance.ErrPrecondition) && e.incarnationChanged(ctx) {
			e.unplace(files)
			return nil, 0, fmt.Errorf("%w: %v", ErrIncarnation, err)
		}
		if errors.Is(err, lance.ErrPrecondition) || lance.IsConflict(err) && attempt >= mergeCommitAttempts {
			e.unplace(files) // definitely not committed
			return nil, 0, err
		}
		if !lance.IsConflict(err) {
			return nil, 0, fmt.Errorf("wal: merge: commit: %w", err)
		}
		// Someone committed meanwhile (rows added, fragments compacted): find the keys
		// again on the newest version.
		e.met.mergeRetries.Inc()
		if base, err = base.Latest(ctx); err != nil {
			return nil, 0, err
		}
		// Every candidate key is looked up again (not only this part's): later parts
		// must not commit deletions computed on the older version either.
		fresh, err := e.locateKeys(ctx, base, keyOf, partOf)
		if err != nil {
			return nil, 0, err
		}
		clear(located)
		maps.Copy(located, fresh)
	}
}

// place copies the part's generation files into data/ under fresh names. A fresh name
// per attempt means a copy is never shared with another attempt: an attempt's leftover
// (a crash before its commit) is unreferenced garbage that cleanup collects, and a
// racing merger can never delete or reuse a file another merger committed.
func (e *mergeEnv) place(ctx context.Context, part []*candidate) ([]lance.NamedDataFile, error) {
	files := make([]lance.NamedDataFile, len(part))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(copyConcurrency)
	for i, c := range part {
		var rnd [6]byte
		_, _ = rand.Read(rnd[:])
		name := fmt.Sprintf("wal-%s-%020d-%s.lance", e.shard, c.Gen, hex.EncodeToString(rnd[:]))
		files[i] = lance.NamedDataFile{Path: name, DataFileInfo: c.File}
		g.Go(func() error {
			if err := objstore.CopyVia(gctx, e.st, shardDir(e.shard)+c.Path, "data/"+name); err != nil {
				return fmt.Errorf("wal: merge: place generation %d: %w", c.Gen, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		e.unplace(files)
		return nil, err
	}
	return files, nil
}

// unplace deletes copies of a part that was definitely not committed (best effort).
func (e *mergeEnv) unplace(files []lance.NamedDataFile) {
	keys := make([]string, len(files))
	for i, f := range files {
		keys[i] = "data/" + f.Path
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = objstore.DeleteAll(ctx, e.st, keys, 0)
}

// expectConfig is the commit precondition that keeps a merge inside its incarnation.
func (e *mergeEnv) expectConfig() map[string]string {
	return map[string]string{IncarnationKey: e.incarnation}
}

// incarnationChanged tells whether the latest base table is of another incarnation
// (a failed precondition may be that rather than a moved watermark).
func (e *mergeEnv) incarnationChanged(ctx context.Context) bool {
	ds, err := lance.OpenStore(ctx, e.st)
	return err == nil && Incarnation(ds) != e.incarnation
}

// newFragmentIDs returns the ids of the last n fragments (the ones a commit added).
func newFragmentIDs(ds *lance.Dataset, n int) []uint64 {
	frags := ds.Fragments()
	out := make([]uint64, n)
	for i := range out {
		out[i] = frags[len(frags)-n+i].GetId()
	}
	return out
}

// drop removes the generations <= w from the shard manifest (they are in the base
// table), keeping their files for the retire grace.
func (e *mergeEnv) drop(ctx context.Context, w uint64) error {
	t := time.Now()
	m, err := updateManifest(ctx, e.st, manifestUpdate{shard: e.shard, writer: e.writer, incarnation: e.incarnation,
		edit: func(next *Manifest) error {
			if !retire(next, w, time.Now().UTC()) {
				return errNoChange
			}
			return nil
		}})
	if err != nil {
		return fmt.Errorf("wal: merge: drop merged generations: %w", err)
	}
	e.manifest = m
	e.met.mergeDuration.WithLabelValues("drop").Observe(time.Since(t).Seconds())
	return e.step("merge:dropped")
}
