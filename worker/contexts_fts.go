package worker

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/lancectx/lancectx/ctxstore"
	"github.com/lancectx/lancectx/ctxstore/fts"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/wal"
)

// The text channel of a retrieve ranks through the store's full-text index
// (ctxstore/fts, built by the master's index task) when one covers base fragments.
// The index path gives the same scores as the exact one (textCorpus over the whole
// snapshot): BM25 statistics are of the corpus the query may rank, so
//
//   - the covered fragments' documents count from the index: those its version has not
//     deleted (deletion vectors), whose state passes the filter (kept per document:
//     a row's state never changes), and whose id no newer source rewrites;
//   - everything else (fragments appended or compacted since the build, the pending
//     generations, the memtable) is scanned as before, every row of it, so that each id
//     it rewrites is known (those shadow the index's documents of that id);
//   - both add to one ctxstore.BM25 (AddCounted), whose Scorer scores the documents of
//     both paths term by term in slot order: the same float64 either way.
//
// Equality filters change the corpus per query (its N, avgdl and df are of the
// filtered records), so a retrieve with them ranks exactly, as before.
//
// ftsCache keeps, per store (by incarnation), the decoded segments of its index and the
// view of the latest base version read (which documents are dead in it), so the
// index is read once per build and the deletion vectors once per version.

// ftsMaxStores bounds the stores whose full-text index a worker keeps in memory
// (least recently used out first), beside the byte bound.
const ftsMaxStores = 16

// DefaultContextTextIndexCacheBytes bounds the decoded full-text index segments of all
// context stores together (Config.ContextTextIndexCacheBytes). A segment of 1M
// records of ~30 words holds about 200 MiB decoded, so 1 GiB keeps a few such stores;
// 16 of them, the store bound alone, would not fit a worker.
const DefaultContextTextIndexCacheBytes = 1 << 30

// DefaultContextIndexCacheBytes bounds the decoded IVF partitions of context stores'
// vector indexes (Config.ContextIndexCacheBytes), all stores together: 1 GiB holds an
// index of 300k × 768 float32 whole.
const DefaultContextIndexCacheBytes = 1 << 30

// ftsManifestTTL is how long a worker uses an index view of one base version before
// reading the index manifest again: a build is picked up within it (until then the
// rows it covers are scanned, not missed).
const ftsManifestTTL = 5 * time.Second

type ftsCache struct {
	// searches counts the text rankings of retrieves by path: index or exact.
	searches *prometheus.CounterVec
	// ttl is how long a view is used before the index manifest is read again (a build
	// writes no table version, so a new base version is not the only sign of one).
	ttl time.Duration

	// maxBytes bounds the bytes of all stores' entries (negative: none kept).
	maxBytes int64
	// held is the bytes the entries hold now (the sum of their bytes).
	held prometheus.Gauge

	mu     sync.Mutex
	tick   uint64
	stores map[string]*ftsStore
	bytes  int64
}

type ftsStore struct {
	used uint64
	// bytes estimates what segs and view hold.
	bytes   int64
	segs    map[string]*ftsSeg // by segment key
	dvs     map[string]*roaring.Bitmap
	view    *ftsView
	loading chan struct{} // non-nil while a load runs; closed when it ends
}

// ftsSeg is a decoded segment and its documents by record id.
type ftsSeg struct {
	seg  *fts.Segment
	byID map[string]uint32
}

// ftsView is what one base version makes of the index: the fragments covered and,
// per segment used, which documents are dead (deleted, or in a fragment the version
// no longer has).
type ftsView struct {
	incarnation string
	version     uint64
	// manifest is the index manifest the view was made from (its segment keys);
	// loaded is when it was last read.
	manifest string
	loaded   time.Time
	covered  []uint64
	parts    []*ftsPart
}

// ftsPart is one segment as a base version sees it (contexts_fts_rank.go).
type ftsPart struct {
	s    *ftsSeg
	dead []bool
	// The corpus statistics of its documents that are neither dead nor tombstones
	// (all) and of those of them retired (ret); expiring are those of them with an
	// expiry, by expiry ascending. A query corrects them for its filter, its clock and
	// the ids the WAL rewrites.
	allN, retN     int
	allLen, retLen int64
	expiring       []uint32

	mu  sync.Mutex
	dfs map[string]termDF // by term, filled on first use
}

