package master

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
)

// StatsDataset is the stats table's directory under the data dir.
const StatsDataset = "_stats.rollout.lance"

// Sentinel values of the stats table, as in the reference system.
const (
	NoCompaction   int64 = -1
	UnknownVersion int64 = -1
)

// ExperimentStats is one row of the stats table: what the last scan observed about one
// experiment (a rollout store).
type ExperimentStats struct {
	Name                  string `json:"name"`
	URI                   string `json:"uri"`
	RowCount              int64  `json:"row_count"`
	FragmentCount         int64  `json:"fragment_count"`
	LastUpdated           int64  `json:"last_updated"` // ms, base manifest timestamp
	PendingWALGenerations int64  `json:"pending_wal_generations"`
	LastCompaction        int64  `json:"last_compaction"` // ms; NoCompaction if never
	TotalCompactions      int64  `json:"total_compactions"`
	ScannedAt             int64  `json:"scanned_at"` // ms
	Version               int64  `json:"version"`    // base version at the last full observation
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
}, nil)

// StatsSnapshot is an immutable view of the stats table at one version. Readers take it
// from StatsStore.Snapshot without waiting for anything.
type StatsSnapshot struct {
	// Version of the stats table the rows come from (0: the table does not exist yet).
	Version uint64
	// Rows sorted by name.
	Rows   []ExperimentStats
	byName map[string]int
	// LoadedAt is when this process published the snapshot.
	LoadedAt time.Time
	// NewestScan is the latest ScannedAt of any row (zero without rows): how old the
	// freshest observation is, whatever replica published the snapshot.
	NewestScan time.Time

	// enc holds each row's API JSON, encoded once per snapshot on first use, so a
	// listing page costs a copy of its rows' bytes rather than their encoding.
	encOnce sync.Once
	enc     [][]byte
}

// encoded returns the API JSON of row i (ExperimentSummary).
func (s *StatsSnapshot) encoded(i int) []byte {
	s.encOnce.Do(func() {
		s.enc = make([][]byte, len(s.Rows))
		for j, r := range s.Rows {
			b, err := json.Marshal(summaryOf(r))
			if err != nil { // cannot happen: plain strings and numbers
				b = []byte("null")
			}
			s.enc[j] = b
		}
	})
	return s.enc[i]
}

func newSnapshot(version uint64, rows []ExperimentStats) *StatsSnapshot {
	sort.Slice(rows, func(i, j int) bool { return rows[i].Name < rows[j].Name })
	s := &StatsSnapshot{Version: version, Rows: rows, byName: make(map[string]int, len(rows)), LoadedAt: time.Now()}
	var newest int64
	for i, r := range rows {
		s.byName[r.Name] = i
		newest = max(newest, r.ScannedAt)
	}
	if newest > 0 {
		s.NewestScan = time.UnixMilli(newest)
	}
	return s
}

// Get returns the row of one experiment.
func (s *StatsSnapshot) Get(name string) (ExperimentStats, bool) {
	i, ok := s.byName[name]
	if !ok {
		return ExperimentStats{}, false
	}
	return s.Rows[i], true
}

