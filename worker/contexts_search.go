package worker

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/ctxstore"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/lance/vecindex"
	"github.com/lancectx/lancectx/wal"
)

// Search of context stores: k-nearest neighbours and hybrid retrieval over one
// snapshot, the base table and the write-ahead log together (a record acked to this
// worker is ranked from its ack on).
//
// rankVectors is the seam between the vector index and the exact scan. When the base
// table has a vector index in the store's metric (built by the master's index task),
// the base fragments it covers are ranked through it (indexSource: IVF partitions
// probed, contextSearchNProbes of them) and everything else exactly (exactSource over
// the snapshot with the covered fragments left out: the fragments appended since the
// index, the pending generations, the memtable); both feed one TopK. What the index
// source must respect, and the exact scan gets from wal.Snapshot.Scan: (1) rows a newer
// source shadows (the same id rewritten in the WAL: an upsert, a patch, a delete) are
// not candidates: the exact scan of the rest sees every such newer row, so an index
// candidate whose id it meets is dropped; (2) the filter applies before ranking: a
// search with equality filters ranks every row exactly (the filter is pushed into the
// scan), and the state checks (tombstones, expiry, retirement) are made on the index's
// candidates, which are taken from the table; with equality filters the index search is
// prefiltered: lance evaluates the filter's SQL over the covered fragments to the set of
// passing row ids and ranks only those in the probed partitions, probing more partitions
// when too few pass (VectorSearchOptions.Filter), and the exact scan of the rest ranks
// only rows that pass the equalities (it reads every row, unfiltered, to see shadowing
// rows: a WAL row that no longer passes still hides the base row of its id); (3)
// distances are the store's metric
// (ctxstore.DistanceFor), recomputed on each candidate's stored vector. When too few of
// the index's candidates survive (1) and (2) to fill the k best, the index is asked
// for more, and past indexMaxCandidates the search is exact.

// maxSearchLimit bounds the k of one search or retrieve.
const maxSearchLimit = 1000

// contextSearchNProbes is the number of IVF partitions probed per index segment. The
// reference's search request has no nprobes; this is LanceDB's default.
const contextSearchNProbes = lance.DefaultNProbes

// indexMaxCandidates bounds the candidates one search takes from the index; a search
// that would need more (a store whose nearest rows are mostly retired, expired or
// rewritten in the WAL) ranks every row exactly instead.
const indexMaxCandidates = 8192

// exactSource ranks the live rows of a snapshot with an embedding by their exact
// distance to q.
type exactSource struct{ dist ctxstore.Distance }

// rank ranks every live row f keeps, the filter pushed into the scan.
func (e exactSource) rank(ctx context.Context, sn cxView, q []float32, f ctxstore.Filter, top *ctxstore.TopK) error {
	return e.scan(ctx, sn, wal.ScanOptions{Filter: f.SQL()}, q, f, nil, top)
}

// rankRest ranks the live rows outside the base fragments skip that pass f's equality
// filters, and marks in seen the ids of watch it meets, live and passing or not
// (tombstones included: no filter is pushed down, so every newer row of an id is met).
func (e exactSource) rankRest(ctx context.Context, sn cxView, q []float32, f ctxstore.Filter, skip []uint64,
	watch, seen map[string]bool, top *ctxstore.TopK) error {
	return e.scan(ctx, sn, wal.ScanOptions{SkipFragments: skip}, q, f, func(id string) {
		if watch[id] {
			seen[id] = true
		}
	}, top)
}

func (e exactSource) scan(ctx context.Context, sn cxView, opts wal.ScanOptions, q []float32, f ctxstore.Filter,
	meet func(id string), top *ctxstore.TopK) error {
	opts.Columns = append([]string{ctxstore.ColID, ctxstore.ColEmbedding}, ctxstore.StateColumns...)
	opts.Columns = appendEqColumns(opts.Columns, f)
	rdr, err := sn.Scan(ctx, opts)
	if err != nil {
		return err
	}
	defer rdr.Release()
	for rdr.Next() {
		rows := ctxstore.NewRows(rdr.RecordBatch())
		for i := 0; i < rows.Len(); i++ {
			if meet != nil {
				meet(rows.String(ctxstore.ColID, i))
			}
			v := rows.Embedding(i)
			if v == nil || !f.Live(rows, i) || !passesEq(rows, i, f) {
				continue
			}
			top.Push(rows.String(ctxstore.ColID, i), float64(e.dist(q, v)))
		}
	}
	return rdr.Err()
}

