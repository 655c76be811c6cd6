package wal

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/errgroup"

	"github.com/lancectx/lancectx/internal/arrowrows"
	"github.com/lancectx/lancectx/internal/rowkey"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/lance/expr"
	"github.com/lancectx/lancectx/lance/file"
	"github.com/lancectx/lancectx/lance/schema"
	"github.com/lancectx/lancectx/objstore"
)

// ErrSnapshotChanged: the base table kept changing while a snapshot was taken (merges
// landing); the read may be retried.
var ErrSnapshotChanged = errors.New("wal: dataset changed during read; retry the request")

// ErrSnapshotStale: a generation file of the snapshot is gone (merged and deleted after
// the retire grace); take a new snapshot.
var ErrSnapshotStale = errors.New("wal: snapshot is stale; take a new one")

const (
	snapshotAttempts  = 3
	manifestReadLimit = 16
	scanBatchRows     = 8192
)

// ReadOptions tune ReadSnapshot.
type ReadOptions struct {
	// KeyColumn is the row identity; empty: the local shard's.
	KeyColumn string
	// KeyCache serves Get's lookups in the base table, under KeyCacheScope (a name
	// for the dataset, see lance.KeyCache); nil: the local shard's Options.KeyCache.
	// Without either Get scans the base's key column.
	KeyCache      *lance.KeyCache
	KeyCacheScope string
}

// Snapshot is a consistent view of a dataset: one base version, the generations of
// every shard that the base does not contain yet, and this worker's unsealed rows.
// Newest row per key wins: memtable over generations (newer sealed_at first) over the
// base. A Snapshot is immutable and safe for concurrent use.
type Snapshot struct {
	st        objstore.Store
	base      *lance.Dataset
	keyColumn string
	keyType   arrow.DataType
	keyOf     func(arrow.Array, int) string
	// gens in precedence order, oldest first.
	gens []pendingGen
	// mem: the local memtables, oldest first.
	mem       []memView
	memSchema *arrow.Schema
	cache     *genCache
	// gensScanned counts the generations scans read rows of (tests: Match skips).
	gensScanned atomic.Int64
	keyCache    *lance.KeyCache
	keyScope    string
	watermarks  map[string]uint64
}

type pendingGen struct {
	shard string
	Generation
}

func (g pendingGen) key() string { return shardDir(g.shard) + g.Path }

// Reader is what the reads of one dataset share from snapshot to snapshot: the newest
// base version seen (a new snapshot lists the versions but rereads the manifest only
// when it changed), the key indexes of generation files, and the key cache scope of the
// base table. It reads nothing by itself and claims nothing: a process that only reads
// a dataset costs no write and, between reads, no request. A Reader is bound to one
// incarnation of the dataset (its first base version's, see IncarnationKey): a
// snapshot finding another one fails with ErrIncarnation. Safe for concurrent use.
type Reader struct {
	st          objstore.Store
	keyColumn   string
	incarnation atomic.Pointer[string]
	base        atomic.Pointer[lance.Dataset]
	cache       *genCache
	manifests   *manifestCache
	keyCache    *lance.KeyCache
	keyScope    string
}

// ReaderOptions configure a Reader.
type ReaderOptions struct {
	// KeyColumn is the row identity (required).
	KeyColumn string
	// Base is a base version already read (optional); it binds the Reader to its
	// incarnation.
	Base *lance.Dataset
	// KeyCache, if set, indexes the base table's key column for Snapshot.Get, under
	// KeyCacheScope (default: a scope of this Reader's own, dropped by Close).
	KeyCache      *lance.KeyCache
	KeyCacheScope string
}

// NewReader returns the read state of the dataset at st.
func NewReader(st objstore.Store, opts ReaderOptions) *Reader {
	r := &Reader{st: st, keyColumn: opts.KeyColumn, cache: newGenCache(genCacheKeys), manifests: newManifestCache(), keyCache: opts.KeyCache,
		keyScope: opts.KeyCacheScope}
	if r.keyScope == "" {
		r.keyScope = fmt.Sprintf("reader %p", r)
	}
	if opts.Base != nil {
		r.noteBase(opts.Base)
	}
	return r
}

// Close drops the Reader's key indexes from the key cache.
func (r *Reader) Close() {
	if r.keyCache != nil {
		r.keyCache.DropScope(r.keyScope)
	}
}

// currentBase is the newest base version seen (nil before the first read).
func (r *Reader) currentBase() *lance.Dataset { return r.base.Load() }

// noteBase remembers a newer base version; the first one binds the incarnation.
func (r *Reader) noteBase(ds *lance.Dataset) {
	inc := Incarnation(ds)
	r.incarnation.CompareAndSwap(nil, &inc)
	for {
		cur := r.base.Load()
		if cur != nil && cur.Version() >= ds.Version() {
			return
		}
		if Incarnation(ds) != *r.incarnation.Load() {
			return // never cached: checkBase refuses it
		}
		if r.base.CompareAndSwap(cur, ds) {
			return
		}
	}
}

// checkBase fails with ErrIncarnation when ds is of another incarnation than r's.
func (r *Reader) checkBase(ds *lance.Dataset) error {
	inc := Incarnation(ds)
	r.incarnation.CompareAndSwap(nil, &inc)
	if want := *r.incarnation.Load(); inc != want {
		return fmt.Errorf("%w: the base table is now incarnation %q, this reader was opened for %q", ErrIncarnation, inc, want)
	}
	return nil
}

// latestBase lists the versions and returns the newest base (the manifest is read only
// when the version changed since the last read).
func (r *Reader) latestBase(ctx context.Context) (*lance.Dataset, error) {
	var ds *lance.Dataset
	var err error
	if cur := r.currentBase(); cur != nil {
		ds, err = cur.Latest(ctx)
	} else {
		ds, err = lance.OpenStore(ctx, r.st)
	}
	if errors.Is(err, lance.ErrDatasetReplaced) || errors.Is(err, lance.ErrDatasetNotFound) {
		return nil, fmt.Errorf("%w: %v", ErrIncarnation, err)
	}
	if err != nil {
		return nil, fmt.Errorf("wal: snapshot: open base: %w", err)
	}
	if err := r.checkBase(ds); err != nil {
		return nil, err
	}
	r.noteBase(ds)
	return ds, nil
}

