package worker

import (
	"context"
	"net/http"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/ctxstore"
	"github.com/lancectx/lancectx/wal"
)

// Search of context stores: exact k-nearest neighbours and hybrid retrieval over
// one snapshot, the base table and the write-ahead log together (a record acked to
// this worker is ranked from its ack on).
//
// The seam for an approximate index. A search ranks candidates from vectorSources;
// today the only one is exactSource, a full scan of the snapshot. An IVF index
// (another issue) adds a source that ranks the live rows of the base fragments it
// covers, and the exact source is then narrowed to the rows the index does not
// cover (the newer fragments and the pending generations and memtable). The two
// lists merge in one TopK. What an index source must respect, and the exact scan
// gets from wal.Snapshot.Scan: (1) rows a newer source shadows (the same id
// rewritten in the WAL: an upsert, a patch, a delete) are not candidates; (2) the
// filter applies before ranking; (3) distances are the store's metric
// (ctxstore.DistanceFor).

// maxSearchLimit bounds the k of one search or retrieve.
const maxSearchLimit = 1000

// vectorSource ranks some rows of a snapshot into top.
type vectorSource interface {
	rank(ctx context.Context, sn cxView, q []float32, f ctxstore.Filter, top *ctxstore.TopK) error
}

// exactSource ranks every live row of the snapshot with an embedding by its exact
// distance to q.
type exactSource struct{ dist ctxstore.Distance }

func (e exactSource) rank(ctx context.Context, sn cxView, q []float32, f ctxstore.Filter, top *ctxstore.TopK) error {
	cols := append([]string{ctxstore.ColID, ctxstore.ColEmbedding}, ctxstore.StateColumns...)
	rdr, err := sn.Scan(ctx, wal.ScanOptions{Columns: cols, Filter: f.SQL()})
	if err != nil {
		return err
	}
	defer rdr.Release()
	for rdr.Next() {
		rows := ctxstore.NewRows(rdr.RecordBatch())
		for i := 0; i < rows.Len(); i++ {
			v := rows.Embedding(i)
			if v == nil || !f.Live(rows, i) {
				continue
			}
			top.Push(rows.String(ctxstore.ColID, i), float64(e.dist(q, v)))
		}
	}
	return rdr.Err()
}

// vectorSources are the sources a search of h ranks: the exact scan (the seam an
// index plugs into, see above).
func vectorSources(h *handle) []vectorSource {
	return []vectorSource{exactSource{dist: h.cx.dist}}
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
		top := ctxstore.NewTopK(limit)
		for _, src := range vectorSources(h) {
			if err := src.rank(ctx, sn, req.Query, f, top); err != nil {
				return err
			}
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
			top := ctxstore.NewTopK(depth)
			for _, src := range vectorSources(h) {
				if err := src.rank(ctx, sn, req.Vector, f, top); err != nil {
					return err
				}
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
