package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/ctxstore"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/wal"
)

// Context stores (/api/v1/contexts): agent memory (package ctxstore) on the same
// handles, WAL shards, merges and snapshots as the other kinds. Every write is sealed
// before its answer (the reference's seal-on-put default for contexts), so every
// worker's reads see it; this worker's reads and searches see it from the moment it
// is acked (the snapshot includes the local memtable).
//
// Writes that read what they replace (upserts, patches, deletes) reserve the keys
// they touch (external ids, ids) for their duration, so two concurrent writes cannot
// both supersede one record: the second gets a 409 and may retry. The reservation
// mutex is never held across I/O.

// cxState is a context handle's options, write reservations and compaction state.
type cxState struct {
	opts ctxstore.Options
	dist ctxstore.Distance

	mu               sync.Mutex
	busy             map[string]bool
	pinned           *lance.Dataset // the checked-out base version (nil: latest + WAL)
	compacting       bool
	lastCompaction   int64 // Unix ms, 0: never
	lastCompactError string
	totalCompactions int64
}

func openContext(h *handle, ds *lance.Dataset) error {
	o, err := ctxstore.FromArrow(ds.Schema().Arrow())
	if err != nil {
		return fmt.Errorf("%w: %w", errSchema, err)
	}
	dist, ok := ctxstore.DistanceFor(o.DistanceMetric)
	if !ok {
		return fmt.Errorf("%w: unknown distance_metric %q", errSchema, o.DistanceMetric)
	}
	h.cx = &cxState{opts: o, dist: dist, busy: map[string]bool{}}
	return nil
}

// checkContext is a context store's prepare: the table must still be the record
// schema of the options it was created with.
func checkContext(_ context.Context, ds *lance.Dataset, incarnation string) (*lance.Dataset, error) {
	if inc := wal.Incarnation(ds); inc != incarnation {
		return nil, fmt.Errorf("%w: the base table is incarnation %q, not %q", wal.ErrIncarnation, inc, incarnation)
	}
	if _, err := ctxstore.FromArrow(ds.Schema().Arrow()); err != nil {
		return nil, fmt.Errorf("%w: %w", errSchema, err)
	}
	return ds, nil
}

// reserve marks keys as written by one request; a key another request holds is a
// 409. release undoes it.
func (c *cxState) reserve(keys []string) (release func(), err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range keys {
		if c.busy[k] {
			kind, v, _ := strings.Cut(k, ":")
			return nil, api.Conflict("another write of the record with %s %s is in progress; retry", kind, api.QuoteTrunc(v, 100))
		}
	}
	for _, k := range keys {
		c.busy[k] = true
	}
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, k := range keys {
			delete(c.busy, k)
		}
	}, nil
}

func (s *Server) contextInfo(name string, ds *lance.Dataset) (api.ContextStoreInfo, error) {
	o, err := ctxstore.FromArrow(ds.Schema().Arrow())
	if err != nil {
		return api.ContextStoreInfo{}, fmt.Errorf("worker: context store %q: %w", name, err)
	}
	return api.ContextStoreInfo{Name: name, URI: s.storeURI(s.contexts, name), Version: ds.Version(), EmbeddingDim: o.EmbeddingDim,
		DistanceMetric: o.DistanceMetric, IDIndexType: o.IDIndexType, BlobColumns: o.BlobColumns}, nil
}