// ReadSnapshot takes a consistent snapshot of the dataset at st (see Reader.Snapshot):
// through local's Reader when local is set, else through a Reader made for this read.
func ReadSnapshot(ctx context.Context, st objstore.Store, local *Shard, opts ReadOptions) (*Snapshot, error) {
	if local != nil {
		sn, err := local.reader.Snapshot(ctx, local)
		if err == nil && opts.KeyCache != nil {
			sn.keyCache, sn.keyScope = opts.KeyCache, opts.KeyCacheScope
		}
		return sn, err
	}
	if opts.KeyColumn == "" {
		return nil, errors.New("wal: ReadSnapshot needs a key column")
	}
	return NewReader(st, ReaderOptions{KeyColumn: opts.KeyColumn, KeyCache: opts.KeyCache, KeyCacheScope: opts.KeyCacheScope}).Snapshot(ctx, nil)
}

// Snapshot takes a consistent snapshot: the latest base version B, then every shard's
// latest manifest, then B again; a merge commits the base before it drops generations,
// so an unchanged B brackets a consistent view (retried up to 3 times, then
// ErrSnapshotChanged). local, if not nil, contributes its memtables; it must be the
// shard sharing this Reader.
func (r *Reader) Snapshot(ctx context.Context, local *Shard) (*Snapshot, error) {
	for attempt := 1; attempt <= snapshotAttempts; attempt++ {
		var views []memView
		var own *Manifest
		if local != nil {
			views, own = local.views()
		}
		b1, err := r.latestBase(ctx)
		if err != nil {
			return nil, err
		}
		skip := ""
		if own != nil {
			skip = local.id
		}
		manifests, read, err := readAllManifestsBut(ctx, r.st, r.manifests, skip)
		if err != nil {
			return nil, err
		}
		if own != nil {
			manifests[local.id] = own
		}
		// The bracket is needed only when a manifest was read after b1: the local
		// one was taken before b1, so whatever a merge dropped from it was committed
		// into a base no older than b1 (a merge commits the base first).
		if read > 0 {
			b2, err := b1.Latest(ctx)
			if err != nil {
				return nil, fmt.Errorf("wal: snapshot: open base: %w", err)
			}
			if b2.Version() != b1.Version() {
				continue
			}
		}
		snap, err := newSnapshot(r.st, b1, r.keyColumn, manifests, r.cache)
		if err != nil {
			return nil, err
		}
		snap.keyCache, snap.keyScope = r.keyCache, r.keyScope
		if local != nil {
			var sealed uint64
			if m := manifests[local.id]; m != nil {
				sealed = m.SealedThroughSeq
			}
			for _, v := range views {
				// A memtable sealed into a listed (or merged) generation is read from
				// there; generations never split a memtable.
				if v.firstSeq > sealed {
					snap.mem = append(snap.mem, v)
				}
			}
			snap.memSchema = local.arrow
			local.met.pendingSample.Observe(float64(len(snap.gens)))
		}
		return snap, nil
	}
	return nil, ErrSnapshotChanged
}

func newSnapshot(st objstore.Store, base *lance.Dataset, keyColumn string, manifests map[string]*Manifest, cache *genCache) (*Snapshot, error) {
	kf := base.Schema().Field(keyColumn)
	if kf == nil {
		return nil, fmt.Errorf("wal: key column %q is not in the table", keyColumn)
	}
	keyOf, err := keyFunc(kf.ArrowType())
	if err != nil {
		return nil, err
	}
	s := &Snapshot{st: st, base: base, keyColumn: keyColumn, keyType: kf.ArrowType(), keyOf: keyOf,
		cache: cache, watermarks: map[string]uint64{}}
	meta := base.TableMetadata()
	inc := Incarnation(base)
	for shard, m := range manifests {
		if m.Incarnation != inc {
			continue // a writer of a deleted incarnation left it: never read
		}
		w, err := watermark(meta, shard)
		if err != nil {
			return nil, err
		}
		s.watermarks[shard] = w
		for _, g := range m.Generations {
			if g.Gen > w {
				s.gens = append(s.gens, pendingGen{shard: shard, Generation: g})
			}
		}
	}
	sort.Slice(s.gens, func(i, j int) bool {
		a, b := s.gens[i], s.gens[j]
		if !a.SealedAt.Equal(b.SealedAt) {
			return a.SealedAt.Before(b.SealedAt)
		}
		if a.shard != b.shard {
			return a.shard < b.shard
		}
		return a.Gen < b.Gen
	})
	// A generation merged into the base is read from the base from now on: its key
	// index would only hold memory (up to the cache's bound, per shard) until the
	// cache next started afresh. An older snapshot still reading it rebuilds it.
	pending := make(map[string]bool, len(s.gens))
	for _, g := range s.gens {
		pending[g.key()] = true
	}
	cache.retain(pending)
	return s, nil
}

// readAllManifests reads the latest manifest of every shard of the dataset, through
// mc (nil: no cache).
func readAllManifests(ctx context.Context, st objstore.Store, mc *manifestCache) (map[string]*Manifest, error) {
	m, _, err := readAllManifestsBut(ctx, st, mc, "")
	return m, err
}