// appendEqColumns adds to cols the columns of f's equality filters it lacks.
func appendEqColumns(cols []string, f ctxstore.Filter) []string {
	for _, e := range f.Eq {
		if !slices.Contains(cols, e.Column) {
			cols = append(cols, e.Column)
		}
	}
	return cols
}

// passesEq reports whether row i passes f's equality filters (the predicate f.SQL()
// pushes into scans, checked on rows read without it).
func passesEq(rows *ctxstore.Rows, i int, f ctxstore.Filter) bool {
	for _, e := range f.Eq {
		if v := rows.Str(e.Column, i); v == nil || *v != e.Value {
			return false
		}
	}
	return true
}

// indexCandidates is what the index gave one search.
type indexCandidates struct {
	// covered are the base fragments searched through the index.
	covered []uint64
	// live are the candidates that pass the filter's state checks, with their exact
	// distances; ids holds their ids.
	live []ctxstore.Candidate
	ids  map[string]bool
	// vecs are the stored vectors of the live candidates, from the index (l2 and dot
	// stores: the index keeps them as stored), for the answer's records.
	vecs map[string][]float32
	// bound: every covered row of the probed partitions that is not a candidate is at
	// least this far (by the index's distance); exhausted: there is no such row.
	bound     float64
	exhausted bool
}

// indexSource ranks the base fragments a vector index covers through it.
type indexSource struct {
	dist   ctxstore.Distance
	metric string
	cache  *vecindex.PartitionCache // nil: the index's own, per version
}

// candidates asks the index of base for at least k candidates that pass f (its
// equalities prefiltered in the index search, its state checks on the rows taken). It
// returns nil when base has no index usable in the store's metric, or when more than
// indexMaxCandidates would be needed.
//
// The candidates' columns are taken by row (lance/file reads only the rows' bytes where
// the page encoding allows: a vector, a mini-block chunk), and only those the checks
// read (Filter.LiveColumns). The index holds the stored vectors, so for l2 and dot
// stores they come from it (WithVectors) and the embedding is not taken at all. A
// cosine index holds normalized vectors: those stores take the embedding.
func (s indexSource) candidates(ctx context.Context, base *lance.Dataset, q []float32, f ctxstore.Filter, k int) (*indexCandidates, error) {
	fromIndex := s.metric != ctxstore.MetricCosine
	// Only what the state checks read: each column costs a read per candidate.
	cols := append([]string{lance.RowIDColumn, ctxstore.ColID}, f.LiveColumns()...)
	if !fromIndex {
		cols = append(cols, ctxstore.ColEmbedding)
	}
	var filter string
	if len(f.Eq) > 0 {
		filter = f.SQL()
	}
	for want := k + k/2 + 8; ; want *= 4 {
		if want > indexMaxCandidates {
			return nil, nil
		}
		res, err := base.VectorSearch(ctx, ctxstore.ColEmbedding, q, want, lance.VectorSearchOptions{
			Metric: s.metric, NProbes: contextSearchNProbes, IndexedOnly: true, Filter: filter, WithVectors: fromIndex,
			Cache: s.cache})
		if err != nil {
			return nil, err
		}
		if res.Index == "" {
			return nil, nil
		}
		out := &indexCandidates{covered: res.CoveredFragments, ids: map[string]bool{}, vecs: map[string][]float32{}, exhausted: len(res.Hits) < want}
		if len(res.Hits) == 0 {
			return out, nil
		}
		out.bound = float64(res.Hits[len(res.Hits)-1].Distance)
		rowIDs := make([]uint64, len(res.Hits))
		hitVecs := make(map[uint64][]float32, len(res.Hits))
		for i, h := range res.Hits {
			rowIDs[i] = h.RowID
			hitVecs[h.RowID] = h.Vector
		}
		rec, err := base.Take(ctx, rowIDs, cols)
		if err != nil {
			return nil, err
		}
		rows := ctxstore.NewRows(rec)
		var rid *array.Uint64
		if fromIndex {
			if ix := rec.Schema().FieldIndices(lance.RowIDColumn); len(ix) == 1 {
				rid, _ = rec.Column(ix[0]).(*array.Uint64)
			}
			if rid == nil {
				rec.Release()
				return nil, fmt.Errorf("context search: the take of the index's candidates has no %s column", lance.RowIDColumn)
			}
		}
		for i := 0; i < rows.Len(); i++ {
			var v []float32
			if fromIndex {
				v = hitVecs[rid.Value(i)]
			} else {
				v = rows.Embedding(i)
			}
			if v == nil || !f.Live(rows, i) {
				continue
			}
			id := rows.String(ctxstore.ColID, i)
			out.ids[id] = true
			out.live = append(out.live, ctxstore.Candidate{ID: id, Score: float64(s.dist(q, v))})
			if fromIndex {
				out.vecs[id] = v
			}
		}
		rec.Release()
		if len(out.live) >= k || out.exhausted {
			return out, nil
		}
	}
}