func newFTSCache(reg prometheus.Registerer, maxBytes int64) *ftsCache {
	c := &ftsCache{stores: map[string]*ftsStore{}, ttl: ftsManifestTTL, maxBytes: maxBytes}
	c.held = prometheus.NewGauge(prometheus.GaugeOpts{Name: "context_text_index_cache_bytes",
		Help: "Estimated bytes of the decoded full-text index segments kept for context retrieves (bound: --context-text-index-cache-bytes)."})
	c.searches = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "context_text_searches_total",
		Help: "Text rankings of context retrieves by path: index (covered fragments through the full-text index, the rest scanned), exact (no index covering the base, or equality filters)."},
		[]string{"path"})
	if reg != nil {
		reg.MustRegister(c.searches, c.held)
	}
	return c
}

// view returns the index view of base (nil when the store has no index covering any
// of its fragments). No lock is held across the object-store reads; concurrent
// callers for one store wait for one load.
func (c *ftsCache) view(ctx context.Context, base *lance.Dataset) (*ftsView, error) {
	// A store opened from its object store has no URI: the incarnation, unique per
	// dataset, tells stores apart (keyed by the URI alone, every context store shared
	// one entry, and retrieves of two stores read each other's index out).
	uri := wal.Incarnation(base) + "|" + base.URI()
	for {
		c.mu.Lock()
		st := c.stores[uri]
		if st == nil {
			st = &ftsStore{segs: map[string]*ftsSeg{}, dvs: map[string]*roaring.Bitmap{}}
			c.stores[uri] = st
			c.evictLocked("")
		}
		c.tick++
		st.used = c.tick
		if v := st.view; v != nil && v.version == base.Version() && v.incarnation == wal.Incarnation(base) && time.Since(v.loaded) < c.ttl {
			c.mu.Unlock()
			if len(v.parts) == 0 {
				return nil, nil
			}
			return v, nil
		}
		if wait := st.loading; wait != nil {
			c.mu.Unlock()
			select {
			case <-wait:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		done := make(chan struct{})
		st.loading = done
		segs, dvs, prev := st.segs, st.dvs, st.view
		c.mu.Unlock()

		v, nsegs, ndvs, err := loadFTSView(ctx, base, prev, segs, dvs)
		c.mu.Lock()
		st.loading = nil
		switch {
		case err == nil:
			st.segs, st.dvs = nsegs, ndvs
			if st.view == nil || v.version >= st.view.version || v.incarnation != st.view.incarnation {
				st.view = v
			}
			c.resizeLocked(st)
			c.evictLocked(uri)
		case ctx.Err() == nil:
			// An unreadable index (a corrupt segment, a failed read): the queries of
			// the next ttl rank exactly instead of reading it again each time.
			st.view = &ftsView{incarnation: wal.Incarnation(base), version: base.Version(), loaded: time.Now()}
		}
		c.mu.Unlock()
		close(done)
		if err != nil {
			return nil, err
		}
		if len(v.parts) == 0 {
			return nil, nil
		}
		return v, nil
	}
}

// resizeLocked sets st's byte estimate from what it now holds: its segments (and
// their maps of documents by id) and the per-document state of its view.
func (c *ftsCache) resizeLocked(st *ftsStore) {
	const mapEntry = 48 // a map[string]uint32 entry, its key's bytes shared with the segment
	var n int64
	for _, s := range st.segs {
		n += s.seg.MemBytes() + int64(len(s.byID))*mapEntry
	}
	if st.view != nil {
		for _, p := range st.view.parts {
			n += int64(len(p.dead)) + int64(len(p.expiring))*4
		}
	}
	c.bytes += n - st.bytes
	st.bytes = n
	c.held.Set(float64(c.bytes))
}

// evictLocked drops the least recently used entries (none with a load running) while
// more stores than ftsMaxStores, or more bytes than maxBytes, are held. keep, the store
// just loaded, goes last: when it alone does not fit, its segments are dropped after
// the query that loaded them, and the next query reads them again.
func (c *ftsCache) evictLocked(keep string) {
	for len(c.stores) > ftsMaxStores || c.bytes > max(c.maxBytes, 0) {
		var old string
		var oldest uint64
		for k, s := range c.stores {
			if s.loading == nil && k != keep && (old == "" || s.used < oldest) {
				old, oldest = k, s.used
			}
		}
		if old == "" {
			if st := c.stores[keep]; st != nil && st.loading == nil && c.bytes > max(c.maxBytes, 0) {
				c.bytes -= st.bytes
				delete(c.stores, keep)
				c.held.Set(float64(c.bytes))
			}
			return
		}
		c.bytes -= c.stores[old].bytes
		delete(c.stores, old)
		c.held.Set(float64(c.bytes))
	}
}

// loadFTSView reads the index manifest of base, the segments not in segs and the
// deletion vectors not in dvs, and makes the view of base's version. It returns the
// segments and deletion vectors the view uses (the others are dropped).
func loadFTSView(ctx context.Context, base *lance.Dataset, prev *ftsView, segs map[string]*ftsSeg, dvs map[string]*roaring.Bitmap) (*ftsView, map[string]*ftsSeg, map[string]*roaring.Bitmap, error) {
	v := &ftsView{incarnation: wal.Incarnation(base), version: base.Version(), loaded: time.Now()}
	m, err := fts.ReadManifest(ctx, base.Store())
	if err != nil {
		return nil, nil, nil, err
	}
	if m == nil {
		return v, map[string]*ftsSeg{}, map[string]*roaring.Bitmap{}, nil
	}
	for _, s := range m.Segments {
		v.manifest += s.Key + "\n"
	}
	if prev != nil && prev.version == v.version && prev.incarnation == v.incarnation && prev.manifest == v.manifest {
		// The same version and the same segments: the view stands, read again now.
		same := *prev
		same.loaded = v.loaded
		return &same, segs, dvs, nil
	}
	cov := fts.Coverage(m, base, wal.Incarnation(base))
	nsegs := map[string]*ftsSeg{}
	ndvs := map[string]*roaring.Bitmap{}
	bySeg := map[int][]uint64{}
	for frag, i := range cov {
		bySeg[i] = append(bySeg[i], frag)
	}
	delFile := map[uint64]string{}
	for _, f := range base.Fragments() {
		if df := f.GetDeletionFile(); df != nil {
			delFile[f.GetId()] = fmt.Sprintf("%d-%d-%d", f.GetId(), df.GetReadVersion(), df.GetId())
		}
	}
	for i, ref := range m.Segments {
		mine := bySeg[i]
		if len(mine) == 0 {
			continue
		}
		s := segs[ref.Key]
		if s == nil {
			seg, err := fts.LoadSegment(ctx, base.Store(), ref.Key)
			if err != nil {
				return nil, nil, nil, err
			}
			s = &ftsSeg{seg: seg, byID: make(map[string]uint32, len(seg.IDs))}
			for d, id := range seg.IDs {
				s.byID[id] = uint32(d)
			}
		}
		nsegs[ref.Key] = s
		// Every document starts dead; those of the fragments this version has from
		// this segment come alive, less the version's deletions.
		dead := make([]bool, len(s.seg.Addr))
		for d := range dead {
			dead[d] = true
		}
		for _, frag := range mine {
			v.covered = append(v.covered, frag)
			lo, hi := s.seg.DocsOf(frag)
			for d := lo; d < hi; d++ {
				dead[d] = false
			}
			key, ok := delFile[frag]
			if !ok {
				continue
			}
			bm := dvs[key]
			if bm == nil {
				if bm, err = base.DeletedRows(ctx, frag); err != nil {
					return nil, nil, nil, err
				}
			}
			ndvs[key] = bm
			if bm.IsEmpty() {
				continue
			}
			for d := lo; d < hi; d++ {
				if bm.Contains(uint32(s.seg.Addr[d])) {
					dead[d] = true
				}
			}
		}
		v.parts = append(v.parts, newFTSPart(s, dead))
	}
	return v, nsegs, ndvs, nil
}

// rankText returns the depth best documents of the text channel (scores larger
// first), through the store's full-text index when it covers base fragments and the
// filter has no equalities, else by scanning every live row.
func (s *Server) rankText(ctx context.Context, sn cxView, bm *ctxstore.BM25, f ctxstore.Filter, depth int) ([]ctxstore.Candidate, error) {
	var v *ftsView
	if len(f.Eq) == 0 {
		var err error
		if v, err = s.cxFTS.view(ctx, sn.Base()); err != nil {
			// The index is an accelerator: an unreadable one leaves the exact path.
			s.log.Warn("context retrieve: full-text index unreadable; ranking exactly", "uri", sn.Base().URI(), "err", err)
			v = nil
		}
	}
	if v == nil {
		s.cxFTS.searches.WithLabelValues("exact").Inc()
		if err := textCorpus(ctx, sn, f, bm); err != nil {
			return nil, err
		}
		out := bm.Scores()
		return out[:min(len(out), depth)], nil
	}
	s.cxFTS.searches.WithLabelValues("index").Inc()
	return rankTextIndexed(ctx, sn, v, bm, f, depth)
}