// readAllManifestsBut is readAllManifests leaving out the shard skip (the caller
// knows its manifest); read counts the shards whose manifest it looked up.
func readAllManifestsBut(ctx context.Context, st objstore.Store, mc *manifestCache, skip string) (map[string]*Manifest, int, error) {
	shards, err := listShards(ctx, st)
	if err != nil {
		return nil, 0, err
	}
	if skip != "" {
		shards = slices.DeleteFunc(shards, func(id string) bool { return id == skip })
	}
	out := make([]*Manifest, len(shards))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(manifestReadLimit)
	for i, id := range shards {
		g.Go(func() error {
			m, err := readLatestManifestVia(gctx, st, id, mc)
			out[i] = m
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, 0, err
	}
	res := map[string]*Manifest{}
	for i, id := range shards {
		if out[i] != nil {
			res[id] = out[i]
		}
	}
	mc.retain(res)
	return res, len(shards), nil
}

// views returns views of the shard's memtables (frozen ones first), empty ones left
// out, and the shard's manifest as this process last wrote or read it. Both are taken
// under one lock: a seal replaces the memtable it sealed by the manifest listing its
// generation in one step, so every acked row is in exactly one of them. The manifest
// is nil when the shard cannot vouch for it (fenced or stale: another writer may have
// changed it); the caller then reads it from storage. It is shared: never modify it.
func (s *Shard) views() ([]memView, *Manifest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []memView
	for _, m := range append(append([]*memtable(nil), s.frozen...), s.active) {
		if v := m.view(); len(v.batches) > 0 {
			out = append(out, v)
		}
	}
	m := s.manifest
	if s.fenced.Load() || s.stale.Load() {
		m = nil
	}
	return out, m
}

// Base is the snapshot's base version.
func (sn *Snapshot) Base() *lance.Dataset { return sn.base }

// PendingGenerations is the number of generations the snapshot reads besides the base.
func (sn *Snapshot) PendingGenerations() int { return len(sn.gens) }

// PendingRows counts the rows of the pending generations and the memtable (an upper
// bound of what they add to the base: a key may be in several).
func (sn *Snapshot) PendingRows() int64 {
	n := sn.MemtableRows()
	for _, g := range sn.gens {
		n += int64(g.Rows)
	}
	return n
}

// MemtableRows is the number of unsealed local rows in the snapshot (shadowed ones
// included).
func (sn *Snapshot) MemtableRows() int64 {
	var n int64
	for _, v := range sn.mem {
		n += v.rows()
	}
	return n
}

// genIndex is the key column of one generation file.
type genIndex struct {
	keys []string
	pos  map[string]int32
}

// genCache keeps, per generation file (an immutable object), its key index, the
// distinct values of the columns scans matched on (ScanOptions.Match) and the opened
// file itself, so that a snapshot reads a generation's metadata and key column once,
// not once per read. Keys and values are bounded by a total count, the opened files by
// their number; over either bound it starts afresh.
type genCache struct {
	mu    sync.Mutex
	max   int
	n     int
	items map[string]*genIndex
	// values holds the distinct values of a column, by generation key and column.
	values map[string]map[string]map[string]struct{}
	files  map[string]*file.Reader
}

// genCacheFiles bounds the generation files a Reader keeps open (their parsed
// metadata and a small page cache each; no file handle is held).
const genCacheFiles = 256

// genFilePageCache bounds the page data each cached generation file keeps.
const genFilePageCache = 256 << 10

func newGenCache(maxKeys int) *genCache {
	return &genCache{max: maxKeys, items: map[string]*genIndex{}, values: map[string]map[string]map[string]struct{}{},
		files: map[string]*file.Reader{}}
}

// retain drops what is cached of the generations not in keep.
func (c *genCache) retain(keep map[string]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, gi := range c.items {
		if !keep[k] {
			delete(c.items, k)
			c.n -= len(gi.keys)
		}
	}
	for k, cols := range c.values {
		if !keep[k] {
			for _, vs := range cols {
				c.n -= len(vs)
			}
			delete(c.values, k)
		}
	}
	for k := range c.files {
		if !keep[k] {
			delete(c.files, k)
		}
	}
}

func (c *genCache) get(key string) *genIndex {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.items[key]
}

// reserveLocked makes room for n more keys or values, starting afresh when over the
// bound; false when caching is off.
func (c *genCache) reserveLocked(n int) bool {
	if c.max <= 0 {
		return false
	}
	if c.n+n > c.max {
		c.items, c.values, c.n = map[string]*genIndex{}, map[string]map[string]map[string]struct{}{}, 0
	}
	c.n += n
	return true
}

func (c *genCache) put(key string, gi *genIndex) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old := c.items[key]; old != nil {
		c.n -= len(old.keys)
	}
	if c.reserveLocked(len(gi.keys)) {
		c.items[key] = gi
	}
}

func (c *genCache) getValues(key, column string) (map[string]struct{}, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	vs, ok := c.values[key][column]
	return vs, ok
}

func (c *genCache) putValues(key, column string, vs map[string]struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.values[key][column]; ok {
		c.n -= len(old)
	}
	if !c.reserveLocked(len(vs)) {
		return
	}
	if c.values[key] == nil {
		c.values[key] = map[string]map[string]struct{}{}
	}
	c.values[key][column] = vs
}

func (c *genCache) getFile(key string) *file.Reader {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.files[key]
}

func (c *genCache) putFile(key string, r *file.Reader) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.max <= 0 {
		return
	}
	if len(c.files) >= genCacheFiles {
		c.files = map[string]*file.Reader{}
	}
	c.files[key] = r
}

// genCacheKeys bounds the key indexes a Reader keeps for reads.
const genCacheKeys = 1 << 20

// openGen opens a generation file of the snapshot (once per Reader while it is
// pending: the file is immutable, so its parsed metadata is kept).
func (sn *Snapshot) openGen(ctx context.Context, g pendingGen) (*file.Reader, error) {
	if r := sn.cache.getFile(g.key()); r != nil {
		return r, nil
	}
	r, err := file.OpenWith(ctx, lance.StoreSource(sn.st, g.key()), int64(g.Bytes), file.ReaderOptions{PageCacheBytes: genFilePageCache})
	if errors.Is(err, objstore.ErrNotFound) {
		return nil, fmt.Errorf("%w: generation %d of shard %s: %v", ErrSnapshotStale, g.Gen, g.shard, err)
	}
	if err != nil {
		return nil, fmt.Errorf("wal: open generation %d of shard %s: %w", g.Gen, g.shard, err)
	}
	sn.cache.putFile(g.key(), r)
	return r, nil
}