// rankVectors returns the k rows of sn nearest to q that f keeps (see the comment at
// the top of this file).
func (s *Server) rankVectors(ctx context.Context, h *handle, sn cxView, q []float32, f ctxstore.Filter, k int) (*ctxstore.TopK, error) {
	top, _, err := s.rankVectorsKnown(ctx, h, sn, q, f, k)
	return top, err
}

// rankVectorsKnown is rankVectors that also returns the stored vectors it already
// holds of base rows among the k (from the cache of decoded vectors or from the
// index), which the answer's records need and would otherwise read again from the data
// files. A row of the answer not in known is read whole.
func (s *Server) rankVectorsKnown(ctx context.Context, h *handle, sn cxView, q []float32, f ctxstore.Filter, k int) (*ctxstore.TopK, map[string][]float32, error) {
	top, known, err := s.rankVectorsInto(ctx, h, sn, q, f, k)
	if err != nil || known == nil {
		return top, nil, err
	}
	out := map[string][]float32{}
	for _, c := range top.Sorted() {
		if v, ok := known[c.ID]; ok {
			out[c.ID] = v
		}
	}
	return top, out, nil
}

func (s *Server) rankVectorsInto(ctx context.Context, h *handle, sn cxView, q []float32, f ctxstore.Filter, k int) (*ctxstore.TopK, map[string][]float32, error) {
	exact := exactSource{dist: h.cx.dist}
	top := ctxstore.NewTopK(k)
	ix, err := indexSource{dist: h.cx.dist, metric: h.cx.opts.DistanceMetric, cache: s.cxIndex}.candidates(ctx, sn.Base(), q, f, k)
	if err != nil {
		return nil, nil, err
	}
	if ix == nil {
		s.met.contextSearches.WithLabelValues("exact").Inc()
		if len(f.Eq) > 0 {
			return top, nil, exact.rank(ctx, sn, q, f, top) // the filter pushed into the scan
		}
		b, err := s.cxVecs.get(ctx, h.cx, sn.Base())
		if err != nil {
			return nil, nil, err
		}
		if b != nil {
			pos := map[string]int{}
			if err := exact.rankCached(ctx, sn, b, q, f, top, pos); err != nil {
				return nil, nil, err
			}
			known := make(map[string][]float32, len(pos))
			for id, i := range pos {
				known[id] = b.vecs[i*b.dim : (i+1)*b.dim]
			}
			return top, known, nil
		}
		return top, nil, exact.rank(ctx, sn, q, f, top)
	}
	seen := map[string]bool{}
	if err := exact.rankRest(ctx, sn, q, f, ix.covered, ix.ids, seen, top); err != nil {
		return nil, nil, err
	}
	valid := 0
	for _, c := range ix.live {
		if !seen[c.ID] {
			top.Push(c.ID, c.Score)
			valid++
		}
	}
	if ix.exhausted || valid >= k || top.Worst() < ix.bound {
		s.met.contextSearches.WithLabelValues("index").Inc()
		known := map[string][]float32{}
		for id, v := range ix.vecs {
			if !seen[id] {
				known[id] = v
			}
		}
		return top, known, nil
	}
	s.met.contextSearches.WithLabelValues("exact_fallback").Inc()
	// Too many of the index's candidates were rewritten in the WAL to be sure of the k
	// best: rank everything exactly.
	top = ctxstore.NewTopK(k)
	return top, nil, exact.rank(ctx, sn, q, f, top)
}

// searchLimit checks a request's limit (default 10).
func searchLimit(limit *int) (int, error) {
	if limit == nil {
		return 10, nil
	}
	if *limit < 1 || *limit > maxSearchLimit {
		return 0, api.InvalidRequest("limit: %d is out of range (1 to %d)", *limit, maxSearchLimit)
	}
	return *limit, nil
}

