package lance

import (
	"cmp"
	"container/list"
	"context"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"
	"golang.org/x/sync/errgroup"

	"github.com/lancectx/lancectx/lance/format/tablepb"
	"github.com/lancectx/lancectx/lance/schema"
)

// KeyCache keeps hash indexes of a key column, one per data file, so that a point
// lookup by key (LookupKey) reads one row instead of the whole key column. Without it
// a lookup on a table of N rows decodes N keys: on a 1M-row rollout store that is
// ~20 MB of pages and tens of milliseconds of CPU per GET, growing with the table.
//
// Data files are immutable, so an index never goes stale; deletions are applied at
// lookup time from the fragment's deletion file. Indexes live in a scope, one per
// open dataset (a caller's name for it): a lookup on a newer version of the dataset
// drops the scope's indexes of data files that version no longer has (compaction
// rewrote them), and DropScope drops a closed dataset's. The cache is bounded in
// bytes (least recently used indexes go first) and safe for concurrent use; indexes
// are built outside its lock, once per data file however many lookups wait for one.
type KeyCache struct {
	maxBytes int64
	seed     maphash.Seed

	mu      sync.Mutex
	used    int64
	lru     *list.List               // of *keyCacheEntry, most recent first
	entries map[string]*list.Element // by cache key
	scopes  map[string]*keyScope

	hits, misses, evictions atomic.Int64
}

// NewKeyCache returns a cache that holds at most maxBytes of indexes (an index larger
// than that is built, used once and dropped).
func NewKeyCache(maxBytes int64) *KeyCache {
	return &KeyCache{maxBytes: maxBytes, seed: maphash.MakeSeed(), lru: list.New(),
		entries: map[string]*list.Element{}, scopes: map[string]*keyScope{}}
}

// keyScope is what the cache knows of one dataset: the newest version looked up and
// the cache keys of its indexes.
type keyScope struct {
	version uint64
	keys    map[string]struct{}
}

// DropScope drops every index of the scope (its dataset was closed).
func (c *KeyCache) DropScope(scope string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if sc := c.scopes[scope]; sc != nil {
		for k := range sc.keys {
			c.remove(k)
		}
		delete(c.scopes, scope)
	}
}

// prune drops the indexes of scope that version's data files do not include, once
// per newer version. live holds the cache keys of version's indexes.
func (c *KeyCache) prune(scope string, version uint64, live map[string]struct{}) {
	c.mu.Lock()
	defer c.mu.Unlock()
	sc := c.scopes[scope]
	if sc == nil {
		sc = &keyScope{keys: map[string]struct{}{}}
		c.scopes[scope] = sc
	}
	if version <= sc.version {
		return
	}
	sc.version = version
	for k := range sc.keys {
		if _, ok := live[k]; !ok {
			c.remove(k)
			delete(sc.keys, k)
		}
	}
}

// remove drops one entry (built or being built). c.mu held.
func (c *KeyCache) remove(key string) {
	el := c.entries[key]
	if el == nil {
		return
	}
	e := el.Value.(*keyCacheEntry)
	c.lru.Remove(el)
	delete(c.entries, key)
	select {
	case <-e.ready:
		if e.err == nil {
			c.used -= e.idx.bytes()
		}
	default: // the builder finds its entry gone and does not account it
	}
}

// KeyCacheStats is a point-in-time view of a KeyCache, for metrics.
type KeyCacheStats struct {
	Bytes, MaxBytes, Indexes int64
	// Hits and Misses count index lookups (a miss builds the index); Evictions counts
	// indexes dropped for the byte bound.
	Hits, Misses, Evictions int64
}

// Stats returns the cache's figures.
func (c *KeyCache) Stats() KeyCacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return KeyCacheStats{
		Bytes: c.used, MaxBytes: c.maxBytes, Indexes: int64(len(c.entries)),
		Hits: c.hits.Load(), Misses: c.misses.Load(), Evictions: c.evictions.Load(),
	}
}

