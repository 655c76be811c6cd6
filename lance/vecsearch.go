package lance

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/RoaringBitmap/roaring/v2/roaring64"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lancectx/lancectx/lance/format/tablepb"
	"github.com/lancectx/lancectx/lance/schema"
	"github.com/lancectx/lancectx/lance/vecindex"
)

// DefaultNProbes is the number of IVF partitions a search probes unless told otherwise
// (LanceDB 0.31's minimum_nprobes).
const DefaultNProbes = 20

// VectorSearchOptions tune VectorSearch.
type VectorSearchOptions struct {
	// Metric: "l2", "cosine", "dot"; empty means the index's metric (l2 without index).
	// An index is used only for queries in its own metric, as in LanceDB.
	Metric string
	// NProbes is the number of partitions probed per index segment (DefaultNProbes).
	NProbes int
	// Index names the vector index to use (default: the column's first vector index).
	Index string
	// BypassIndex searches every row exactly.
	BypassIndex bool
	// IndexedOnly searches the fragments the index covers and nothing else: the caller
	// searches the others itself (a context store's search, which also reads its WAL).
	// Without a usable index nothing is searched (Index is "" in the result).
	IndexedOnly bool
	// Filter is a SQL predicate (package expr) that results must pass, applied before
	// ranking (LanceDB's where with prefilter): it is evaluated first, to the row ids of
	// the fragments the index covers that pass it, and only those rows are ranked in the
	// probed partitions. When fewer than k pass within NProbes partitions of a segment,
	// more of its partitions are probed, nearest first, until k are found or every
	// partition was. Unindexed fragments are scanned with the filter pushed down.
	Filter string
	// WithVectors returns each hit's vector (VectorHit.Vector): the index's copy for rows
	// found through it (an IVF_FLAT index keeps vectors whole; normalized when its metric
	// is cosine), the scanned one otherwise. A caller that needs the vectors of the hits
	// saves reading them again, one page per row, from the data files.
	WithVectors bool
	// Cache, when set, serves the index's partitions (shared by every table and version
	// of the caller, keyed by index UUID) instead of the index's own per-version cache.
	Cache *vecindex.PartitionCache
}

// VectorHit is one search result: the row id (what _rowid reports; Take accepts it) and
// its distance (LanceDB's _distance: squared L2, 1 − cosine similarity, or 1 − a·b).
type VectorHit struct {
	RowID    uint64  `json:"row_id"`
	Distance float32 `json:"distance"`
	// Vector is set with VectorSearchOptions.WithVectors.
	Vector []float32 `json:"-"`
}

// VectorSearchResult is the answer of VectorSearch.
type VectorSearchResult struct {
	// Hits, nearest first (ties by row id), at most k.
	Hits []VectorHit `json:"hits"`
	// Index is the index used ("" when none was).
	Index  string `json:"index,omitempty"`
	Metric string `json:"metric"`
	// IndexedFragments are searched through the index (probed partitions only);
	// UnindexedFragments exactly. Together they are every live fragment.
	IndexedFragments   int `json:"indexed_fragments"`
	UnindexedFragments int `json:"unindexed_fragments"`
	// Candidates is the number of vectors whose distance was computed.
	Candidates int `json:"candidates"`
	// CoveredFragments are the ids of the live fragments searched through the index,
	// ascending.
	CoveredFragments []uint64 `json:"covered_fragments,omitempty"`
	// Probed is the number of partitions probed, all segments together (more than
	// NProbes per segment when a filter let too few rows through).
	Probed int `json:"probed"`
	// FilteredRows is the number of rows of the covered fragments that pass Filter
	// (searches with a filter through an index only).
	FilteredRows uint64 `json:"filtered_rows,omitempty"`
}