// StatsStore owns the stats table. Reads go to an in-memory snapshot (an atomic pointer),
// so no reader ever waits on a writer, a scan or maintenance. Writes are one Lance
// version each: a whole round is one Overwrite, whatever the number of experiments.
type StatsStore struct {
	st   objstore.Store // rooted at the stats dataset directory
	snap atomic.Pointer[StatsSnapshot]
	// writer admits one writer at a time in this process; waiting is bounded by the
	// caller's context (the post-compaction refresh uses a short deadline and skips).
	writer chan struct{}
	// synced is when the snapshot was last known to match storage (unix nanos; 0: never,
	// e.g. the first load has not succeeded yet).
	synced atomic.Int64
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
	s := &StatsStore{st: st, writer: make(chan struct{}, 1)}
	s.snap.Store(newSnapshot(0, nil))
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
	if ds.Version() <= s.Snapshot().Version {
		s.markSynced()
		return false, nil
	}
	rows, err := readStats(ctx, ds)
	if err != nil {
		return false, err
	}
	s.publish(newSnapshot(ds.Version(), rows))
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

func (s *StatsStore) acquire(ctx context.Context) error {
	select {
	case s.writer <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("stats: writer busy: %w", ctx.Err())
	}
}

func (s *StatsStore) release() { <-s.writer }

// WriteRound replaces the table with rows in one version. An empty round is refused
// unless allowEmpty: a scan whose every observation failed must not wipe the table.
func (s *StatsStore) WriteRound(ctx context.Context, rows []ExperimentStats, allowEmpty bool) (uint64, error) {
	if len(rows) == 0 && !allowEmpty {
		return s.Snapshot().Version, nil
	}
	if err := s.acquire(ctx); err != nil {
		return 0, err
	}
	defer s.release()
	rec, err := statsBatch(rows)
	if err != nil {
		return 0, err
	}
	rdr, err := array.NewRecordReader(statsSchema, []arrow.RecordBatch{rec})
	rec.Release()
	if err != nil {
		return 0, err
	}
	defer rdr.Release()
	ds, err := lance.WriteStore(ctx, s.st, rdr, lance.WriteOptions{Mode: lance.ModeOverwrite})
	if err != nil {
		return 0, fmt.Errorf("stats: write round: %w", err)
	}
	s.publish(newSnapshot(ds.Version(), append([]ExperimentStats(nil), rows...)))
	s.markSynced()
	return ds.Version(), nil
}

// Upsert replaces (or adds) one row in one version (a merge-insert by name). Callers
// bound the wait for the writer with ctx and skip on timeout: the next scan round
// refreshes the row anyway.
func (s *StatsStore) Upsert(ctx context.Context, row ExperimentStats) (uint64, error) {
	if err := s.acquire(ctx); err != nil {
		return 0, err
	}
	defer s.release()
	ds, err := lance.OpenStore(ctx, s.st)
	if errors.Is(err, lance.ErrDatasetNotFound) {
		// No scan round has written the table yet: this row starts it. A round that
		// wins the creation race makes this fail; the caller skips, the round has it.
		return s.create(ctx, row)
	}
	if err != nil {
		return 0, fmt.Errorf("stats: open: %w", err)
	}
	rec, err := statsBatch([]ExperimentStats{row})
	if err != nil {
		return 0, err
	}
	rdr, err := array.NewRecordReader(statsSchema, []arrow.RecordBatch{rec})
	rec.Release()
	if err != nil {
		return 0, err
	}
	defer rdr.Release()
	out, _, err := ds.MergeInsert(ctx, "name", rdr, lance.WriteOptions{})
	if err != nil {
		return 0, fmt.Errorf("stats: upsert %s: %w", row.Name, err)
	}
	// Publish from memory: the previous snapshot plus the row, at the new version.
	prev := s.Snapshot()
	rows := append([]ExperimentStats(nil), prev.Rows...)
	if i, ok := prev.byName[row.Name]; ok {
		rows[i] = row
	} else {
		rows = append(rows, row)
	}
	if prev.Version+1 == out.Version() {
		s.publish(newSnapshot(out.Version(), rows))
	} else if _, err := s.Reload(ctx); err != nil { // someone else wrote in between
		return out.Version(), err
	}
	return out.Version(), nil
}

// create writes the first version of the table with one row; the caller holds the writer.
func (s *StatsStore) create(ctx context.Context, row ExperimentStats) (uint64, error) {
	rec, err := statsBatch([]ExperimentStats{row})
	if err != nil {
		return 0, err
	}
	rdr, err := array.NewRecordReader(statsSchema, []arrow.RecordBatch{rec})
	rec.Release()
	if err != nil {
		return 0, err
	}
	defer rdr.Release()
	ds, err := lance.WriteStore(ctx, s.st, rdr, lance.WriteOptions{Mode: lance.ModeCreate})
	if err != nil {
		return 0, fmt.Errorf("stats: create with %s: %w", row.Name, err)
	}
	s.publish(newSnapshot(ds.Version(), []ExperimentStats{row}))
	return ds.Version(), nil
}

func statsBatch(rows []ExperimentStats) (arrow.RecordBatch, error) {
	b := array.NewRecordBuilder(memory.DefaultAllocator, statsSchema)
	defer b.Release()
	b.Reserve(len(rows))
	for _, r := range rows {
		b.Field(0).(*array.StringBuilder).Append(r.Name)
		b.Field(1).(*array.StringBuilder).Append(r.URI)
		for i, v := range []int64{r.RowCount, r.FragmentCount, r.LastUpdated, r.PendingWALGenerations,
			r.LastCompaction, r.TotalCompactions, r.ScannedAt, r.Version} {
			b.Field(2 + i).(*array.Int64Builder).Append(v)
		}
	}
	return b.NewRecordBatch(), nil
}

// readStats reads every row of a stats version. Missing columns (older tables) read as
// nulls and become the sentinel values.
func readStats(ctx context.Context, ds *lance.Dataset) ([]ExperimentStats, error) {
	recs, err := ds.Collect(ctx, lance.ScanOptions{})
	if err != nil {
		return nil, fmt.Errorf("stats: read version %d: %w", ds.Version(), err)
	}
	var rows []ExperimentStats
	for _, rec := range recs {
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
		name, uri := col("name"), col("uri")
		for i := 0; i < int(rec.NumRows()); i++ {
			rows = append(rows, ExperimentStats{
				Name: str(name, i), URI: str(uri, i),
				RowCount: i64(col("row_count"), i, 0), FragmentCount: i64(col("fragment_count"), i, 0),
				LastUpdated: i64(col("last_updated"), i, 0), PendingWALGenerations: i64(col("pending_wal_generations"), i, 0),
				LastCompaction: i64(col("last_compaction"), i, NoCompaction), TotalCompactions: i64(col("total_compactions"), i, 0),
				ScannedAt: i64(col("scanned_at"), i, 0), Version: i64(col("version"), i, UnknownVersion),
			})
		}
		rec.Release()
	}
	return rows, nil
}