// checkVector refuses a query vector of another length than the store's dimension
// or with a value that is not finite.
func checkVector(field string, q []float32, dim int) error {
	if len(q) != dim {
		return api.InvalidRequest("%s: has %d values; the store's embedding_dim is %d", field, len(q), dim)
	}
	for i, v := range q {
		if v != v || v > maxFloat32 || v < -maxFloat32 {
			return api.InvalidRequest("%s[%d]: not a finite number", field, i)
		}
	}
	return nil
}

const maxFloat32 = 3.40282346638528859811704183484516925440e+38

// fetchRecords reads the records of ids (in order; ids gone meanwhile are
// skipped) projected for an answer.
func fetchRecords(ctx context.Context, sn cxView, h *handle, ids []string, relationships bool) (map[string]api.ContextRecord, error) {
	return fetchRecordsKnown(ctx, sn, h, ids, relationships, nil)
}

// fetchRecordsKnown is fetchRecords for ids some of whose current embeddings are known
// (rankVectorsKnown): those records are read without their embedding column (a read
// per row saved) and get the known vector.
func fetchRecordsKnown(ctx context.Context, sn cxView, h *handle, ids []string, relationships bool,
	known map[string][]float32) (map[string]api.ContextRecord, error) {
	cols := h.cx.opts.Projection(relationships)
	out := make(map[string]api.ContextRecord, len(ids))
	if len(known) > 0 {
		var with, without []string
		for _, id := range ids {
			if _, ok := known[id]; ok {
				without = append(without, id)
			} else {
				with = append(with, id)
			}
		}
		noEmb := slices.DeleteFunc(slices.Clone(cols), func(c string) bool { return c == ctxstore.ColEmbedding })
		if err := fetchInto(ctx, sn, without, noEmb, out); err != nil {
			return nil, err
		}
		for _, id := range without {
			if r, ok := out[id]; ok {
				r.Embedding = slices.Clone(known[id])
				out[id] = r
			}
		}
		ids = with
	}
	return out, fetchInto(ctx, sn, ids, cols, out)
}

// fetchInto reads the records of ids with cols into out.
func fetchInto(ctx context.Context, sn cxView, ids, cols []string, out map[string]api.ContextRecord) error {
	if len(ids) == 0 {
		return nil
	}
	recs, err := sn.GetMany(ctx, ids, cols)
	if err != nil {
		return err
	}
	var ferr error
	for _, rec := range recs {
		if rec == nil {
			continue
		}
		if ferr == nil {
			r, err := ctxstore.NewRows(rec).Record(0)
			if err != nil {
				ferr = err
			} else {
				out[r.ID] = r
			}
		}
		rec.Release()
	}
	return ferr
}