// genHasValue tells whether generation g holds a row whose string column is value,
// from the generation's distinct values of column (read once, then cached).
func (sn *Snapshot) genHasValue(ctx context.Context, g pendingGen, column, value string) (bool, error) {
	if vs, ok := sn.cache.getValues(g.key(), column); ok {
		_, has := vs[value]
		return has, nil
	}
	f := sn.base.Schema().Field(column)
	if f == nil {
		return false, fmt.Errorf("wal: no column %q in the table", column)
	}
	valueOf, err := keyFunc(f.ArrowType())
	if err != nil {
		return false, fmt.Errorf("wal: match on column %q: %w", column, err)
	}
	r, err := sn.openGen(ctx, g)
	if err != nil {
		return false, err
	}
	vs := map[string]struct{}{}
	if r.Schema().FieldByID(f.ID) != nil && r.NumRows() > 0 {
		rec, err := r.Read(ctx, []int32{f.ID}, 0, r.NumRows())
		if errors.Is(err, objstore.ErrNotFound) {
			return false, fmt.Errorf("%w: generation %d of shard %s: %v", ErrSnapshotStale, g.Gen, g.shard, err)
		}
		if err != nil {
			return false, fmt.Errorf("wal: read column %s of generation %d of shard %s: %w", column, g.Gen, g.shard, err)
		}
		col := rec.Column(0)
		for i := range col.Len() {
			if col.IsValid(i) {
				vs[strings.Clone(valueOf(col, i))] = struct{}{}
			}
		}
		rec.Release()
	}
	sn.cache.putValues(g.key(), column, vs)
	_, has := vs[value]
	return has, nil
}

// genKeys returns the key index of a generation.
func (sn *Snapshot) genKeys(ctx context.Context, g pendingGen) (*genIndex, error) {
	if gi := sn.cache.get(g.key()); gi != nil {
		return gi, nil
	}
	kf := sn.base.Schema().Field(sn.keyColumn)
	r, err := sn.openGen(ctx, g)
	if err != nil {
		return nil, err
	}
	gi := &genIndex{pos: make(map[string]int32, g.Rows)}
	if r.NumRows() > 0 {
		rec, err := r.Read(ctx, []int32{kf.ID}, 0, r.NumRows())
		if err != nil {
			return nil, fmt.Errorf("wal: read keys of generation %d of shard %s: %w", g.Gen, g.shard, err)
		}
		gi.keys = cloneKeys(rec.Column(0), sn.keyOf)
		rec.Release()
	}
	for i, k := range gi.keys {
		gi.pos[k] = int32(i)
	}
	sn.cache.put(g.key(), gi)
	return gi, nil
}

// readGenRows reads rows [start,end) of a generation laid out as out (columns missing
// from the file, added to the table after it was written, read as null).
func (sn *Snapshot) readGenRows(ctx context.Context, r *file.Reader, out *arrow.Schema, start, end uint64) (arrow.RecordBatch, error) {
	n := int(end - start)
	cols := make([]arrow.Array, out.NumFields())
	var ids []int32
	var pos []int
	for i, f := range out.Fields() {
		bf := sn.base.Schema().Field(f.Name)
		if bf != nil && r.Schema().FieldByID(bf.ID) != nil {
			ids = append(ids, bf.ID)
			pos = append(pos, i)
		} else {
			cols[i] = array.MakeArrayOfNull(memory.DefaultAllocator, f.Type, n)
		}
	}
	if len(ids) > 0 {
		rec, err := r.Read(ctx, ids, start, end)
		if errors.Is(err, objstore.ErrNotFound) {
			err = fmt.Errorf("%w: %v", ErrSnapshotStale, err)
		}
		if err != nil {
			for _, c := range cols {
				if c != nil {
					c.Release()
				}
			}
			return nil, err
		}
		for j, i := range pos {
			c := rec.Column(j)
			c.Retain()
			cols[i] = c
		}
		rec.Release()
	}
	rec := array.NewRecordBatch(out, cols, int64(n))
	for _, c := range cols {
		c.Release()
	}
	return rec, nil
}

// memRecord lays a memtable batch out as out (by column name; missing columns null).
func memRecord(rec arrow.RecordBatch, out *arrow.Schema) arrow.RecordBatch {
	cols := make([]arrow.Array, out.NumFields())
	n := int(rec.NumRows())
	for i, f := range out.Fields() {
		if idx := rec.Schema().FieldIndices(f.Name); len(idx) == 1 {
			cols[i] = rec.Column(idx[0])
			cols[i].Retain()
		} else {
			cols[i] = array.MakeArrayOfNull(memory.DefaultAllocator, f.Type, n)
		}
	}
	res := array.NewRecordBatch(out, cols, int64(n))
	for _, c := range cols {
		c.Release()
	}
	return res
}

// outputSchema resolves the requested columns (nil: every column) against the base.
func (sn *Snapshot) outputSchema(columns []string) (*arrow.Schema, error) {
	sch := sn.base.Schema()
	if columns == nil {
		return sch.Arrow(), nil
	}
	if len(columns) == 0 {
		return nil, errors.New("wal: no columns requested")
	}
	fields := make([]arrow.Field, 0, len(columns))
	seen := map[string]bool{}
	for _, c := range columns {
		f := sch.Field(c)
		if f == nil {
			return nil, fmt.Errorf("wal: no column %q in the table", c)
		}
		if seen[c] {
			return nil, fmt.Errorf("wal: column %q requested twice", c)
		}
		seen[c] = true
		fields = append(fields, f.Arrow())
	}
	return arrow.NewSchema(fields, nil), nil
}

