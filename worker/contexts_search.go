package worker

import (
	"context"
	"net/http"
	"slices"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/ctxstore"
	"github.com/lancectx/lancectx/lance"
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
	// bound: every covered row of the probed partitions that is not a candidate is at
	// least this far (by the index's distance); exhausted: there is no such row.
	bound     float64
	exhausted bool
}

// indexSource ranks the base fragments a vector index covers through it.
type indexSource struct {
	dist   ctxstore.Distance
	metric string
}

// candidates asks the index of base for at least k candidates that pass f (its
// equalities prefiltered in the index search, its state checks on the rows taken). It
// returns nil when base has no index usable in the store's metric, or when more than
// indexMaxCandidates would be needed.
func (s indexSource) candidates(ctx context.Context, base *lance.Dataset, q []float32, f ctxstore.Filter, k int) (*indexCandidates, error) {
	cols := append([]string{lance.RowIDColumn, ctxstore.ColID, ctxstore.ColEmbedding}, ctxstore.StateColumns...)
	var filter string
	if len(f.Eq) > 0 {
		filter = f.SQL()
	}
	for want := k + k/2 + 8; ; want *= 4 {
		if want > indexMaxCandidates {
			return nil, nil
		}
		res, err := base.VectorSearch(ctx, ctxstore.ColEmbedding, q, want, lance.VectorSearchOptions{
			Metric: s.metric, NProbes: contextSearchNProbes, IndexedOnly: true, Filter: filter})
		if err != nil {
			return nil, err
		}
		if res.Index == "" {
			return nil, nil
		}
		out := &indexCandidates{covered: res.CoveredFragments, ids: map[string]bool{}, exhausted: len(res.Hits) < want}
		if len(res.Hits) == 0 {
			return out, nil
		}
		out.bound = float64(res.Hits[len(res.Hits)-1].Distance)
		rowIDs := make([]uint64, len(res.Hits))
		for i, h := range res.Hits {
			rowIDs[i] = h.RowID
		}
		rec, err := base.Take(ctx, rowIDs, cols)
		if err != nil {
			return nil, err
		}
		rows := ctxstore.NewRows(rec)
		for i := 0; i < rows.Len(); i++ {
			v := rows.Embedding(i)
			if v == nil || !f.Live(rows, i) {
				continue
			}
			id := rows.String(ctxstore.ColID, i)
			out.ids[id] = true
			out.live = append(out.live, ctxstore.Candidate{ID: id, Score: float64(s.dist(q, v))})
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
	exact := exactSource{dist: h.cx.dist}
	top := ctxstore.NewTopK(k)
	ix, err := indexSource{dist: h.cx.dist, metric: h.cx.opts.DistanceMetric}.candidates(ctx, sn.Base(), q, f, k)
	if err != nil {
		return nil, err
	}
	if ix == nil {
		s.met.contextSearches.WithLabelValues("exact").Inc()
		if len(f.Eq) > 0 {
			return top, exact.rank(ctx, sn, q, f, top) // the filter pushed into the scan
		}
		b, err := s.cxVecs.get(ctx, h.cx, sn.Base())
		if err != nil {
			return nil, err
		}
		if b != nil {
			return top, exact.rankCached(ctx, sn, b, q, f, top)
		}
		return top, exact.rank(ctx, sn, q, f, top)
	}
	seen := map[string]bool{}
	if err := exact.rankRest(ctx, sn, q, f, ix.covered, ix.ids, seen, top); err != nil {
		return nil, err
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
		return top, nil
	}
	s.met.contextSearches.WithLabelValues("exact_fallback").Inc()
	// Too many of the index's candidates were rewritten in the WAL to be sure of the k
	// best: rank everything exactly.
	top = ctxstore.NewTopK(k)
	return top, exact.rank(ctx, sn, q, f, top)
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
	cols := h.cx.opts.Projection(relationships)
	recs, err := sn.GetMany(ctx, ids, cols)
	if err != nil {
		return nil, err
	}
	out := make(map[string]api.ContextRecord, len(ids))
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
	return out, ferr
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
		top, err := s.rankVectors(ctx, h, sn, req.Query, f, limit)
		if err != nil {
			return err
		}
		best := top.Sorted()
		ids := make([]string, len(best))
		for i, c := range best {
			ids[i] = c.ID
		}
		recs, err := fetchRecords(ctx, sn, h, ids, req.IncludeRelationships)
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
			if err := textCorpus(ctx, sn, f, bm); err != nil {
				return err
			}
			for i, c := range bm.Scores() {
				if i == depth {
					break
				}
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