// VectorSearch returns the k rows of this version nearest to q in column. It is the
// seam between rows an index covers and rows it does not: the fragments in the bitmap
// of the chosen vector index (all its segments) are searched through it, probing
// NProbes partitions per segment with exact distances on the stored vectors (IVF_FLAT
// keeps them whole); every other live fragment is scanned exactly; the two are merged.
// Deleted rows are excluded everywhere (an index still lists them). Null vectors never
// match. With NProbes ≥ the partition count the result equals an exact search.
func (d *Dataset) VectorSearch(ctx context.Context, column string, q []float32, k int, opts VectorSearchOptions) (*VectorSearchResult, error) {
	f, dim, err := vectorField(d, column)
	if err != nil {
		return nil, err
	}
	if len(q) != dim {
		return nil, fmt.Errorf("%w: query has %d values, column %q has dimension %d", ErrVectorInput, len(q), column, dim)
	}
	for _, x := range q {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return nil, fmt.Errorf("%w: query holds a non-finite value", ErrVectorInput)
		}
	}
	if k <= 0 {
		return nil, fmt.Errorf("%w: k must be positive, got %d", ErrVectorInput, k)
	}
	nprobes := opts.NProbes
	if nprobes <= 0 {
		nprobes = DefaultNProbes
	}
	var segs []vectorSegment
	if !opts.BypassIndex {
		if segs, err = d.vectorSegments(ctx, f, opts.Index); err != nil {
			return nil, err
		}
	}
	var metric vecindex.Metric
	switch {
	case opts.Metric != "":
		if metric, err = vecindex.ParseMetric(opts.Metric); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrVectorInput, err)
		}
	case len(segs) > 0:
		metric = segs[0].idx.Metric()
	default:
		metric = vecindex.L2
	}
	if len(segs) > 0 && segs[0].idx.Metric() != metric {
		segs = nil // LanceDB too searches exactly when the metric differs
	}
	res := &VectorSearchResult{Metric: metric.String()}
	top := &hitHeap{k: k}
	live := map[uint64]*tablepb.DataFragment{}
	for _, fr := range d.Fragments() {
		live[fr.GetId()] = fr
	}
	covered := roaring.New()
	for _, s := range segs {
		covered.Or(s.frags)
	}
	if len(segs) > 0 {
		res.Index = segs[0].im.GetName()
		qn := q
		if metric == vecindex.Cosine {
			qn = append([]float32(nil), q...)
			vecindex.Normalize(qn)
		}
		chk, err := d.newLiveChecker(live)
		if err != nil {
			return nil, err
		}
		var allow *roaring64.Bitmap
		if opts.Filter != "" {
			if allow, err = d.filterRowIDs(ctx, opts.Filter, covered); err != nil {
				return nil, err
			}
			res.FilteredRows = allow.GetCardinality()
		}
		for _, s := range segs {
			if allow != nil && allow.IsEmpty() {
				break
			}
			order := s.idx.Probe(qn, nprobes)
			if allow != nil {
				order = s.idx.Probe(qn, s.idx.Partitions()) // nearest first; widened below
			}
			found := 0
			for pi, p := range order {
				if pi >= nprobes && found >= k {
					break
				}
				res.Probed++
				var ids []uint64
				var vecs []float32
				if opts.Cache != nil {
					ids, vecs, err = opts.Cache.ReadPartition(ctx, s.id, s.idx, p)
				} else {
					ids, vecs, err = s.idx.ReadPartition(ctx, p)
				}
				if err != nil {
					return nil, fmt.Errorf("vector index %s: %w", s.im.GetName(), err)
				}
				for i, id := range ids {
					if allow != nil && !allow.Contains(id) {
						continue
					}
					res.Candidates++
					dist := metric.DistanceWithin(qn, vecs[i*dim:(i+1)*dim], top.bound())
					if !top.admits(dist, id) {
						if allow != nil {
							// Admitted or not, a passing row counts towards k only when
							// live; check it so that widening stops on live rows.
							if ok, err := chk.live(ctx, id, s.frags); err != nil {
								return nil, err
							} else if ok {
								found++
							}
						}
						continue
					}
					ok, err := chk.live(ctx, id, s.frags)
					if err != nil {
						return nil, err
					}
					if ok {
						found++
						h := VectorHit{RowID: id, Distance: dist}
						if opts.WithVectors {
							h.Vector = slices.Clone(vecs[i*dim : (i+1)*dim])
						}
						top.add(h)
					}
				}
			}
		}
	}
	var unindexed []uint64
	for _, fr := range d.Fragments() {
		if fr.GetId() <= math.MaxUint32 && covered.Contains(uint32(fr.GetId())) {
			res.IndexedFragments++
			res.CoveredFragments = append(res.CoveredFragments, fr.GetId())
		} else {
			unindexed = append(unindexed, fr.GetId())
		}
	}
	slices.Sort(res.CoveredFragments)
	res.UnindexedFragments = len(unindexed)
	if len(unindexed) == 0 || opts.IndexedOnly {
		res.Hits = top.sorted()
		return res, nil
	}
	err = scanVectors(ctx, d, column, dim, unindexed, opts.Filter, func(id uint64, v []float32) {
		res.Candidates++
		if dist := metric.Distance(q, v); top.admits(dist, id) {
			h := VectorHit{RowID: id, Distance: dist}
			if opts.WithVectors {
				h.Vector = slices.Clone(v)
			}
			top.add(h)
		}
	})
	if err != nil {
		return nil, err
	}
	res.Hits = top.sorted()
	return res, nil
}