// GetMany is Get for many keys: recs[i] is the newest row of keys[i], nil when no
// source has it. The base table is searched for all the keys the write-ahead log
// lacks at once (lance.Dataset.LookupKeys), which is what makes checking a batch
// cheap on a base of many fragments. The caller releases the records.
func (sn *Snapshot) GetMany(ctx context.Context, keys []string, columns []string) ([]arrow.RecordBatch, error) {
	if sn.keyCache == nil {
		recs := make([]arrow.RecordBatch, len(keys))
		for i, k := range keys {
			rec, ok, err := sn.Get(ctx, k, columns)
			if err != nil {
				releaseAll(recs)
				return nil, err
			}
			if ok {
				recs[i] = rec
			}
		}
		return recs, nil
	}
	out, err := sn.outputSchema(columns)
	if err != nil {
		return nil, err
	}
	recs := make([]arrow.RecordBatch, len(keys))
	var baseKeys []string
	var baseAt []int
	for i, k := range keys {
		rec, ok, err := sn.getPending(ctx, rowkey.Canonical(sn.keyType, k), out)
		if err != nil {
			releaseAll(recs)
			return nil, err
		}
		if ok {
			recs[i] = rec
			continue
		}
		baseKeys = append(baseKeys, rowkey.Canonical(sn.keyType, k))
		baseAt = append(baseAt, i)
	}
	if len(baseKeys) == 0 {
		return recs, nil
	}
	names := make([]string, out.NumFields())
	for i, f := range out.Fields() {
		names[i] = f.Name
	}
	found, err := sn.base.LookupKeys(ctx, sn.keyCache, sn.keyScope, sn.keyColumn, baseKeys, names)
	if err != nil {
		releaseAll(recs)
		return nil, fmt.Errorf("wal: read base: %w", err)
	}
	for j, r := range found {
		if r != nil {
			recs[baseAt[j]] = array.NewRecordBatch(out, r.Columns(), 1)
			r.Release()
		}
	}
	return recs, nil
}

func releaseAll(recs []arrow.RecordBatch) {
	for _, r := range recs {
		if r != nil {
			r.Release()
		}
	}
}

// getPending looks key (in key form) up in the memtables and pending generations,
// newest first.
func (sn *Snapshot) getPending(ctx context.Context, key string, out *arrow.Schema) (arrow.RecordBatch, bool, error) {
	for j := len(sn.mem) - 1; j >= 0; j-- {
		v := sn.mem[j]
		if loc, found := v.lookup(key); found {
			row := v.batches[loc.b].rec.NewSlice(int64(loc.r), int64(loc.r)+1)
			defer row.Release()
			return memRecord(row, out), true, nil
		}
	}
	for i := len(sn.gens) - 1; i >= 0; i-- {
		g := sn.gens[i]
		gi, err := sn.genKeys(ctx, g)
		if err != nil {
			return nil, false, err
		}
		r, found := gi.pos[key]
		if !found {
			continue
		}
		fr, err := sn.openGen(ctx, g)
		if err != nil {
			return nil, false, err
		}
		rec, err := sn.readGenRows(ctx, fr, out, uint64(r), uint64(r)+1)
		return rec, err == nil, err
	}
	return nil, false, nil
}