type keyCacheEntry struct {
	key   string
	scope string
	ready chan struct{} // closed when idx or err is set
	idx   *keyIndex
	err   error
}

// keyIndex is the key column of one data file: the keys in physical row order, and
// their hashes sorted for lookup. Null keys are not indexed.
type keyIndex struct {
	blob   []byte   // the keys, concatenated
	offs   []uint32 // key of physical row i: blob[offs[i]:offs[i+1]]
	sorted []hashRow
}

// hashRow is 8 bytes a row: a 32-bit hash narrows a lookup to a handful of rows
// (about n/2^32 false candidates), each checked against the key itself.
type hashRow struct {
	h   uint32
	row uint32
}

func (x *keyIndex) bytes() int64 {
	return int64(len(x.blob)) + 4*int64(len(x.offs)) + 8*int64(len(x.sorted)) + 128
}

// find appends to dst the physical rows whose key is key.
func (x *keyIndex) find(dst []uint32, h uint32, key string) []uint32 {
	i, _ := slices.BinarySearchFunc(x.sorted, h, func(e hashRow, h uint32) int { return cmp.Compare(e.h, h) })
	for ; i < len(x.sorted) && x.sorted[i].h == h; i++ {
		r := x.sorted[i].row
		if string(x.blob[x.offs[r]:x.offs[r+1]]) == key {
			dst = append(dst, r)
		}
	}
	return dst
}

func keyCacheKey(scope string, df *tablepb.DataFile, f *schema.Field, rows uint64) string {
	return fmt.Sprintf("%s\x00%s\x00%d\x00%d", scope, df.GetPath(), f.ID, rows)
}