func (s *Server) handleContextSearch(w http.ResponseWriter, r *http.Request) {
	var req api.SearchContextRequest
	name, err := s.contextBody(r, &req)
	var limit int
	if err == nil {
		limit, err = searchLimit(req.Limit)
	}
	if err == nil && req.Query == nil {
		err = api.InvalidRequest("query: the query vector is required")
	}
	var f ctxstore.Filter
	if err == nil {
		f, err = ctxstore.FromAPI(req.Filters, req.IncludeExpired, req.IncludeRetired, s.cfg.Now())
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ctx := r.Context()
	out := api.SearchContextResponse{Results: []api.SearchContextResult{}}
	err = s.contextRead(ctx, name, func(h *handle, sn cxView) error {
		if err := checkVector("query", req.Query, h.cx.opts.EmbeddingDim); err != nil {
			return err
		}
		top, known, err := s.rankVectorsKnown(ctx, h, sn, req.Query, f, limit)
		if err != nil {
			return err
		}
		best := top.Sorted()
		ids := make([]string, len(best))
		for i, c := range best {
			ids[i] = c.ID
		}
		recs, err := fetchRecordsKnown(ctx, sn, h, ids, req.IncludeRelationships, known)
		if err != nil {
			return err
		}
		out.Results = out.Results[:0]
		for _, c := range best {
			if rec, ok := recs[c.ID]; ok {
				out.Results = append(out.Results, api.SearchContextResult{Record: rec, Distance: float32(c.Score)})
			}
		}
		return nil
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	api.WriteJSON(w, http.StatusOK, out)
}

// retrieveDepth is how many candidates each channel ranks before fusion: enough
// that a record ranked low in one channel but high in the other still fuses in.
func retrieveDepth(limit int) int { return max(4*limit, 50) }

func (s *Server) handleContextRetrieve(w http.ResponseWriter, r *http.Request) {
	var req api.RetrieveContextRequest
	name, err := s.contextBody(r, &req)
	var limit int
	if err == nil {
		limit, err = searchLimit(req.Limit)
	}
	if err == nil && req.Fusion != "" && req.Fusion != "rrf" {
		err = api.InvalidRequest("fusion: %s is not supported; rrf is", api.QuoteTrunc(req.Fusion, 40))
	}
	if err == nil && req.Text == nil && req.Vector == nil {
		err = api.InvalidRequest("give text, vector or both")
	}
	var bm *ctxstore.BM25
	if err == nil && req.Text != nil {
		if len(*req.Text) > 64<<10 {
			err = api.InvalidRequest("text: is %d bytes; the limit is %d", len(*req.Text), 64<<10)
		} else if bm = ctxstore.NewBM25(*req.Text); bm.Empty() && req.Vector == nil {
			err = api.InvalidRequest("text: has no terms (letters or digits) and there is no vector")
		}
	}
	var f ctxstore.Filter
	if err == nil {
		f, err = ctxstore.FromAPI(req.Filters, req.IncludeExpired, req.IncludeRetired, s.cfg.Now())
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ctx := r.Context()
	depth := retrieveDepth(limit)
	out := api.RetrieveContextResponse{Results: []api.RetrieveContextResult{}}
	err = s.contextRead(ctx, name, func(h *handle, sn cxView) error {
		if req.Vector != nil {
			if err := checkVector("vector", req.Vector, h.cx.opts.EmbeddingDim); err != nil {
				return err
			}
		}
		var vecList, textList []string
		dists := map[string]float32{}
		if req.Vector != nil {
			top, err := s.rankVectors(ctx, h, sn, req.Vector, f, depth)
			if err != nil {
				return err
			}
			for _, c := range top.Sorted() {
				vecList = append(vecList, c.ID)
				dists[c.ID] = float32(c.Score)
			}
		}
		texts := map[string]float64{}
		if bm != nil && !bm.Empty() {
			// A fresh corpus per attempt: a read retried on a newer snapshot counts again.
			best, err := s.rankText(ctx, sn, ctxstore.NewBM25(*req.Text), f, depth)
			if err != nil {
				return err
			}
			for _, c := range best {
				textList = append(textList, c.ID)
				texts[c.ID] = c.Score
			}
		}
		fused := ctxstore.FuseRRF(vecList, textList)
		if len(fused) > limit {
			fused = fused[:limit]
		}
		ids := make([]string, len(fused))
		for i, fu := range fused {
			ids[i] = fu.ID
		}
		recs, err := fetchRecords(ctx, sn, h, ids, req.IncludeRelationships)
		if err != nil {
			return err
		}
		out.Results = out.Results[:0]
		for _, fu := range fused {
			rec, ok := recs[fu.ID]
			if !ok {
				continue
			}
			res := api.RetrieveContextResult{Record: rec, Score: fu.Score, MatchedChannels: []string{}}
			if fu.Ranks[0] > 0 {
				d := dists[fu.ID]
				res.VectorDistance = &d
				res.MatchedChannels = append(res.MatchedChannels, "vector")
			}
			if fu.Ranks[1] > 0 {
				t := texts[fu.ID]
				res.TextScore = &t
				res.MatchedChannels = append(res.MatchedChannels, "text")
			}
			out.Results = append(out.Results, res)
		}
		return nil
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	api.WriteJSON(w, http.StatusOK, out)
}

// textCorpus adds the text of every live row the filter keeps to bm: the BM25
// corpus is what the query may rank (its statistics, N and avgdl, are of it).
func textCorpus(ctx context.Context, sn cxView, f ctxstore.Filter, bm *ctxstore.BM25) error {
	cols := append([]string{ctxstore.ColID, ctxstore.ColTextPayload}, ctxstore.StateColumns...)
	rdr, err := sn.Scan(ctx, wal.ScanOptions{Columns: cols, Filter: f.SQL()})
	if err != nil {
		return err
	}
	defer rdr.Release()
	for rdr.Next() {
		rows := ctxstore.NewRows(rdr.RecordBatch())
		for i := 0; i < rows.Len(); i++ {
			t := rows.Str(ctxstore.ColTextPayload, i)
			if t == nil || !f.Live(rows, i) {
				continue
			}
			bm.Add(rows.String(ctxstore.ColID, i), *t)
		}
	}
	return rdr.Err()
}