// Get returns the newest row with the given key (one row), or ok == false. An integer
// key may be written in any decimal form ("007" is 7).
func (sn *Snapshot) Get(ctx context.Context, key string, columns []string) (rec arrow.RecordBatch, ok bool, err error) {
	out, err := sn.outputSchema(columns)
	if err != nil {
		return nil, false, err
	}
	// The memtable, generation and base indexes all hold keys in the key form.
	key = rowkey.Canonical(sn.keyType, key)
	if rec, ok, err := sn.getPending(ctx, key, out); err != nil || ok {
		return rec, ok, err
	}
	filter, err := rowkey.Filter(sn.keyColumn, sn.keyType, key)
	if err != nil {
		return nil, false, fmt.Errorf("wal: %w", err)
	}
	names := make([]string, out.NumFields())
	for i, f := range out.Fields() {
		names[i] = f.Name
	}
	if sn.keyCache != nil {
		r, found, err := sn.base.LookupKey(ctx, sn.keyCache, sn.keyScope, sn.keyColumn, key, names)
		if err != nil || !found {
			if err != nil {
				err = fmt.Errorf("wal: read base: %w", err)
			}
			return nil, false, err
		}
		defer r.Release()
		return array.NewRecordBatch(out, r.Columns(), 1), true, nil
	}
	recs, err := sn.base.Collect(ctx, lance.ScanOptions{Columns: names, Filter: filter, Limit: 1})
	if err != nil {
		return nil, false, fmt.Errorf("wal: read base: %w", err)
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	for _, r := range recs {
		if r.NumRows() > 0 {
			row := r.NewSlice(0, 1)
			defer row.Release()
			return array.NewRecordBatch(out, row.Columns(), 1), true, nil
		}
	}
	return nil, false, nil
}

// ScanOptions select what a snapshot scan returns.
type ScanOptions struct {
	// Columns to return, in order; nil: every column of the table.
	Columns []string
	// Filter is a SQL predicate (package lance/expr); empty keeps every row.
	Filter string
	// Offset skips this many result rows; Limit stops after this many (0: no limit).
	Offset int64
	Limit  int64
	// SkipBase leaves the base table out: only the pending generations and the
	// memtable are read (a caller that knows the base has no matching row, from a
	// key lookup, saves the base scan).
	SkipBase bool
	// BaseOnly reads the base table alone, as it is: the pending generations and the
	// memtable are neither read nor shadow its rows (a view of what merges have
	// committed, e.g. the master's records route with source=fragments).
	BaseOnly bool
	// SkipFragments leaves these fragments of the base table out (their rows are
	// neither returned nor read); their keys still lose to newer pending rows as usual.
	// A context store's search gives the fragments its vector index covers, which it
	// ranks through the index.
	SkipFragments []uint64
	// Match keeps only the rows whose string column Match.Column equals Match.Value
	// (in addition to Filter), and lets the scan skip, unread, the pending generations
	// that hold no such row: the distinct values of the column are read once per
	// generation and kept. Reads of one item of a large write-ahead log use it.
	Match *Match
}

// Match is an equality on a string column (ScanOptions.Match).
type Match struct {
	Column, Value string
}

// Scan streams the snapshot's rows, newest row per key, in a defined order: the base
// table (table order, rows shadowed by a newer source left out), then the pending
// generations (oldest first), then the local memtable. Offset and Limit page over that
// order, so pages of one snapshot never overlap or miss a row. The filter is pushed
// into every source. Memory holds the keys of the pending generations and memtable
// (bounded by the pending-generation cap) plus one batch.
func (sn *Snapshot) Scan(ctx context.Context, opts ScanOptions) (array.RecordReader, error) {
	if opts.Offset < 0 || opts.Limit < 0 {
		return nil, errors.New("wal: negative offset or limit")
	}
	out, err := sn.outputSchema(opts.Columns)
	if err != nil {
		return nil, err
	}
	// read = output columns + key + filter columns, the layout every source is read in.
	sch := sn.base.Schema()
	readNames := []string{}
	seen := map[string]bool{}
	addCol := func(name string) error {
		if seen[name] {
			return nil
		}
		if sch.Field(name) == nil {
			return fmt.Errorf("wal: no column %q in the table", name)
		}
		seen[name] = true
		readNames = append(readNames, name)
		return nil
	}
	for _, f := range out.Fields() {
		_ = addCol(f.Name)
	}
	if err := addCol(sn.keyColumn); err != nil {
		return nil, err
	}
	var filter *expr.Bound
	filterSQL := opts.Filter
	if m := opts.Match; m != nil {
		if f := sch.Field(m.Column); f == nil {
			return nil, fmt.Errorf("wal: no column %q in the table", m.Column)
		} else if _, err := keyFunc(f.ArrowType()); err != nil {
			return nil, fmt.Errorf("wal: match on column %q: %w", m.Column, err)
		}
		eq := expr.QuoteIdent(m.Column) + " = '" + strings.ReplaceAll(m.Value, "'", "''") + "'"
		if filterSQL == "" {
			filterSQL = eq
		} else {
			filterSQL = "(" + filterSQL + ") AND " + eq
		}
	}
	if filterSQL != "" {
		e, err := expr.Parse(filterSQL)
		if err != nil {
			return nil, err
		}
		for _, c := range e.Columns() {
			if err := addCol(c); err != nil {
				return nil, err
			}
		}
		rs, err := namesSchema(sch, readNames)
		if err != nil {
			return nil, err
		}
		if filter, err = expr.Bind(e, rs); err != nil {
			return nil, err
		}
	}
	readSchema, err := namesSchema(sch, readNames)
	if err != nil {
		return nil, err
	}
	if opts.BaseOnly && opts.SkipBase {
		return nil, errors.New("wal: BaseOnly and SkipBase exclude each other")
	}
	newest := func(string) (int32, bool) { return 0, false }
	if !opts.BaseOnly {
		if newest, err = sn.newestSource(ctx, opts.Match != nil); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	sc := &scanReader{sn: sn, ctx: ctx, cancel: cancel, opts: opts, out: out, read: readSchema, filter: filter,
		newest: newest, filterSQL: filterSQL, skip: opts.Offset, remaining: opts.Limit, refs: 1,
		keyIdx: readSchema.FieldIndices(sn.keyColumn)[0]}
	return sc, nil
}

func namesSchema(sch *schema.Schema, names []string) (*arrow.Schema, error) {
	fields := make([]arrow.Field, len(names))
	for i, n := range names {
		f := sch.Field(n)
		if f == nil {
			return nil, fmt.Errorf("wal: no column %q in the table", n)
		}
		fields[i] = f.Arrow()
	}
	return arrow.NewSchema(fields, nil), nil
}

// shadowMap maps every key of the pending generations and the memtable to the newest
// source holding it (generation i, or len(gens)+j for memtable view j).
func (sn *Snapshot) shadowMap(ctx context.Context) (map[string]int32, error) {
	idx, err := sn.genIndexes(ctx)
	if err != nil {
		return nil, err
	}
	newest := map[string]int32{}
	for i, gi := range idx {
		for _, k := range gi.keys {
			newest[k] = int32(i)
		}
	}
	for j, v := range sn.mem {
		src := int32(len(sn.gens) + j)
		for b, mb := range v.batches {
			for r, k := range mb.keys {
				if v.live(b, r) {
					newest[k] = src
				}
			}
		}
	}
	return newest, nil
}

// genIndexes returns the key index of every pending generation (cached per Reader).
func (sn *Snapshot) genIndexes(ctx context.Context) ([]*genIndex, error) {
	idx := make([]*genIndex, len(sn.gens))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i, gen := range sn.gens {
		g.Go(func() error {
			gi, err := sn.genKeys(gctx, gen)
			idx[i] = gi
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return idx, nil
}

// newestSource returns how a scan finds the newest pending source of a key: the
// source index (a generation's position, or len(gens)+j for memtable view j), and
// false when no pending source has the key. A scan that emits few rows (a Match
// scan) asks per key, through the sources' own indexes, newest first; a scan of
// everything builds one map of all pending keys up front (shadowMap).
func (sn *Snapshot) newestSource(ctx context.Context, perKey bool) (func(string) (int32, bool), error) {
	if !perKey {
		m, err := sn.shadowMap(ctx)
		if err != nil {
			return nil, err
		}
		return func(k string) (int32, bool) { s, ok := m[k]; return s, ok }, nil
	}
	idx, err := sn.genIndexes(ctx)
	if err != nil {
		return nil, err
	}
	return func(k string) (int32, bool) {
		for j := len(sn.mem) - 1; j >= 0; j-- {
			if _, ok := sn.mem[j].lookup(k); ok {
				return int32(len(sn.gens) + j), true
			}
		}
		for i := len(idx) - 1; i >= 0; i-- {
			if _, ok := idx[i].pos[k]; ok {
				return int32(i), true
			}
		}
		return 0, false
	}, nil
}

// scanReader is the array.RecordReader of a snapshot scan. It walks the stages (base,
// generations, memtable) lazily, one batch at a time.
type scanReader struct {
	sn     *Snapshot
	ctx    context.Context
	cancel context.CancelFunc
	opts   ScanOptions
	out    *arrow.Schema
	read   *arrow.Schema
	keyIdx int
	filter *expr.Bound
	newest func(string) (int32, bool)
	// filterSQL is the filter every source applies: ScanOptions.Filter and Match.
	filterSQL string
	skip      int64
	remaining int64
	done      bool
	refs      int64

	stage int // 0 base, 1 generations, 2 memtable, 3 end
	// base stage
	base    *lance.Scanner
	baseIDs []uint64 // two-phase (offset) mode: row ids of the page being gathered
	// generation stage
	gen    int
	genR   *file.Reader
	genPos uint64
	// memtable stage
	memV, memB int

	cur arrow.RecordBatch
	err error
}

func (r *scanReader) Schema() *arrow.Schema { return r.out }

func (r *scanReader) RecordBatch() arrow.RecordBatch { return r.cur }

// Record is RecordBatch, for array.RecordReader.
//
// Deprecated: use RecordBatch.
func (r *scanReader) Record() arrow.RecordBatch { return r.cur }

func (r *scanReader) Err() error { return r.err }

func (r *scanReader) Retain() { r.refs++ }

func (r *scanReader) Release() {
	if r.refs--; r.refs > 0 {
		return
	}
	r.close()
}

func (r *scanReader) close() {
	r.cancel()
	if r.base != nil {
		r.base.Release()
		r.base = nil
	}
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
}

// Next advances to the next non-empty batch.
func (r *scanReader) Next() bool {
	if r.cur != nil {
		r.cur.Release()
		r.cur = nil
	}
	for !r.done && r.err == nil {
		rec, err := r.step()
		if err != nil {
			r.err = err
			break
		}
		if rec == nil {
			continue
		}
		if rec = r.page(rec); rec != nil {
			r.cur = rec
			return true
		}
	}
	r.close()
	return false
}

// page applies offset and limit to a batch of result rows (nil: nothing to emit).
func (r *scanReader) page(rec arrow.RecordBatch) arrow.RecordBatch {
	n := rec.NumRows()
	if r.skip > 0 {
		if n <= r.skip {
			r.skip -= n
			rec.Release()
			return nil
		}
		s := rec.NewSlice(r.skip, n)
		rec.Release()
		rec, n, r.skip = s, n-r.skip, 0
	}
	if r.opts.Limit > 0 {
		if n >= r.remaining {
			if n > r.remaining {
				s := rec.NewSlice(0, r.remaining)
				rec.Release()
				rec = s
			}
			r.remaining = 0
			r.done = true
			return rec
		}
		r.remaining -= n
	}
	return rec
}

// step produces the next batch of result rows of the current stage (nil when the stage
// had nothing this time), moving to the next stage at the end of one.
func (r *scanReader) step() (arrow.RecordBatch, error) {
	switch r.stage {
	case 0:
		if r.opts.SkipBase {
			r.stage = 1
			return nil, nil
		}
		return r.stepBase()
	case 1:
		if r.opts.BaseOnly {
			r.stage = 3
			return nil, nil
		}
		return r.stepGen()
	case 2:
		return r.stepMem()
	}
	r.done = true
	return nil, nil
}

func (r *scanReader) outNames() []string {
	names := make([]string, r.out.NumFields())
	for i, f := range r.out.Fields() {
		names[i] = f.Name
	}
	return names
}

// stepBase streams the base table. Without an offset it reads the output columns
// directly; with one, it first pages over the key column alone (cheap to skip) and
// takes the wanted rows by row address, so a deep page does not read the skipped rows'
// payloads.
func (r *scanReader) stepBase() (arrow.RecordBatch, error) {
	twoPhase := r.opts.Offset > 0
	if r.base == nil {
		cols := r.outNames()
		if twoPhase {
			cols = []string{r.sn.keyColumn}
		} else if len(r.out.FieldIndices(r.sn.keyColumn)) == 0 {
			cols = append(cols, r.sn.keyColumn)
		}
		sc, err := r.sn.base.Scan(r.ctx, lance.ScanOptions{Columns: cols, Filter: r.filterSQL, WithRowAddr: twoPhase, BatchSize: scanBatchRows,
			Fragments: fragmentsBut(r.sn.base, r.opts.SkipFragments)})
		if err != nil {
			return nil, err
		}
		r.base = sc
	}
	if !r.base.Next() {
		if err := r.base.Err(); err != nil {
			return nil, fmt.Errorf("wal: scan base: %w", err)
		}
		r.base.Release()
		r.base = nil
		r.stage = 1
		return nil, nil
	}
	rec := r.base.RecordBatch()
	key := rec.Column(rec.Schema().FieldIndices(r.sn.keyColumn)[0])
	keep := make([]bool, rec.NumRows())
	any := false
	for i := range keep {
		if key.IsNull(i) {
			keep[i] = true
		} else {
			_, shadowed := r.newest(r.sn.keyOf(key, i))
			keep[i] = !shadowed
		}
		any = any || keep[i]
	}
	if !any {
		return nil, nil
	}
	if !twoPhase {
		sel, err := arrowrows.Select(rec, keep)
		if err != nil || sel == nil {
			return nil, err
		}
		defer sel.Release()
		return arrowrows.Project(sel, r.out), nil
	}
	// Two-phase: skip by counting keys only; take the rest by row address.
	ids := rec.Column(rec.Schema().FieldIndices(lance.RowAddrColumn)[0]).(*array.Uint64)
	var want []uint64
	for i, k := range keep {
		if !k {
			continue
		}
		if r.skip > 0 {
			r.skip--
			continue
		}
		want = append(want, ids.Value(i))
		if r.opts.Limit > 0 && int64(len(want)) >= r.remaining {
			break
		}
	}
	if len(want) == 0 {
		return nil, nil
	}
	got, err := r.sn.base.TakeRowAddrs(r.ctx, want, r.outNames())
	if err != nil {
		return nil, fmt.Errorf("wal: read base rows: %w", err)
	}
	defer got.Release()
	return array.NewRecordBatch(r.out, got.Columns(), got.NumRows()), nil
}

// keepRows computes the rows of a source batch (laid out as r.read) that are the newest
// of their key (src is the source index) and pass the filter.
func (r *scanReader) keepRows(rec arrow.RecordBatch, src int32, live func(int) bool) ([]bool, bool, error) {
	key := rec.Column(r.keyIdx)
	keep := make([]bool, rec.NumRows())
	var sel expr.Selection
	if r.filter != nil {
		var err error
		if sel, err = expr.Select(r.ctx, r.filter, rec); err != nil {
			return nil, false, err
		}
	}
	any := false
	for i := range keep {
		if live != nil && !live(i) {
			continue
		}
		if s, ok := r.newest(r.sn.keyOf(key, i)); ok && s != src {
			continue
		}
		if r.filter != nil && !sel.Get(i) {
			continue
		}
		keep[i] = true
		any = true
	}
	return keep, any, nil
}

func (r *scanReader) emit(rec arrow.RecordBatch, keep []bool) (arrow.RecordBatch, error) {
	sel, err := arrowrows.Select(rec, keep)
	if err != nil || sel == nil {
		return nil, err
	}
	defer sel.Release()
	return arrowrows.Project(sel, r.out), nil
}

func (r *scanReader) stepGen() (arrow.RecordBatch, error) {
	if r.gen >= len(r.sn.gens) {
		r.stage = 2
		return nil, nil
	}
	g := r.sn.gens[r.gen]
	if r.genR == nil {
		if m := r.opts.Match; m != nil {
			has, err := r.sn.genHasValue(r.ctx, g, m.Column, m.Value)
			if err != nil {
				return nil, err
			}
			if !has {
				r.gen++
				return nil, nil
			}
		}
		fr, err := r.sn.openGen(r.ctx, g)
		if err != nil {
			return nil, err
		}
		r.sn.gensScanned.Add(1)
		r.genR, r.genPos = fr, 0
	}
	if r.genPos >= r.genR.NumRows() {
		r.genR = nil
		r.gen++
		return nil, nil
	}
	end := min(r.genPos+scanBatchRows, r.genR.NumRows())
	rec, err := r.sn.readGenRows(r.ctx, r.genR, r.read, r.genPos, end)
	if err != nil {
		return nil, err
	}
	defer rec.Release()
	r.genPos = end
	keep, any, err := r.keepRows(rec, int32(r.gen), nil)
	if err != nil || !any {
		return nil, err
	}
	return r.emit(rec, keep)
}

func (r *scanReader) stepMem() (arrow.RecordBatch, error) {
	if r.memV >= len(r.sn.mem) {
		r.stage = 3
		return nil, nil
	}
	v := r.sn.mem[r.memV]
	if r.memB >= len(v.batches) {
		r.memV++
		r.memB = 0
		return nil, nil
	}
	b := r.memB
	r.memB++
	rec := memRecord(v.batches[b].rec, r.read)
	defer rec.Release()
	keep, any, err := r.keepRows(rec, int32(len(r.sn.gens)+r.memV), func(i int) bool { return v.live(b, i) })
	if err != nil || !any {
		return nil, err
	}
	return r.emit(rec, keep)
}

// PendingStats summarises the unmerged generations of a dataset.
type PendingStats struct {
	// Generations pending across all shards, and their rows and bytes.
	Generations int    `json:"generations"`
	Rows        uint64 `json:"rows"`
	Bytes       uint64 `json:"bytes"`
	// Shards with a manifest.
	Shards int `json:"shards"`
	// PerShard pending generations.
	PerShard map[string]int `json:"per_shard"`
	// Oldest is when the oldest pending generation was sealed (zero: none pending): the
	// age trigger of merges reads it.
	Oldest time.Time `json:"oldest,omitzero"`
	// Base is the base version the watermarks were read from.
	Base *lance.Dataset `json:"-"`
}

// PendingGenerations counts the dataset's pending generations from the manifests only
// (no data file is read): one listing plus two requests per shard.
func PendingGenerations(ctx context.Context, st objstore.Store) (PendingStats, error) {
	base, err := lance.OpenStore(ctx, st)
	if err != nil {
		return PendingStats{}, fmt.Errorf("wal: open base: %w", err)
	}
	manifests, err := readAllManifests(ctx, st, nil)
	if err != nil {
		return PendingStats{}, err
	}
	ps := PendingStats{PerShard: map[string]int{}, Base: base}
	meta := base.TableMetadata()
	inc := Incarnation(base)
	for shard, m := range manifests {
		if m.Incarnation != inc {
			continue // a writer of a deleted incarnation left it
		}
		ps.Shards++
		w, err := watermark(meta, shard)
		if err != nil {
			return PendingStats{}, err
		}
		n := 0
		for _, g := range m.Generations {
			if g.Gen > w {
				n++
				ps.Rows += g.Rows
				ps.Bytes += g.Bytes
				if ps.Oldest.IsZero() || g.SealedAt.Before(ps.Oldest) {
					ps.Oldest = g.SealedAt
				}
			}
		}
		ps.PerShard[shard] = n
		ps.Generations += n
	}
	return ps, nil
}

// fragmentsBut is the fragment list of a base scan that leaves skip out: nil (every
// fragment) when skip is empty, else the other fragments (empty, not nil, when none
// is left).
func fragmentsBut(ds *lance.Dataset, skip []uint64) []uint64 {
	if len(skip) == 0 {
		return nil
	}
	gone := make(map[uint64]bool, len(skip))
	for _, id := range skip {
		gone[id] = true
	}
	out := []uint64{}
	for _, f := range ds.Fragments() {
		if !gone[f.GetId()] {
			out = append(out, f.GetId())
		}
	}
	return out
}