// filterRowIDs evaluates filter over the live fragments of covered and returns the row
// ids (what _rowid reports, as an index lists them) of the rows that pass.
func (d *Dataset) filterRowIDs(ctx context.Context, filter string, covered *roaring.Bitmap) (*roaring64.Bitmap, error) {
	out := roaring64.New()
	var frags []uint64
	for _, fr := range d.Fragments() {
		if fr.GetId() <= math.MaxUint32 && covered.Contains(uint32(fr.GetId())) {
			frags = append(frags, fr.GetId())
		}
	}
	if len(frags) == 0 {
		return out, nil
	}
	sc, err := d.Scan(ctx, ScanOptions{Columns: []string{RowIDColumn}, Filter: filter, Fragments: frags})
	if err != nil {
		return nil, fmt.Errorf("%w: filter: %w", ErrVectorInput, err)
	}
	defer sc.Release()
	for sc.Next() {
		rid, ok := sc.RecordBatch().Column(0).(*array.Uint64)
		if !ok {
			return nil, fmt.Errorf("lance: row id scan returned %T", sc.RecordBatch().Column(0))
		}
		out.AddMany(rid.Uint64Values())
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// vectorSegment is one entry of a vector index (the index or a delta of it).
type vectorSegment struct {
	id    string // the index UUID: its files never change
	im    *tablepb.IndexMetadata
	frags *roaring.Bitmap
	idx   *vecindex.Index
}

// vectorSegments opens the segments of the vector index name on field f (name empty:
// the first vector index of f in manifest order). Segments of index types lancectx does
// not read (IVF_PQ, HNSW, ...) make the search exact rather than fail: with none
// returned, every fragment is scanned.
func (d *Dataset) vectorSegments(ctx context.Context, f *schema.Field, name string) ([]vectorSegment, error) {
	var segs []vectorSegment
	for _, im := range d.mf.Indices.GetIndices() {
		if !isVectorIndex(im) || len(im.GetFields()) != 1 || im.GetFields()[0] != f.ID {
			continue
		}
		if name == "" {
			name = im.GetName()
		}
		if im.GetName() != name {
			continue
		}
		det, err := vecindex.UnmarshalDetails(im.GetIndexDetails().GetValue())
		if err != nil {
			return nil, fmt.Errorf("vector index %q: %w", name, err)
		}
		if det.Compression != "" && det.Compression != "flat" {
			return nil, nil
		}
		id, err := indexUUID(im)
		if err != nil {
			return nil, err
		}
		x, err := d.openVectorIndex(ctx, im)
		if errors.Is(err, vecindex.ErrUnsupported) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		bm, err := fragmentBitmap(im)
		if err != nil {
			return nil, err
		}
		if len(segs) > 0 && (x.Metric() != segs[0].idx.Metric() || x.Dim() != segs[0].idx.Dim()) {
			return nil, corruptf("", "vector index %q: segments disagree on metric or dimension", name)
		}
		segs = append(segs, vectorSegment{id: id, im: im, frags: bm, idx: x})
	}
	return segs, nil
}

// openVectorIndex opens (once per version) the files of a vector index entry.
func (d *Dataset) openVectorIndex(ctx context.Context, im *tablepb.IndexMetadata) (*vecindex.Index, error) {
	id, err := indexUUID(im)
	if err != nil {
		return nil, err
	}
	if x, ok := d.vecIndices.Load(id); ok {
		return x.(*vecindex.Index), nil
	}
	size := func(name string) (int64, error) {
		for _, f := range im.GetFiles() {
			if f.GetPath() == name && f.GetSizeBytes() > 0 {
				return int64(f.GetSizeBytes()), nil
			}
		}
		info, err := d.store.Stat(ctx, indicesDir+id+"/"+name)
		if err != nil {
			return 0, fmt.Errorf("vector index %q: %w", im.GetName(), err)
		}
		return info.Size, nil
	}
	is, err := size(vecindex.IndexFile)
	if err != nil {
		return nil, err
	}
	as, err := size(vecindex.AuxiliaryFile)
	if err != nil {
		return nil, err
	}
	x, err := vecindex.Open(ctx, &storeSource{st: d.store, key: indicesDir + id + "/" + vecindex.IndexFile}, is,
		&storeSource{st: d.store, key: indicesDir + id + "/" + vecindex.AuxiliaryFile}, as)
	if err != nil {
		if errors.Is(err, vecindex.ErrCorrupt) {
			return nil, fmt.Errorf("%w: vector index %q (%s): %w", ErrCorrupt, im.GetName(), id, err)
		}
		return nil, fmt.Errorf("vector index %q (%s): %w", im.GetName(), id, err)
	}
	got, _ := d.vecIndices.LoadOrStore(id, x)
	return got.(*vecindex.Index), nil
}

// liveChecker tells whether a row id an index lists is a live row of a fragment the
// index segment covers: deleted rows, rows of removed fragments and (stable row ids)
// ids whose live copy moved to a fragment the segment does not cover are not.
type liveChecker struct {
	d      *Dataset
	frags  map[uint64]*tablepb.DataFragment
	del    *deletions
	stable bool
	rid    *rowIDIndex
}

func (d *Dataset) newLiveChecker(frags map[uint64]*tablepb.DataFragment) (*liveChecker, error) {
	c := &liveChecker{d: d, frags: frags, del: &deletions{st: d.store, bm: map[uint64]*roaring.Bitmap{}}, stable: usesStableRowIDs(d.mf.Manifest)}
	if c.stable {
		x, err := d.rowIDIndex()
		if err != nil {
			return nil, err
		}
		c.rid = x
	}
	return c, nil
}

func (c *liveChecker) live(ctx context.Context, id uint64, covered *roaring.Bitmap) (bool, error) {
	if !c.stable {
		fr, ok := c.frags[id>>32]
		off := id & 0xffffffff
		if !ok || !covered.Contains(uint32(id>>32)) || off >= fr.GetPhysicalRows() {
			return false, nil
		}
		gone, err := c.del.deleted(ctx, fr, off)
		return !gone, err
	}
	found := false
	var ferr error
	c.rid.lookup(id, func(fr *tablepb.DataFragment, off uint64) {
		if found || ferr != nil || fr.GetId() > math.MaxUint32 || !covered.Contains(uint32(fr.GetId())) {
			return
		}
		gone, err := c.del.deleted(ctx, fr, off)
		if err != nil {
			ferr = err
		} else if !gone {
			found = true
		}
	})
	return found, ferr
}

// hitHeap keeps the k nearest hits: a max-heap on (distance, row id).
type hitHeap struct {
	k    int
	hits []VectorHit
}

func worse(a, b VectorHit) bool {
	return a.Distance > b.Distance || a.Distance == b.Distance && a.RowID > b.RowID
}

func (h *hitHeap) Len() int           { return len(h.hits) }
func (h *hitHeap) Less(i, j int) bool { return worse(h.hits[i], h.hits[j]) }
func (h *hitHeap) Swap(i, j int)      { h.hits[i], h.hits[j] = h.hits[j], h.hits[i] }
func (h *hitHeap) Push(x any)         { h.hits = append(h.hits, x.(VectorHit)) }
func (h *hitHeap) Pop() any {
	x := h.hits[len(h.hits)-1]
	h.hits = h.hits[:len(h.hits)-1]
	return x
}

// bound is the distance above which no hit enters the k nearest (+Inf until k are held).
func (h *hitHeap) bound() float32 {
	if len(h.hits) < h.k {
		return float32(math.Inf(1))
	}
	return h.hits[0].Distance
}

// admits reports whether a hit at dist would enter the k nearest (NaN never does).
func (h *hitHeap) admits(dist float32, id uint64) bool {
	if dist != dist {
		return false
	}
	return len(h.hits) < h.k || worse(h.hits[0], VectorHit{RowID: id, Distance: dist})
}

func (h *hitHeap) add(v VectorHit) {
	if len(h.hits) < h.k {
		heap.Push(h, v)
		return
	}
	h.hits[0] = v
	heap.Fix(h, 0)
}

// sorted returns the hits nearest first.
func (h *hitHeap) sorted() []VectorHit {
	out := make([]VectorHit, len(h.hits))
	for i := len(out) - 1; i >= 0; i-- {
		out[i] = heap.Pop(h).(VectorHit)
	}
	return out
}