func (s *Server) handleContextCreate(w http.ResponseWriter, r *http.Request) {
	if _, err := api.Query(r); err != nil {
		s.fail(w, r, err)
		return
	}
	var req api.CreateContextStoreRequest
	if err := api.DecodeJSON(r, api.DefaultMaxBodyBytes, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := api.ValidateName(req.Name); err != nil {
		s.fail(w, r, err)
		return
	}
	if len(req.StorageOptions) > 0 {
		s.fail(w, r, api.InvalidRequest("storage_options are not supported: every store uses the worker's data directory settings"))
		return
	}
	o, err := ctxstore.ParseOptions(&req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ctx := r.Context()
	ds, err := s.createStore(ctx, s.contexts, req.Name, ctxstore.Schema(o))
	if ae, ok := api.AsError(err); ok && ae.Code == api.CodeAlreadyExists {
		err = ae
		if have, derr := s.describe(ctx, s.contexts, req.Name); derr == nil {
			if ho, ferr := ctxstore.FromArrow(have.Schema().Arrow()); ferr == nil {
				if d := ho.Diff(o); d != "" {
					err = api.AlreadyExists("context store %q already exists and was created with other options: %s", req.Name, d).WithCause(ae)
				}
			}
		}
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	info, err := s.contextInfo(req.Name, ds)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	api.WriteJSON(w, http.StatusCreated, info)
}

func (s *Server) handleContextStores(w http.ResponseWriter, r *http.Request) {
	if _, err := api.Query(r); err != nil {
		s.fail(w, r, err)
		return
	}
	names, err := s.contexts.reg.Names(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := api.ListContextStoresResponse{Contexts: make([]api.StoreSummary, 0, len(names))}
	for _, n := range names {
		out.Contexts = append(out.Contexts, api.StoreSummary{Name: n, URI: s.storeURI(s.contexts, n)})
	}
	api.WriteJSON(w, http.StatusOK, out)
}

func (s *Server) handleContextDescribe(w http.ResponseWriter, r *http.Request) {
	name, err := pathName(r)
	if err == nil {
		_, err = api.Query(r)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ds, err := s.describe(r.Context(), s.contexts, name)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	info, err := s.contextInfo(name, ds)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	api.WriteJSON(w, http.StatusOK, info)
}

func (s *Server) handleContextDelete(w http.ResponseWriter, r *http.Request) {
	s.deleteStore(w, r, s.contexts)
}

// contextBody reads a write's JSON body after checking the store exists (an unknown
// store is a 404 whatever the body), strictly decoded into v.
func (s *Server) contextBody(r *http.Request, v any) (string, error) {
	name, err := pathName(r)
	if err == nil {
		_, err = api.Query(r)
	}
	if err == nil {
		err = s.contexts.stores.known(r.Context(), name)
	}
	if err != nil {
		return "", err
	}
	if r.ContentLength > s.cfg.MaxBodyBytes {
		return "", api.PayloadTooLarge("request body is %d bytes, larger than the limit of %d bytes", r.ContentLength, s.cfg.MaxBodyBytes)
	}
	return name, api.DecodeJSON(r, s.cfg.MaxBodyBytes, v)
}

// contextWrite runs one durable write: it reserves keys, takes a snapshot (which
// includes this worker's acked rows), lets build decide the rows to append (nil:
// nothing to write), appends them as one WAL entry and seals it. It returns the base
// version the handle knows.
func (s *Server) contextWrite(ctx context.Context, name string, keys []string,
	build func(h *handle, sn cxView) ([]api.ContextRecord, error)) (uint64, error) {
	var version uint64
	err := s.withWriter(ctx, s.contexts, name, func(h *handle, sh *wal.Shard) error {
		if pin := h.cx.pinnedBase(); pin != nil {
			return errPinned(name, pin.Version())
		}
		release, err := h.cx.reserve(keys)
		if err != nil {
			return err
		}
		defer release()
		var rows []api.ContextRecord
		err = s.readRetry(ctx, h, func(sn *wal.Snapshot) error {
			rows, err = build(h, sn)
			return err
		})
		if err != nil {
			return err
		}
		if len(rows) > 0 {
			rec, err := ctxstore.ToRecord(rows, h.cx.opts)
			if err != nil {
				return err
			}
			defer rec.Release()
			if _, err := sh.Append(ctx, rec); err != nil {
				return err
			}
			fctx, cancel := context.WithTimeout(ctx, s.cfg.FlushTimeout)
			defer cancel()
			if err := sh.Flush(fctx); err != nil {
				return fmt.Errorf("records are durable but sealing them failed: %w", err)
			}
		}
		version = h.baseVersion.Load()
		return nil
	})
	if err != nil {
		return 0, s.toAPIError(ctx, err)
	}
	return version, nil
}

// normalizeAll checks the records of a write against the store's options (read from
// its handle: the embedding dimension), refusing an id given twice.
func (s *Server) normalizeAll(ctx context.Context, name string, in []api.AddContextRecord) ([]api.ContextRecord, error) {
	if len(in) == 0 {
		return nil, api.InvalidRequest("records must not be empty")
	}
	if len(in) > s.cfg.MaxRecords {
		return nil, api.PayloadTooLarge("records: %d records; at most %d per write; split the batch", len(in), s.cfg.MaxRecords)
	}
	var opts ctxstore.Options
	if err := s.withShard(ctx, s.contexts, name, func(h *handle) error { opts = h.cx.opts; return nil }); err != nil {
		return nil, err
	}
	now := s.cfg.Now()
	out := make([]api.ContextRecord, len(in))
	seen := make(map[string]int, len(in))
	for i := range in {
		rec, err := ctxstore.Normalize(fmt.Sprintf("records[%d]", i), &in[i], now, opts)
		if err != nil {
			return nil, err
		}
		if j, ok := seen[rec.ID]; ok {
			return nil, api.InvalidRequest("records[%d].id: %s is also records[%d]'s", i, api.QuoteTrunc(rec.ID, 100), j)
		}
		seen[rec.ID] = i
		out[i] = rec
	}
	return out, nil
}

func (s *Server) handleContextAdd(w http.ResponseWriter, r *http.Request) {
	var req api.AddContextRecordsRequest
	name, err := s.contextBody(r, &req)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ctx := r.Context()
	recs, err := s.normalizeAll(ctx, name, req.Records)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	keys := make([]string, len(recs))
	ids := make([]string, len(recs))
	for i := range recs {
		keys[i], ids[i] = "id:"+recs[i].ID, recs[i].ID
	}
	version, err := s.contextWrite(ctx, name, keys, func(*handle, cxView) ([]api.ContextRecord, error) { return recs, nil })
	if err != nil {
		s.fail(w, r, err)
		return
	}
	api.WriteJSON(w, http.StatusCreated, api.AddContextRecordsResponse{Version: version, IDs: ids, Count: len(ids), Durable: true, Visible: true})
}

// allColumns is every column of the store (rewrites keep every field).
func allColumns(o ctxstore.Options) []string {
	fs := ctxstore.Schema(o).Fields()
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Name
	}
	return out
}

// scanRecords decodes every row of the snapshot that the filter's SQL (and, when
// live is set, its state checks) keep, with the given columns.
func scanRecords(ctx context.Context, sn cxView, sql string, cols []string, keep func(*ctxstore.Rows, int) bool) ([]api.ContextRecord, error) {
	rdr, err := sn.Scan(ctx, wal.ScanOptions{Columns: cols, Filter: sql})
	if err != nil {
		return nil, err
	}
	defer rdr.Release()
	var out []api.ContextRecord
	for rdr.Next() {
		rows := ctxstore.NewRows(rdr.RecordBatch())
		for i := 0; i < rows.Len(); i++ {
			if keep != nil && !keep(rows, i) {
				continue
			}
			rec, err := rows.Record(i)
			if err != nil {
				return nil, err
			}
			out = append(out, rec)
		}
	}
	return out, rdr.Err()
}

// heads returns, per external id, its live head: the record of that external id that
// no upsert superseded (the newest created_at, then the largest id, if several).
func heads(ctx context.Context, sn cxView, o ctxstore.Options, exts []string) (map[string]api.ContextRecord, error) {
	if len(exts) == 0 {
		return map[string]api.ContextRecord{}, nil
	}
	quoted := make([]string, len(exts))
	for i, e := range exts {
		quoted[i] = sqlString(e)
	}
	sql := ctxstore.ColContentType + " != " + sqlString(ctxstore.ContentTypeTombstone) + " AND " + ctxstore.ColExternalID +
		" IN (" + strings.Join(quoted, ",") + ")"
	recs, err := scanRecords(ctx, sn, sql, allColumns(o), nil)
	if err != nil {
		return nil, err
	}
	out := map[string]api.ContextRecord{}
	for _, r := range recs {
		if r.SupersededByID != nil || r.ExternalID == nil {
			continue
		}
		cur, ok := out[*r.ExternalID]
		if !ok || r.CreatedAt.After(cur.CreatedAt) || (r.CreatedAt.Equal(cur.CreatedAt) && r.ID > cur.ID) {
			out[*r.ExternalID] = r
		}
	}
	return out, nil
}

// upsert writes recs (normalized, each with an external id) superseding each
// external id's live head: the new row gets supersedes_id, the old row is written
// again with superseded_by_id and lifecycle_status superseded. One WAL entry.
func (s *Server) upsert(ctx context.Context, name string, recs []api.ContextRecord) (uint64, []api.UpsertContextResult, error) {
	keys := make([]string, 0, 2*len(recs))
	exts := make([]string, len(recs))
	seen := map[string]int{}
	for i, r := range recs {
		if r.ExternalID == nil {
			return 0, nil, api.InvalidRequest("records[%d].external_id: an upsert needs the record's external_id", i)
		}
		if j, ok := seen[*r.ExternalID]; ok {
			return 0, nil, api.InvalidRequest("records[%d].external_id: %s is also records[%d]'s", i, api.QuoteTrunc(*r.ExternalID, 100), j)
		}
		seen[*r.ExternalID] = i
		exts[i] = *r.ExternalID
		keys = append(keys, "external_id:"+*r.ExternalID, "id:"+r.ID)
	}
	var results []api.UpsertContextResult
	version, err := s.contextWrite(ctx, name, keys, func(h *handle, sn cxView) ([]api.ContextRecord, error) {
		hs, err := heads(ctx, sn, h.cx.opts, exts)
		if err != nil {
			return nil, err
		}
		if results != nil && appliedAlready(recs, exts, hs) {
			// A retry (withWriter reopened a fenced shard) after the first attempt's
			// entry was written: every new record is its external id's head already.
			return nil, nil
		}
		now := s.cfg.Now().UTC()
		results = make([]api.UpsertContextResult, len(recs))
		var rows []api.ContextRecord
		for i, r := range recs {
			old, ok := hs[exts[i]]
			res := api.UpsertContextResult{Inserted: !ok}
			if ok {
				if old.ID == r.ID {
					return nil, api.InvalidRequest("records[%d].id: %s is the record it would supersede; leave id out or give a new one", i, api.QuoteTrunc(r.ID, 100))
				}
				oldID, newID := old.ID, r.ID
				r.SupersedesID = &oldID
				reason := "superseded by " + newID
				old.SupersededByID, old.LifecycleStatus, old.RetiredAt, old.RetiredReason = &newID, ctxstore.StatusSuperseded, &now, &reason
				res.ReplacedID = &oldID
				rows = append(rows, old)
			}
			res.Record = r
			rows = append(rows, r)
			results[i] = res
		}
		return rows, nil
	})
	return version, results, err
}

// appliedAlready reports whether every record of recs is already the head of its
// external id (the write of an earlier attempt of the same request).
func appliedAlready(recs []api.ContextRecord, exts []string, hs map[string]api.ContextRecord) bool {
	for i, r := range recs {
		if h, ok := hs[exts[i]]; !ok || h.ID != r.ID {
			return false
		}
	}
	return true
}

func upsertKey(key string) error {
	if key != "" && key != ctxstore.ColExternalID {
		return api.InvalidRequest("key: %s is not supported; upserts match on external_id", api.QuoteTrunc(key, 60))
	}
	return nil
}

func (s *Server) handleContextUpsert(w http.ResponseWriter, r *http.Request) {
	var req api.UpsertContextRecordRequest
	name, err := s.contextBody(r, &req)
	if err == nil {
		err = upsertKey(req.Key)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ctx := r.Context()
	recs, err := s.normalizeAll(ctx, name, []api.AddContextRecord{req.Record})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	version, res, err := s.upsert(ctx, name, recs)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	api.WriteJSON(w, http.StatusOK, api.UpsertContextRecordResponse{Version: version, Inserted: res[0].Inserted,
		ReplacedID: res[0].ReplacedID, Record: res[0].Record})
}

func (s *Server) handleContextUpsertBatch(w http.ResponseWriter, r *http.Request) {
	var req api.UpsertContextRecordsRequest
	name, err := s.contextBody(r, &req)
	if err == nil {
		err = upsertKey(req.Key)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ctx := r.Context()
	recs, err := s.normalizeAll(ctx, name, req.Records)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	version, res, err := s.upsert(ctx, name, recs)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	api.WriteJSON(w, http.StatusOK, api.UpsertContextRecordsResponse{Version: version, Results: res})
}

// getRecord reads the newest row of id with every column; ok is false when absent
// or deleted.
func getRecord(ctx context.Context, sn cxView, o ctxstore.Options, id string) (api.ContextRecord, bool, error) {
	rec, ok, err := sn.Get(ctx, id, allColumns(o))
	if err != nil || !ok {
		return api.ContextRecord{}, false, err
	}
	defer rec.Release()
	rows := ctxstore.NewRows(rec)
	if rows.String(ctxstore.ColContentType, 0) == ctxstore.ContentTypeTombstone {
		return api.ContextRecord{}, false, nil
	}
	out, err := rows.Record(0)
	return out, err == nil, err
}

var patchDecoder = api.NewJSONDecoder(&api.ContextRecordFields{}).WithRoot("patch")

func (s *Server) handleContextPatch(w http.ResponseWriter, r *http.Request) {
	var req api.PatchContextRecordRequest
	name, err := s.contextBody(r, &req)
	if err == nil && (req.ID == nil) == (req.ExternalID == nil) {
		err = api.InvalidRequest("give exactly one of id and external_id")
	}
	if err == nil && req.ID != nil {
		err = api.ValidateIDField("id", *req.ID)
	}
	if err == nil && req.ExternalID != nil {
		err = api.ValidateIDField("external_id", *req.ExternalID)
	}
	var patch map[string]jsonRaw
	if err == nil {
		patch, err = parsePatch(req.Patch)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	key := "id:"
	if req.ID != nil {
		key += *req.ID
	} else {
		key = "external_id:" + *req.ExternalID
	}
	ctx := r.Context()
	var out *api.ContextRecord
	version, err := s.contextWrite(ctx, name, []string{key}, func(h *handle, sn cxView) ([]api.ContextRecord, error) {
		var old api.ContextRecord
		var ok bool
		var err error
		if req.ID != nil {
			old, ok, err = getRecord(ctx, sn, h.cx.opts, *req.ID)
		} else {
			var hs map[string]api.ContextRecord
			hs, err = heads(ctx, sn, h.cx.opts, []string{*req.ExternalID})
			old, ok = hs[*req.ExternalID]
		}
		if err != nil || !ok {
			return nil, err
		}
		next, err := applyPatch(old, patch, s.cfg.Now(), h.cx.opts)
		if err != nil {
			return nil, err
		}
		out = &next
		return []api.ContextRecord{next}, nil
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	api.WriteJSON(w, http.StatusOK, api.PatchContextRecordResponse{Version: version, Updated: out != nil, Record: out})
}

// tombstone is the row that deletes rec: same id, run_id, created_at and external_id
// (so lookups by external id pass over it), the tombstone content type, no payloads.
func tombstone(rec api.ContextRecord, now time.Time) api.ContextRecord {
	t := api.ContextRecord{ID: rec.ID, CreatedAt: rec.CreatedAt, SupersedesID: rec.SupersedesID, SupersededByID: rec.SupersededByID}
	t.RunID, t.ExternalID, t.Role = rec.RunID, rec.ExternalID, rec.Role
	t.ContentType, t.LifecycleStatus = ctxstore.ContentTypeTombstone, ctxstore.StatusRetired
	reason := "deleted"
	t.RetiredAt, t.RetiredReason = &now, &reason
	return t
}

func (s *Server) handleContextDeleteByExternalID(w http.ResponseWriter, r *http.Request) {
	name, err := pathName(r)
	var ext string
	if err == nil {
		var q map[string][]string
		q, err = api.Query(r, "external_id")
		if err == nil {
			ext, err = api.QueryString(q, "external_id")
		}
	}
	if err == nil {
		err = api.ValidateIDField("external_id", ext)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ctx := r.Context()
	n := 0
	version, err := s.contextWrite(ctx, name, []string{"external_id:" + ext}, func(h *handle, sn cxView) ([]api.ContextRecord, error) {
		sql := ctxstore.ColContentType + " != " + sqlString(ctxstore.ContentTypeTombstone) + " AND " + ctxstore.ColExternalID + " = " + sqlString(ext)
		recs, err := scanRecords(ctx, sn, sql, allColumns(h.cx.opts), nil)
		if err != nil {
			return nil, err
		}
		now := s.cfg.Now().UTC()
		out := make([]api.ContextRecord, len(recs))
		for i, rec := range recs {
			out[i] = tombstone(rec, now)
		}
		n = len(out)
		return out, nil
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	api.WriteJSON(w, http.StatusOK, api.DeleteContextRecordsResponse{Deleted: n, Version: version})
}

func (s *Server) handleContextDeleteRecord(w http.ResponseWriter, r *http.Request) {
	name, id, err := pathNameID(r)
	if err == nil {
		_, err = api.Query(r)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ctx := r.Context()
	n := 0
	version, err := s.contextWrite(ctx, name, []string{"id:" + id}, func(h *handle, sn cxView) ([]api.ContextRecord, error) {
		rec, ok, err := getRecord(ctx, sn, h.cx.opts, id)
		if err != nil || !ok {
			return nil, err
		}
		n = 1
		return []api.ContextRecord{tombstone(rec, s.cfg.Now().UTC())}, nil
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	api.WriteJSON(w, http.StatusOK, api.DeleteContextRecordsResponse{Deleted: n, Version: version})
}

// contextRead runs f on a snapshot of the store, or on the version it is checked
// out at.
func (s *Server) contextRead(ctx context.Context, name string, f func(h *handle, sn cxView) error) error {
	err := s.withShard(ctx, s.contexts, name, func(h *handle) error {
		if pin := h.cx.pinnedBase(); pin != nil {
			return f(h, pinnedView{pin})
		}
		return s.readRetry(ctx, h, func(sn *wal.Snapshot) error { return f(h, sn) })
	})
	return s.toAPIError(ctx, err)
}

// project clears what a read was not asked for: blob columns (never in list and
// search answers) and relationships unless asked for.
func project(rec *api.ContextRecord, o ctxstore.Options, relationships bool) {
	if o.IsBlob(ctxstore.ColTextPayload) {
		rec.TextPayload = nil
	}
	if o.IsBlob(ctxstore.ColBinaryPayload) {
		rec.BinaryPayload = nil
	}
	if !relationships {
		rec.Relationships = nil
	}
}

func (s *Server) handleContextGet(w http.ResponseWriter, r *http.Request) {
	name, id, err := pathNameID(r)
	if err == nil {
		_, err = api.Query(r)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var out api.GetContextRecordResponse
	err = s.contextRead(r.Context(), name, func(h *handle, sn cxView) error {
		rec, ok, err := getRecord(r.Context(), sn, h.cx.opts, id)
		if ok {
			out.Record = &rec
		}
		return err
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	api.WriteJSON(w, http.StatusOK, out)
}

func (s *Server) handleContextGetByExternalID(w http.ResponseWriter, r *http.Request) {
	name, err := pathName(r)
	var ext string
	if err == nil {
		var q map[string][]string
		q, err = api.Query(r, "external_id")
		if err == nil {
			ext, err = api.QueryString(q, "external_id")
		}
	}
	if err == nil {
		err = api.ValidateIDField("external_id", ext)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var out api.GetContextRecordResponse
	err = s.contextRead(r.Context(), name, func(h *handle, sn cxView) error {
		hs, err := heads(r.Context(), sn, h.cx.opts, []string{ext})
		if rec, ok := hs[ext]; ok {
			out.Record = &rec
		}
		return err
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	api.WriteJSON(w, http.StatusOK, out)
}

var filtersDecoder = api.NewJSONDecoder(&api.ContextFilters{}).WithRoot("filters")

// readQuery is the query of the list and related routes.
type readQuery struct {
	limit, offset int
	filter        ctxstore.Filter
	relationships bool
}

func (s *Server) parseReadQuery(r *http.Request, extra ...string) (readQuery, map[string][]string, error) {
	q, err := api.Query(r, append([]string{"limit", "offset", "filters", "include_expired", "include_retired", "include_relationships"}, extra...)...)
	if err != nil {
		return readQuery{}, nil, err
	}
	var rq readQuery
	limit, err := api.QueryInt(q, "limit", 100, 1, int64(s.cfg.ListMaxRows))
	if err != nil {
		return rq, nil, err
	}
	offset, err := api.QueryInt(q, "offset", 0, 0, MaxListOffset)
	if err != nil {
		return rq, nil, err
	}
	rq.limit, rq.offset = int(limit), int(offset)
	var f *api.ContextFilters
	text, err := api.QueryString(q, "filters")
	if err != nil {
		return rq, nil, err
	}
	if text != "" {
		f = &api.ContextFilters{}
		if err := filtersDecoder.Unmarshal([]byte(text), f); err != nil {
			return rq, nil, err
		}
	}
	expired, err := api.QueryBool(q, "include_expired", false)
	if err != nil {
		return rq, nil, err
	}
	retired, err := api.QueryBool(q, "include_retired", false)
	if err != nil {
		return rq, nil, err
	}
	if rq.relationships, err = api.QueryBool(q, "include_relationships", false); err != nil {
		return rq, nil, err
	}
	rq.filter, err = ctxstore.FromAPI(f, expired, retired, s.cfg.Now())
	return rq, q, err
}

func (s *Server) handleContextList(w http.ResponseWriter, r *http.Request) {
	name, err := pathName(r)
	var rq readQuery
	if err == nil {
		rq, _, err = s.parseReadQuery(r)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := api.ListContextRecordsResponse{Records: []api.ContextRecord{}}
	err = s.contextRead(r.Context(), name, func(h *handle, sn cxView) error {
		skip := rq.offset
		out.Records = out.Records[:0]
		recs, err := scanRecords(r.Context(), sn, rq.filter.SQL(), h.cx.opts.Projection(rq.relationships), func(rows *ctxstore.Rows, i int) bool {
			if !rq.filter.Live(rows, i) {
				return false
			}
			if skip > 0 {
				skip--
				return false
			}
			return true
		})
		if len(recs) > rq.limit {
			recs = recs[:rq.limit]
		}
		out.Records = append(out.Records, recs...)
		return err
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	api.WriteJSON(w, http.StatusOK, out)
}

// handleContextRelated lists the records that relate to target_id (they hold a
// relationship whose target is it, of the given relation when one is given): the
// incoming edges of the record graph, one hop.
func (s *Server) handleContextRelated(w http.ResponseWriter, r *http.Request) {
	name, err := pathName(r)
	var rq readQuery
	var q map[string][]string
	var target, relation string
	if err == nil {
		rq, q, err = s.parseReadQuery(r, "target_id", "relation")
	}
	if err == nil {
		target, err = api.QueryString(q, "target_id")
	}
	if err == nil {
		err = api.ValidateIDField("target_id", target)
	}
	if err == nil {
		relation, err = api.QueryString(q, "relation")
	}
	if err == nil && relation != "" {
		err = api.ValidateIDField("relation", relation)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := api.ListContextRecordsResponse{Records: []api.ContextRecord{}}
	err = s.contextRead(r.Context(), name, func(h *handle, sn cxView) error {
		skip := rq.offset
		var relErr error
		recs, err := scanRecords(r.Context(), sn, rq.filter.SQL(), h.cx.opts.Projection(true), func(rows *ctxstore.Rows, i int) bool {
			if relErr != nil || !rq.filter.Live(rows, i) {
				return false
			}
			rels, err := rows.Relationships(i)
			if err != nil {
				relErr = err
				return false
			}
			for _, rel := range rels {
				if rel.TargetID == target && (relation == "" || rel.Relation == relation) {
					if skip > 0 {
						skip--
						return false
					}
					return true
				}
			}
			return false
		})
		if len(recs) > rq.limit {
			recs = recs[:rq.limit]
		}
		for i := range recs {
			project(&recs[i], h.cx.opts, rq.relationships)
		}
		out.Records = recs
		if out.Records == nil {
			out.Records = []api.ContextRecord{}
		}
		if err == nil {
			err = relErr
		}
		return err
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	api.WriteJSON(w, http.StatusOK, out)
}

// handleContextPayload answers a record's payload bytes: its binary_payload. A
// record whose payload lives at payload_uri only is a 404 naming it: lancectx does
// not fetch objects outside its data directory (a deviation from the reference).
func (s *Server) handleContextPayload(w http.ResponseWriter, r *http.Request) {
	name, id, err := pathNameID(r)
	if err == nil {
		_, err = api.Query(r)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var body []byte
	err = s.contextRead(r.Context(), name, func(h *handle, sn cxView) error {
		rec, ok, err := getRecord(r.Context(), sn, h.cx.opts, id)
		switch {
		case err != nil:
			return err
		case !ok:
			return api.NotFound("record %s does not exist in context store %q", api.QuoteTrunc(id, 100), name)
		case rec.BinaryPayload != nil:
			body = rec.BinaryPayload
			return nil
		case rec.PayloadURI != nil:
			return api.NotFound("record %s has no stored payload; its payload is at %s, which lancectx does not fetch", api.QuoteTrunc(id, 100), api.QuoteTrunc(*rec.PayloadURI, 200))
		}
		return api.NotFound("record %s has no payload", api.QuoteTrunc(id, 100))
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

func (s *Server) handleContextVersion(w http.ResponseWriter, r *http.Request) {
	name, err := pathName(r)
	if err == nil {
		_, err = api.Query(r)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var v uint64
	err = s.contextRead(r.Context(), name, func(_ *handle, sn cxView) error { v = sn.Base().Version(); return nil })
	if err != nil {
		s.fail(w, r, err)
		return
	}
	api.WriteJSON(w, http.StatusOK, api.ContextVersionResponse{Version: v})
}

func (s *Server) handleContextCompact(w http.ResponseWriter, r *http.Request) {
	var req api.ContextCompactRequest
	name, err := s.contextBody(r, &req)
	if err == nil && req.TargetRowsPerFragment != nil && (*req.TargetRowsPerFragment < 1 || *req.TargetRowsPerFragment > 1<<30) {
		err = api.InvalidRequest("target_rows_per_fragment: %d is out of range (1 to %d)", *req.TargetRowsPerFragment, 1<<30)
	}
	if err == nil && req.MaterializeDeletions != nil && (*req.MaterializeDeletions < 0 || *req.MaterializeDeletions > 1) {
		err = api.InvalidRequest("materialize_deletions: %v is out of range (a fraction 0 to 1)", *req.MaterializeDeletions)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ctx := r.Context()
	var out api.ContextCompactResponse
	err = s.withShard(ctx, s.contexts, name, func(h *handle) error {
		c := h.cx
		c.mu.Lock()
		if c.pinned != nil {
			v := c.pinned.Version()
			c.mu.Unlock()
			return errPinned(name, v)
		}
		if c.compacting {
			c.mu.Unlock()
			return &api.Error{Status: http.StatusConflict, Code: "COMPACTION_IN_PROGRESS", Message: "Compaction already in progress"}
		}
		c.compacting = true
		c.mu.Unlock()
		res, err := s.compactContext(ctx, h, req)
		c.mu.Lock()
		defer c.mu.Unlock()
		c.compacting = false
		if err != nil {
			c.lastCompactError = err.Error()
			return err
		}
		c.lastCompactError = ""
		c.lastCompaction = s.cfg.Now().UnixMilli()
		c.totalCompactions++
		out = api.ContextCompactResponse{FragmentsRemoved: res.FragmentsRemoved, FragmentsAdded: res.FragmentsAdded,
			FilesRemoved: res.FilesRemoved, FilesAdded: res.FilesAdded, Version: res.Version}
		return nil
	})
	if err != nil {
		s.fail(w, r, s.toAPIError(ctx, err))
		return
	}
	api.WriteJSON(w, http.StatusOK, out)
}

// compactContext compacts the latest base table (as the master's compact task does;
// Lance's commit protocol rebases it over merges that land meanwhile).
func (s *Server) compactContext(ctx context.Context, h *handle, req api.ContextCompactRequest) (lance.CompactResult, error) {
	ds, err := lance.OpenStore(ctx, h.st)
	if err != nil {
		return lance.CompactResult{}, err
	}
	if wal.Incarnation(ds) != h.entry.Incarnation {
		return lance.CompactResult{}, wal.ErrIncarnation
	}
	o := lance.CompactOptions{Logger: s.log, Name: kindContext + "/" + h.name}
	if req.TargetRowsPerFragment != nil {
		o.TargetRowsPerFragment = *req.TargetRowsPerFragment
	}
	if req.MaterializeDeletions != nil {
		o.MaterializeDeletionsThreshold = *req.MaterializeDeletions
	}
	next, res, err := ds.Compact(ctx, o)
	if err != nil {
		return res, err
	}
	h.noteVersion(next.Version())
	return res, nil
}

func (s *Server) handleContextCompactStats(w http.ResponseWriter, r *http.Request) {
	name, err := pathName(r)
	if err == nil {
		_, err = api.Query(r)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var out api.ContextCompactStatsResponse
	err = s.contextRead(r.Context(), name, func(h *handle, sn cxView) error {
		out.TotalFragments = len(sn.Base().Manifest().GetFragments())
		c := h.cx
		c.mu.Lock()
		defer c.mu.Unlock()
		out.IsCompacting, out.TotalCompactions = c.compacting, c.totalCompactions
		if c.lastCompaction != 0 {
			v := c.lastCompaction
			out.LastCompaction = &v
		}
		if c.lastCompactError != "" {
			v := c.lastCompactError
			out.LastError = &v
		}
		return nil
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	api.WriteJSON(w, http.StatusOK, out)
}

// jsonRaw is one value of a patch.
type jsonRaw = json.RawMessage

// parsePatch checks a patch: a JSON object whose keys are record fields a client
// sets (ContextRecordFields); id, created_at and the supersede chain are not.
func parsePatch(raw json.RawMessage) (map[string]jsonRaw, error) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || t[0] != '{' {
		return nil, api.InvalidRequest("patch: must be a JSON object of the fields to set")
	}
	var m map[string]jsonRaw
	if err := json.Unmarshal(t, &m); err != nil {
		return nil, api.InvalidRequest("patch: %v", err)
	}
	if len(m) == 0 {
		return nil, api.InvalidRequest("patch: is empty; name the fields to set")
	}
	// Keys and value types are checked strictly against the record fields (unknown,
	// duplicate or mistyped keys are refused), nulls aside (they clear a field).
	probe := map[string]jsonRaw{}
	for k, v := range m {
		if !bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			probe[k] = v
		}
	}
	body, _ := json.Marshal(probe)
	if err := patchDecoder.Check(body); err != nil {
		return nil, err
	}
	for k := range m {
		if _, ok := patchFields[k]; !ok {
			return nil, api.InvalidRequest("patch.%s: not a field a patch sets", api.QuoteTrunc(k, 60))
		}
	}
	return m, nil
}

// patchFields are the JSON names of ContextRecordFields.
var patchFields = func() map[string]bool {
	out := map[string]bool{}
	t := reflect.TypeFor[api.ContextRecordFields]()
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		out[name] = true
	}
	return out
}()

// applyPatch returns old with the patch's fields set (null clears), checked as a
// new record would be; id, created_at and the chain are kept.
func applyPatch(old api.ContextRecord, patch map[string]jsonRaw, now time.Time, o ctxstore.Options) (api.ContextRecord, error) {
	cur, err := json.Marshal(old.ContextRecordFields)
	if err != nil {
		return old, err
	}
	var m map[string]jsonRaw
	if err := json.Unmarshal(cur, &m); err != nil {
		return old, err
	}
	for k, v := range patch {
		if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	body, err := json.Marshal(m)
	if err != nil {
		return old, err
	}
	var in api.AddContextRecord
	if err := patchDecoder.Unmarshal(body, &in.ContextRecordFields); err != nil {
		return old, err
	}
	in.ID, in.CreatedAt = old.ID, &old.CreatedAt
	// A superseded record keeps its status unless the patch sets one (Normalize
	// refuses superseded from clients).
	keep := in.LifecycleStatus == ctxstore.StatusSuperseded && patch["lifecycle_status"] == nil
	if keep {
		in.LifecycleStatus = ""
	}
	next, err := ctxstore.Normalize("patch", &in, now, o)
	if err != nil {
		return old, err
	}
	if keep {
		next.LifecycleStatus = ctxstore.StatusSuperseded
	}
	next.SupersedesID, next.SupersededByID = old.SupersedesID, old.SupersededByID
	return next, nil
}