// index returns the index of field f in data file df of frag, building it on a miss.
func (c *KeyCache) index(ctx context.Context, d *Dataset, scope, key string, fr *fragmentReader, f *schema.Field) (*keyIndex, error) {
	for {
		c.mu.Lock()
		if el, ok := c.entries[key]; ok {
			c.lru.MoveToFront(el)
			e := el.Value.(*keyCacheEntry)
			c.mu.Unlock()
			select {
			case <-e.ready:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			if e.err == nil {
				c.hits.Add(1)
				return e.idx, nil
			}
			// The builder failed (perhaps only its own context ended) and removed the
			// entry; build it here.
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			continue
		}
		e := &keyCacheEntry{key: key, scope: scope, ready: make(chan struct{})}
		c.entries[key] = c.lru.PushFront(e)
		sc := c.scopes[scope]
		if sc == nil {
			sc = &keyScope{keys: map[string]struct{}{}}
			c.scopes[scope] = sc
		}
		sc.keys[key] = struct{}{}
		c.mu.Unlock()
		c.misses.Add(1)

		idx, err := c.build(ctx, d, fr, f)
		c.mu.Lock()
		e.idx, e.err = idx, err
		close(e.ready)
		if el := c.entries[key]; el != nil && el.Value == e {
			if err != nil || idx.bytes() > c.maxBytes {
				c.lru.Remove(el)
				delete(c.entries, key)
				if sc := c.scopes[scope]; sc != nil {
					delete(sc.keys, key)
				}
			} else {
				c.used += idx.bytes()
				c.evict()
			}
		}
		c.mu.Unlock()
		return idx, err
	}
}

// evict drops the least recently used built indexes until the cache fits. c.mu held.
func (c *KeyCache) evict() {
	for el := c.lru.Back(); el != nil && c.used > c.maxBytes; {
		prev := el.Prev()
		e := el.Value.(*keyCacheEntry)
		select {
		case <-e.ready:
			c.lru.Remove(el)
			delete(c.entries, e.key)
			if sc := c.scopes[e.scope]; sc != nil {
				delete(sc.keys, e.key)
			}
			c.used -= e.idx.bytes()
			c.evictions.Add(1)
		default: // still being built; it is accounted when done
		}
		el = prev
	}
}

// keyIndexBatch is how many rows of the key column are decoded at a time.
const keyIndexBatch = 65536

func (c *KeyCache) build(ctx context.Context, d *Dataset, fr *fragmentReader, f *schema.Field) (*keyIndex, error) {
	keyOf, err := keyFunc(f.Type)
	if err != nil {
		return nil, err
	}
	total := fr.frag.GetPhysicalRows()
	if total >= 1<<32 {
		return nil, fmt.Errorf("%w: fragment %d has %d rows", ErrUnsupported, fr.frag.GetId(), total)
	}
	x := &keyIndex{offs: make([]uint32, 1, total+1), sorted: make([]hashRow, 0, total)}
	s := fieldsSchema([]*schema.Field{f})
	for start := uint64(0); start < total; start += keyIndexBatch {
		end := min(start+keyIndexBatch, total)
		rec, err := fr.read(ctx, d.store, []*schema.Field{f}, s, start, end, nil)
		if err != nil {
			return nil, err
		}
		col := rec.Column(0)
		for i := 0; i < col.Len(); i++ {
			if !col.IsNull(i) {
				k := keyOf(col, i)
				x.sorted = append(x.sorted, hashRow{uint32(maphash.String(c.seed, k)), uint32(start) + uint32(i)})
				x.blob = append(x.blob, k...)
			}
			if len(x.blob) >= 1<<32 {
				rec.Release()
				return nil, fmt.Errorf("%w: keys of fragment %d exceed 4 GiB", ErrUnsupported, fr.frag.GetId())
			}
			x.offs = append(x.offs, uint32(len(x.blob)))
		}
		rec.Release()
	}
	slices.SortFunc(x.sorted, func(a, b hashRow) int { return cmp.Compare(a.h, b.h) })
	x.blob = slices.Clip(x.blob)
	return x, nil
}

// lookupPlan is what LookupKey searches in one version: the fragments that hold the
// key column, each with its key cache key.
type lookupPlan struct {
	once  sync.Once
	frags []keyedFragment
	err   error
}

type keyedFragment struct {
	fr  *fragmentReader
	key string
}

// lookupPlan returns the fragments of d that hold field kf (one added later is all
// null in the older ones), built once per scope and column; building it drops the
// scope's cache entries of fragments this version no longer has.
func (d *Dataset) lookupPlan(cache *KeyCache, scope string, kf *schema.Field) ([]keyedFragment, error) {
	v, _ := d.lookupPlans.LoadOrStore(scope+"\x00"+kf.Name, &lookupPlan{})
	p := v.(*lookupPlan)
	p.once.Do(func() {
		frags := make([]keyedFragment, 0, len(d.Fragments()))
		live := make(map[string]struct{}, len(d.Fragments()))
		for _, frag := range d.Fragments() {
			fr, err := d.fragment(frag)
			if err != nil {
				p.err = err
				return
			}
			if df := fr.owner[kf.ID]; df != nil {
				k := keyCacheKey(scope, df, kf, frag.GetPhysicalRows())
				frags = append(frags, keyedFragment{fr, k})
				live[k] = struct{}{}
			}
		}
		cache.prune(scope, d.Version(), live)
		p.frags = frags
	})
	return p.frags, p.err
}

// LookupKey returns the first visible row, in table order, whose column equals key
// (in the column's key form: strings as is, integers in decimal), with the given
// columns; ok is false when no row has it. It reads the key column of each data file
// once into cache, under scope (the caller's name for this dataset, see KeyCache),
// and afterwards only the matching row and the deletion file of its fragment. column
// must be a string, binary or integer column.
func (d *Dataset) LookupKey(ctx context.Context, cache *KeyCache, scope, column, key string, columns []string) (rec arrow.RecordBatch, ok bool, err error) {
	recs, err := d.LookupKeys(ctx, cache, scope, column, []string{key}, columns)
	if err != nil {
		return nil, false, err
	}
	return recs[0], recs[0] != nil, nil
}

// lookupTakes bounds the fragments LookupKeys takes rows of at once.
const lookupTakes = 8

// LookupKeys is LookupKey for many keys at once: recs[i] is the row of keys[i], nil
// when no row has it. Each fragment's index is taken from the cache once for all the
// keys, which is what makes checking a batch of keys cheap on a table of many
// fragments. The caller releases the records.
func (d *Dataset) LookupKeys(ctx context.Context, cache *KeyCache, scope, column string, keys []string, columns []string) (recs []arrow.RecordBatch, err error) {
	kf := d.schema.Field(column)
	if kf == nil {
		return nil, fmt.Errorf("lance: no column %q in the table", column)
	}
	if _, err := keyFunc(kf.Type); err != nil {
		return nil, err
	}
	fields := make([]*schema.Field, len(columns))
	for i, name := range columns {
		if fields[i] = d.schema.Field(name); fields[i] == nil {
			return nil, fmt.Errorf("lance: no column %q in the table", name)
		}
	}
	frags, err := d.lookupPlan(cache, scope, kf)
	if err != nil {
		return nil, err
	}
	recs = make([]arrow.RecordBatch, len(keys))
	defer func() {
		if err != nil {
			for _, r := range recs {
				if r != nil {
					r.Release()
				}
			}
			recs = nil
		}
	}()
	hs := make([]uint32, len(keys))
	for i, key := range keys {
		hs[i] = uint32(maphash.String(cache.seed, key))
	}
	// First where each key lives: the first fragment, in table order, with a visible
	// row of it (memory, but for the indexes and deletion files not read yet). Then
	// one take per fragment of all its keys' rows, the fragments at once: a take per
	// key, one after another, made fetching a search's 10 records 10 takes deep.
	type pick struct {
		key int
		row uint64
	}
	type fragPicks struct {
		fr    *fragmentReader
		picks []pick
	}
	var plan []*fragPicks
	found := make([]bool, len(keys))
	left := len(keys)
	var rows []uint32
	for _, kd := range frags {
		if left == 0 {
			break
		}
		fr, frag := kd.fr, kd.fr.frag
		idx, err := cache.index(ctx, d, scope, kd.key, fr, kf)
		if err != nil {
			return recs, fmt.Errorf("lance: index %q of fragment %d: %w", column, frag.GetId(), err)
		}
		var deleted *roaring.Bitmap
		loaded := false
		var fp *fragPicks
		for i, key := range keys {
			if found[i] {
				continue
			}
			if rows = idx.find(rows[:0], hs[i], key); len(rows) == 0 {
				continue
			}
			if !loaded {
				if deleted, err = readDeletionVector(ctx, d.store, frag); err != nil {
					return recs, err
				}
				loaded = true
			}
			for _, r := range rows {
				if deleted.Contains(r) {
					continue
				}
				if fp == nil {
					fp = &fragPicks{fr: fr}
					plan = append(plan, fp)
				}
				fp.picks = append(fp.picks, pick{key: i, row: uint64(r)})
				found[i] = true
				left--
				break
			}
		}
	}
	// Each key is in one fragment's picks: the takes fill disjoint elements of recs.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(lookupTakes)
	for _, fp := range plan {
		g.Go(func() error {
			take := make([]uint64, len(fp.picks))
			for j, p := range fp.picks {
				take[j] = p.row
			}
			// Only the rows' bytes are read where rows are addressable.
			rec, err := fp.fr.read(gctx, d.store, fields, fieldsSchema(fields), 0, 0, take)
			if err != nil {
				return err
			}
			defer rec.Release()
			for j, p := range fp.picks {
				recs[p.key] = rec.NewSlice(int64(j), int64(j)+1)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return recs, err
	}
	return recs, nil
}
