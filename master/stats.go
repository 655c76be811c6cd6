package master

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/storekind"
)

// StatsDataset is the stats table's directory under the data dir.
const StatsDataset = "_stats.rollout.lance"

// Sentinel values of the stats table, as in the reference system.
const (
	NoCompaction   int64 = -1
	UnknownVersion int64 = -1
)

// ExperimentStats is one row of the stats table: what the last scan observed about one
// experiment (a store of any kind). Rows are keyed by (Kind, Name): a rollout store and
// a generic store of the same name are two experiments.
type ExperimentStats struct {
	Name string `json:"name"`
	// Kind is the store kind (storekind.Kind.Name); "" is read as rollout (rows written
	// before the column existed, callers that predate kinds).
	Kind                  string `json:"kind"`
	URI                   string `json:"uri"`
	RowCount              int64  `json:"row_count"`
	FragmentCount         int64  `json:"fragment_count"`
	LastUpdated           int64  `json:"last_updated"` // ms, base manifest timestamp
	PendingWALGenerations int64  `json:"pending_wal_generations"`
	LastCompaction        int64  `json:"last_compaction"` // ms; NoCompaction if never
	TotalCompactions      int64  `json:"total_compactions"`
	ScannedAt             int64  `json:"scanned_at"` // ms
	Version               int64  `json:"version"`    // base version at the last full observation
	// OldestPendingWAL is when the oldest pending WAL generation was sealed (unix ms; 0:
	// none pending): the merge age trigger reads it. Tables written before the column
	// existed read it as 0.
	OldestPendingWAL int64 `json:"oldest_pending_wal"`
}

// statsSchema: every field non-null, as the reference's _stats table.
var statsSchema = arrow.NewSchema([]arrow.Field{
	{Name: "name", Type: arrow.BinaryTypes.String},
	{Name: "uri", Type: arrow.BinaryTypes.String},
	{Name: "row_count", Type: arrow.PrimitiveTypes.Int64},
	{Name: "fragment_count", Type: arrow.PrimitiveTypes.Int64},
	{Name: "last_updated", Type: arrow.PrimitiveTypes.Int64},
	{Name: "pending_wal_generations", Type: arrow.PrimitiveTypes.Int64},
	{Name: "last_compaction", Type: arrow.PrimitiveTypes.Int64},
	{Name: "total_compactions", Type: arrow.PrimitiveTypes.Int64},
	{Name: "scanned_at", Type: arrow.PrimitiveTypes.Int64},
	{Name: "version", Type: arrow.PrimitiveTypes.Int64},
	// Not in the reference's table; last, so the reference's columns keep their places.
	{Name: "oldest_pending_wal", Type: arrow.PrimitiveTypes.Int64},
	// The store kind. Nullable: a table written before it existed has no such column,
	// and its rows (null) are rollout stores, the only kind there was.
	{Name: "kind", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

// rowKey identifies a stats row: the store kind and name.
type rowKey struct{ kind, name string }

// kindOf is a row's kind, "" read as rollout.
func kindOf(kind string) string {
	if kind == "" {
		return storekind.Default().Name
	}
	return kind
}

func keyOf(r ExperimentStats) rowKey { return rowKey{kindOf(r.Kind), r.Name} }

// rowLess orders rows by name, then kind: a listing shows the stores of one name
// together.
func rowLess(a, b ExperimentStats) bool {
	if a.Name != b.Name {
		return a.Name < b.Name
	}
	return kindOf(a.Kind) < kindOf(b.Kind)
}

// StatsSnapshot is an immutable view of the stats table at one version. Readers take it
// from StatsStore.Snapshot without waiting for anything.
type StatsSnapshot struct {
	// Version of the stats table the rows come from (0: the table does not exist yet).
	Version uint64
	// Rows sorted by name, then kind (rowLess); every row's Kind is set.
	Rows  []ExperimentStats
	byKey map[rowKey]int
	// LoadedAt is when this process published the snapshot.
	LoadedAt time.Time
	// NewestScan is the latest ScannedAt of any row (zero without rows): how old the
	// freshest observation is, whatever replica published the snapshot.
	NewestScan time.Time

	// enc holds each row's API JSON, encoded when the snapshot is built (by the loader
	// or writer that publishes it, never by a reader), so a listing page costs a copy of
	// its rows' bytes rather than their encoding. Rows unchanged since the previous
	// snapshot share its bytes.
	enc [][]byte
	// frags are the rows of each fragment of the version (nil: not known; the next load
	// reads the whole table). A load of a later version reads only what changed.
	frags map[uint64]*fragRows
	// names is every row's name in row order, each after a nameSep, so that a ?search=
	// is one pass of strings.Index over it rather than a call per row: per-row calls
	// over 10,000 rows were an eighth of the master's CPU under 50 readers. nameEnd[i]
	// is the offset just past row i's name. Both empty when a name holds nameSep (no
	// valid name does); matching then tests row by row.
	names   string
	nameEnd []int
	// searches remembers the rows matching the texts searched lately, so the searches
	// a dashboard repeats cost a lookup; it goes away with the snapshot.
	searches *searchCache
}

// searchCache holds the matching rows of up to maxCachedSearches texts of one
// snapshot. Its lock is held for map reads and writes only, never for a scan.
type searchCache struct {
	mu sync.Mutex
	m  map[string][]int32
}

// maxCachedSearches bounds a snapshot's searchCache (at most this many lists of row
// indexes, 40 KB each for 10,000 matching rows); when full it starts over.
// maxCachedSearchLen keeps long texts out of it.
const (
	maxCachedSearches  = 64
	maxCachedSearchLen = 256
)

// nameSep separates the names in StatsSnapshot.names; store names never hold it.
const nameSep = "\x00"

// indexNames builds s.names and s.nameEnd from s.Rows.
func (s *StatsSnapshot) indexNames() {
	n := 0
	for _, r := range s.Rows {
		if strings.Contains(r.Name, nameSep) {
			return
		}
		n += len(nameSep) + len(r.Name)
	}
	var b strings.Builder
	b.Grow(n)
	s.nameEnd = make([]int, len(s.Rows))
	for i, r := range s.Rows {
		b.WriteString(nameSep)
		b.WriteString(r.Name)
		s.nameEnd[i] = b.Len()
	}
	s.names = b.String()
}

// matches returns, in row order, the index of every row whose name contains search
// (case-sensitive, as the reference's LIKE '%q%'), for a non-empty search. The rows of
// a text searched lately come from the snapshot's searchCache; callers must not
// modify the slice.
func (s *StatsSnapshot) matches(search string) []int32 {
	c := s.searches
	cache := c != nil && len(search) <= maxCachedSearchLen
	if cache {
		c.mu.Lock()
		rows, ok := c.m[search]
		c.mu.Unlock()
		if ok {
			return rows
		}
	}
	rows := []int32{}
	for i := range s.scan(search) {
		rows = append(rows, int32(i))
	}
	if cache {
		c.mu.Lock()
		if len(c.m) >= maxCachedSearches {
			clear(c.m)
		}
		c.m[search] = rows
		c.mu.Unlock()
	}
	return rows
}

// scan yields, in row order, the index of every row whose name contains search
// (every row when search is empty), without the cache.
func (s *StatsSnapshot) scan(search string) iter.Seq[int] {
	return func(yield func(int) bool) {
		if search == "" || len(s.nameEnd) != len(s.Rows) || strings.Contains(search, nameSep) {
			for i, r := range s.Rows {
				if strings.Contains(r.Name, search) && !yield(i) {
					return
				}
			}
			return
		}
		// search holds no nameSep, so a match lies inside one name: the row whose name
		// ends first past the match's start. The next search starts past that name, so
		// each row is yielded once.
		for pos, lo := 0, 0; ; {
			k := strings.Index(s.names[pos:], search)
			if k < 0 {
				return
			}
			at := pos + k
			i := lo + sort.SearchInts(s.nameEnd[lo:], at+1)
			if !yield(i) {
				return
			}
			pos, lo = s.nameEnd[i], i+1
		}
	}
}

// encoded returns the API JSON of row i (ExperimentSummary).
func (s *StatsSnapshot) encoded(i int) []byte { return s.enc[i] }

// newSnapshot builds the snapshot of rows at version; prev (may be nil) lends the
// encodings of the rows it has unchanged.
func newSnapshot(version uint64, rows []ExperimentStats, prev *StatsSnapshot) *StatsSnapshot {
	for i := range rows {
		rows[i].Kind = kindOf(rows[i].Kind)
	}
	slices.SortFunc(rows, func(a, b ExperimentStats) int {
		if rowLess(a, b) {
			return -1
		}
		if rowLess(b, a) {
			return 1
		}
		return 0
	})
	s := &StatsSnapshot{Version: version, Rows: rows, byKey: make(map[rowKey]int, len(rows)), LoadedAt: time.Now(),
		enc: make([][]byte, len(rows))}
	var newest int64
	for i, r := range rows {
		k := keyOf(r)
		s.byKey[k] = i
		newest = max(newest, r.ScannedAt)
		if prev != nil {
			if j, ok := prev.byKey[k]; ok && prev.Rows[j] == r {
				s.enc[i] = prev.enc[j]
				continue
			}
		}
		b, err := json.Marshal(summaryOf(r))
		if err != nil { // cannot happen: plain strings and numbers
			b = []byte("null")
		}
		s.enc[i] = b
	}
	if newest > 0 {
		s.NewestScan = time.UnixMilli(newest)
	}
	s.indexNames()
	s.searches = &searchCache{m: map[string][]int32{}}
	return s
}

// Get returns the row of the rollout store name (the only kind before kinds existed;
// Lookup takes the kind).
func (s *StatsSnapshot) Get(name string) (ExperimentStats, bool) {
	return s.Lookup(storekind.Default().Name, name)
}

// Lookup returns the row of the store name of kind ("" is rollout).
func (s *StatsSnapshot) Lookup(kind, name string) (ExperimentStats, bool) {
	i, ok := s.byKey[rowKey{kindOf(kind), name}]
	if !ok {
		return ExperimentStats{}, false
	}
	return s.Rows[i], true
}

// nameShared reports whether another kind than kind has a row named name.
func (s *StatsSnapshot) nameShared(kind, name string) bool {
	for _, k := range storekind.All() {
		if k.Name != kindOf(kind) {
			if _, ok := s.byKey[rowKey{k.Name, name}]; ok {
				return true
			}
		}
	}
	// A kind this build does not know (written by a newer master) may share it too.
	i := sort.Search(len(s.Rows), func(i int) bool { return s.Rows[i].Name >= name })
	for ; i < len(s.Rows) && s.Rows[i].Name == name; i++ {
		if s.Rows[i].Kind != kindOf(kind) {
			return true
		}
	}
	return false
}

// StatsStore owns the stats table. Reads go to an in-memory snapshot (an atomic pointer),
// so no reader ever waits on a writer, a scan or maintenance. Writes are one Lance
// version each (a whole round is one Overwrite, whatever the number of experiments), and
// each is a conditional commit on the version it was built from: it lands as the next
// version or commits nothing. No lock orders the writers, in this process or across
// masters (a lock held across storage I/O is what stalled the reference system's
// control plane, and a holder that lost it could still commit); a writer that loses the
// race rebuilds its rows on the latest version, carrying the compaction counters over,
// and tries again within its deadline.
type StatsStore struct {
	st   objstore.Store // rooted at the stats dataset directory
	snap atomic.Pointer[StatsSnapshot]
	// synced is when the snapshot was last known to match storage (unix nanos; 0: never,
	// e.g. the first load has not succeeded yet).
	synced atomic.Int64
	// attempts bounds the conditional commits of one write (0: statsCommitAttempts).
	attempts int
	// bodies recycles listing response bodies (*[]byte), stitched from the snapshot's
	// encodings: a page of 1,000 rows is ~300 KB, and one allocation per request made
	// the GC run every few dozen requests under 50 readers.
	bodies sync.Pool
}

// maxPooledBody bounds the bodies kept for reuse, so one huge page does not stay pinned.
const maxPooledBody = 4 << 20

// listBody returns a buffer of at least size bytes capacity for a listing body.
func (s *StatsStore) listBody(size int) *[]byte {
	if b, ok := s.bodies.Get().(*[]byte); ok && cap(*b) >= size {
		return b
	}
	b := make([]byte, 0, size)
	return &b
}

// putListBody returns b for reuse once its response is written (Write keeps no reference).
func (s *StatsStore) putListBody(b *[]byte) {
	if cap(*b) <= maxPooledBody {
		s.bodies.Put(b)
	}
}

// statsCommitAttempts bounds the conditional commits of one write. Writers are few (the
// leader's round, post-compaction and on-demand refreshes), so losing this many races in
// a row means a storm; the caller gives up and the next round writes the rows.
const statsCommitAttempts = 8

// CommitResult reports a conditional write of the stats table.
type CommitResult struct {
	// Version is the version the write landed as.
	Version uint64
	// Conflicts counts the attempts that found another commit ahead of the version they
	// were built on (and were rebuilt on the latest one).
	Conflicts int
}

// OpenStats opens the stats table in st (rooted at its dataset directory) and loads the
// latest version into memory. A missing table is an empty snapshot.
func OpenStats(ctx context.Context, st objstore.Store) (*StatsStore, error) {
	s := NewStatsStore(st)
	if _, err := s.Reload(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// NewStatsStore returns the stats store of st with an empty snapshot, loading nothing:
// a master must answer even when storage is slow, so it loads with Reload in the
// background (Synced tells whether a load has succeeded).
func NewStatsStore(st objstore.Store) *StatsStore {
	s := &StatsStore{st: st}
	s.snap.Store(newSnapshot(0, nil, nil))
	return s
}

// Snapshot returns the current snapshot. It never blocks.
func (s *StatsStore) Snapshot() *StatsSnapshot { return s.snap.Load() }

// Synced returns when the snapshot was last known to match the latest version on
// storage (zero: never).
func (s *StatsStore) Synced() time.Time {
	if n := s.synced.Load(); n > 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

func (s *StatsStore) markSynced() { s.synced.Store(time.Now().UnixNano()) }

// Reload publishes the latest version if it is newer than the snapshot (replicas that do
// not write refresh this way). It reports whether the snapshot changed. When the latest
// version is the snapshot's, it costs one listing request.
func (s *StatsStore) Reload(ctx context.Context) (bool, error) {
	ds, err := lance.OpenStore(ctx, s.st)
	if errors.Is(err, lance.ErrDatasetNotFound) {
		s.markSynced()
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("stats: open: %w", err)
	}
	cur := s.Snapshot()
	if ds.Version() <= cur.Version {
		s.markSynced()
		return false, nil
	}
	snap, err := loadSnapshot(ctx, ds, cur, nil)
	if err != nil {
		return false, err
	}
	s.publish(snap)
	s.markSynced()
	return true, nil
}

// publish installs snap unless a newer one is already there.
func (s *StatsStore) publish(snap *StatsSnapshot) {
	for {
		cur := s.snap.Load()
		if cur.Version >= snap.Version && cur.Version != 0 {
			return
		}
		if s.snap.CompareAndSwap(cur, snap) {
			return
		}
	}
}

// latest opens the latest version and returns it with its rows: the snapshot when it is
// that version (one listing), otherwise read from storage and published. ds is nil when
// the table does not exist yet (the rows are then empty, at version 0).
func (s *StatsStore) latest(ctx context.Context) (*lance.Dataset, *StatsSnapshot, error) {
	ds, err := lance.OpenStore(ctx, s.st)
	if errors.Is(err, lance.ErrDatasetNotFound) {
		s.markSynced()
		return nil, newSnapshot(0, nil, nil), nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("stats: open: %w", err)
	}
	cur := s.Snapshot()
	if cur.Version == ds.Version() {
		s.markSynced()
		return ds, cur, nil
	}
	snap, err := loadSnapshot(ctx, ds, cur, nil)
	if err != nil {
		return nil, nil, err
	}
	s.publish(snap)
	s.markSynced()
	return ds, snap, nil
}

// statsWrite builds the rows of the next version from the latest one (cur, read from ds;
// ds nil: no table yet) and commits them conditionally on ds, returning the version it
// committed, the whole table's rows at that version and the rows the commit wrote, in
// order (what its new fragments hold).
type statsWrite func(ctx context.Context, ds *lance.Dataset, cur *StatsSnapshot) (next *lance.Dataset, rows, written []ExperimentStats, err error)

// commit runs write on the latest version until it lands, at most s.attempts times. A
// lost race (lance.ErrConflict: another commit is ahead of the version write built on;
// lance.ErrDatasetExists: another writer created the table first) committed nothing, so
// it is retried after a short jittered pause; any other error is returned as is. Every
// wait is bounded by ctx.
func (s *StatsStore) commit(ctx context.Context, write statsWrite) (CommitResult, error) {
	var res CommitResult
	attempts := s.attempts
	if attempts <= 0 {
		attempts = statsCommitAttempts
	}
	for n := 1; ; n++ {
		t0 := time.Now()
		ds, cur, err := s.latest(ctx)
		if err != nil {
			return res, err
		}
		out, rows, written, err := write(ctx, ds, cur)
		if err == nil {
			// The new version's snapshot from cur's fragments and the rows written (no
			// read when the new fragments hold exactly those); if that fails, from the
			// rows alone (the next load then reads the whole table).
			snap, lerr := loadSnapshot(ctx, out, cur, written)
			if lerr != nil {
				snap = newSnapshot(out.Version(), rows, cur)
			}
			s.publish(snap)
			s.markSynced()
			res.Version = out.Version()
			return res, nil
		}
		if !errors.Is(err, lance.ErrConflict) && !errors.Is(err, lance.ErrDatasetExists) {
			return res, err
		}
		res.Conflicts++
		if n >= attempts {
			return res, fmt.Errorf("stats: %d conditional commits in a row lost to other writers: %w", n, err)
		}
		pause := commitBackoff(n)
		if d, ok := ctx.Deadline(); ok && time.Until(d) < pause+time.Since(t0) {
			// Another attempt, as long as this one, would end at the deadline: give up
			// now rather than start I/O that is bound to be cut.
			return res, fmt.Errorf("stats: no time left to retry a commit that lost to another writer: %w", err)
		}
		if !sleepCtx(ctx, pause) {
			return res, fmt.Errorf("stats: retrying a commit that lost to another writer: %w (after: %w)", ctx.Err(), err)
		}
	}
}

// commitBackoff is the pause after the n-th lost race: 10 ms doubling up to 320 ms, each
// drawn uniformly from its upper half, so writers that collided do not collide again in
// lockstep.
func commitBackoff(n int) time.Duration {
	d := 10 * time.Millisecond << min(n-1, 5)
	return d/2 + rand.N(d/2+1)
}

// WriteRound replaces the table with rows in one version (see commitRound) and returns it.
func (s *StatsStore) WriteRound(ctx context.Context, rows []ExperimentStats, allowEmpty bool) (uint64, error) {
	res, err := s.commitRound(ctx, rows, allowEmpty)
	return res.Version, err
}

// commitRound writes rows as the whole table in one version, conditional on the latest
// version it read. Each row is merged with the stored one (carryOver), so a refresh that
// landed after the round observed is never undone: its compaction counters survive.
// Stored rows of experiments missing from rows disappear. An empty round is refused
// unless allowEmpty: a scan whose every observation failed must not wipe the table.
func (s *StatsStore) commitRound(ctx context.Context, rows []ExperimentStats, allowEmpty bool) (CommitResult, error) {
	if len(rows) == 0 && !allowEmpty {
		return CommitResult{Version: s.Snapshot().Version}, nil
	}
	return s.commit(ctx, func(ctx context.Context, ds *lance.Dataset, cur *StatsSnapshot) (*lance.Dataset, []ExperimentStats, []ExperimentStats, error) {
		out := make([]ExperimentStats, len(rows))
		for i, r := range rows {
			if c, ok := cur.Lookup(r.Kind, r.Name); ok {
				r = carryOver(r, c)
			}
			out[i] = r
		}
		next, err := s.overwrite(ctx, ds, out)
		return next, slices.Clone(out), out, err
	})
}

// Upsert stores row (by kind and name) in one version, merged with the stored row (carryOver), and
// returns the version. The write is bounded by ctx.
func (s *StatsStore) Upsert(ctx context.Context, row ExperimentStats) (uint64, error) {
	res, err := s.update(ctx, row.Kind, row.Name, func(cur ExperimentStats, ok bool) ExperimentStats {
		if ok {
			return carryOver(row, cur)
		}
		return row
	})
	return res.Version, err
}

// update stores one row in one version, conditional on the latest version: build gets
// that version's row of (kind, name) (ok: there is one) and returns the row to store.
// After a lost race it is called again with the newer stored row, so what it derives
// from the stored row (a compaction count plus one) counts exactly once.
func (s *StatsStore) update(ctx context.Context, kind, name string, build func(cur ExperimentStats, ok bool) ExperimentStats) (CommitResult, error) {
	kind = kindOf(kind)
	return s.commit(ctx, func(ctx context.Context, ds *lance.Dataset, cur *StatsSnapshot) (*lance.Dataset, []ExperimentStats, []ExperimentStats, error) {
		c, ok := cur.Lookup(kind, name)
		row := build(c, ok)
		row.Kind, row.Name = kind, name
		rows := append(make([]ExperimentStats, 0, len(cur.Rows)+1), cur.Rows...)
		if i, ok := cur.byKey[rowKey{kind, name}]; ok {
			rows[i] = row
		} else {
			rows = append(rows, row)
		}
		if ds == nil || !hasStatsColumns(ds) || cur.nameShared(kind, name) {
			// No table yet, or one written before a column existed (a merge-insert
			// cannot add it: this is how a table without `kind` gains it), or a name
			// other kinds use too (the merge-insert keys on name alone, and would
			// replace their rows): write the whole table, still one version.
			next, err := s.overwrite(ctx, ds, rows)
			return next, rows, slices.Clone(rows), err
		}
		rdr, err := statsReader([]ExperimentStats{row})
		if err != nil {
			return nil, nil, nil, err
		}
		defer rdr.Release()
		next, _, err := ds.MergeInsert(ctx, "name", rdr, lance.WriteOptions{ExpectVersion: ds.Version()})
		if err != nil {
			return nil, nil, nil, fmt.Errorf("stats: upsert %s on version %d: %w", name, ds.Version(), err)
		}
		return next, rows, []ExperimentStats{row}, nil
	})
}

// overwrite writes rows as the whole table, conditionally on ds (nil: creates the table,
// failing with lance.ErrDatasetExists if another writer created it first).
func (s *StatsStore) overwrite(ctx context.Context, ds *lance.Dataset, rows []ExperimentStats) (*lance.Dataset, error) {
	rdr, err := statsReader(rows)
	if err != nil {
		return nil, err
	}
	defer rdr.Release()
	opts, on := lance.WriteOptions{Mode: lance.ModeCreate}, uint64(0)
	if ds != nil {
		on = ds.Version()
		opts = lance.WriteOptions{Mode: lance.ModeOverwrite, ExpectVersion: on}
	}
	next, err := lance.WriteStore(ctx, s.st, rdr, opts)
	if err != nil {
		return nil, fmt.Errorf("stats: write %d rows on version %d: %w", len(rows), on, err)
	}
	return next, nil
}

// carryOver returns the row to store for obs, an observation of an experiment whose
// latest stored row is cur: the newer observation of the two (by ScannedAt), with the
// compaction counters of whichever counted more compactions. A round that observed
// before a post-compaction refresh landed keeps the refresh's counters (and its newer
// observation); a refresh built on a round keeps the round's.
func carryOver(obs, cur ExperimentStats) ExperimentStats {
	out := obs
	if cur.ScannedAt > obs.ScannedAt {
		out = cur
	}
	from := obs
	if cur.TotalCompactions > obs.TotalCompactions {
		from = cur
	}
	out.LastCompaction, out.TotalCompactions = from.LastCompaction, from.TotalCompactions
	return out
}

// hasStatsColumns reports whether ds has every column of statsSchema.
func hasStatsColumns(ds *lance.Dataset) bool {
	for _, f := range statsSchema.Fields() {
		if ds.Schema().Field(f.Name) == nil {
			return false
		}
	}
	return true
}

// statsReader returns rows as a record reader of statsSchema.
func statsReader(rows []ExperimentStats) (array.RecordReader, error) {
	rec, err := statsBatch(rows)
	if err != nil {
		return nil, err
	}
	defer rec.Release()
	return array.NewRecordReader(statsSchema, []arrow.RecordBatch{rec})
}

func statsBatch(rows []ExperimentStats) (arrow.RecordBatch, error) {
	b := array.NewRecordBuilder(memory.DefaultAllocator, statsSchema)
	defer b.Release()
	b.Reserve(len(rows))
	kindCol := statsSchema.NumFields() - 1
	for _, r := range rows {
		b.Field(0).(*array.StringBuilder).Append(r.Name)
		b.Field(1).(*array.StringBuilder).Append(r.URI)
		for i, v := range []int64{r.RowCount, r.FragmentCount, r.LastUpdated, r.PendingWALGenerations,
			r.LastCompaction, r.TotalCompactions, r.ScannedAt, r.Version, r.OldestPendingWAL} {
			b.Field(2 + i).(*array.Int64Builder).Append(v)
		}
		b.Field(kindCol).(*array.StringBuilder).Append(kindOf(r.Kind))
	}
	return b.NewRecordBatch(), nil
}

// readStats reads every row of a stats version. Missing columns (older tables) read as
// nulls and become the sentinel values; a null or missing kind is a rollout store.
func readStats(ctx context.Context, ds *lance.Dataset) ([]ExperimentStats, error) {
	recs, err := ds.Collect(ctx, lance.ScanOptions{})
	if err != nil {
		return nil, fmt.Errorf("stats: read version %d: %w", ds.Version(), err)
	}
	var rows []ExperimentStats
	for _, rec := range recs {
		rows, _ = decodeStats(rec, rows, nil)
		rec.Release()
	}
	return rows, nil
}

// decodeStats appends the rows of rec to rows, and to addrs their row addresses when
// rec has the _rowaddr column.
func decodeStats(rec arrow.RecordBatch, rows []ExperimentStats, addrs []uint64) ([]ExperimentStats, []uint64) {
	col := func(name string) arrow.Array {
		if idx := rec.Schema().FieldIndices(name); len(idx) > 0 {
			return rec.Column(idx[0])
		}
		return nil
	}
	str := func(a arrow.Array, i int) string {
		if s, ok := a.(*array.String); ok && !s.IsNull(i) {
			return s.Value(i)
		}
		return ""
	}
	i64 := func(a arrow.Array, i int, def int64) int64 {
		if v, ok := a.(*array.Int64); ok && !v.IsNull(i) {
			return v.Value(i)
		}
		return def
	}
	name, uri, kind := col("name"), col("uri"), col("kind")
	rowCount, fragCount, lastUpdated, pending := col("row_count"), col("fragment_count"), col("last_updated"), col("pending_wal_generations")
	lastCompaction, totalCompactions, scannedAt, version := col("last_compaction"), col("total_compactions"), col("scanned_at"), col("version")
	oldestPending := col("oldest_pending_wal")
	addr, _ := col(lance.RowAddrColumn).(*array.Uint64)
	for i := 0; i < int(rec.NumRows()); i++ {
		rows = append(rows, ExperimentStats{
			Name: str(name, i), URI: str(uri, i), Kind: kindOf(str(kind, i)),
			RowCount: i64(rowCount, i, 0), FragmentCount: i64(fragCount, i, 0),
			LastUpdated: i64(lastUpdated, i, 0), PendingWALGenerations: i64(pending, i, 0),
			LastCompaction: i64(lastCompaction, i, NoCompaction), TotalCompactions: i64(totalCompactions, i, 0),
			ScannedAt: i64(scannedAt, i, 0), Version: i64(version, i, UnknownVersion),
			OldestPendingWAL: i64(oldestPending, i, 0),
		})
		if addr != nil {
			addrs = append(addrs, addr.Value(i))
		}
	}
	return rows, addrs
}
