package worker

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/generic"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/wal"
)

// Generic stores (/api/v1/generic): datasets of a client-declared schema, written
// and read through the same handles, WAL shards, merges and snapshots as rollout
// stores (see storeKind). Only the schema and the row codec (package generic) differ.

// genericListParams are the query parameters of the generic list route.
var genericListParams = []string{"limit", "offset", "filter"}

func (s *Server) genericInfo(name string, ds *lance.Dataset) (api.GenericStoreInfo, error) {
	sp, seal, err := generic.FromArrow(ds.Schema().Arrow())
	if err != nil {
		return api.GenericStoreInfo{}, fmt.Errorf("worker: generic store %q: %w", name, err)
	}
	return api.GenericStoreInfo{Name: name, URI: s.storeURI(s.generics, name), Version: ds.Version(), Schema: sp.API(),
		SealOnAdd: seal}, nil
}

func (s *Server) handleGenericCreate(w http.ResponseWriter, r *http.Request) {
	if _, err := api.Query(r); err != nil {
		s.fail(w, r, err)
		return
	}
	var req api.CreateGenericStoreRequest
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
	// The whole schema is checked before any storage I/O: a bad one leaves nothing.
	sp, err := generic.Parse(req.Schema)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ctx := r.Context()
	ds, err := s.createStore(ctx, s.generics, req.Name, sp.Arrow(req.SealOnAdd))
	if ae, ok := api.AsError(err); ok && ae.Code == api.CodeAlreadyExists {
		err = s.existsErr(ctx, req.Name, sp, req.SealOnAdd, ae)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	info, err := s.genericInfo(req.Name, ds)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	api.WriteJSON(w, http.StatusCreated, info)
}

// existsErr is the 409 of a create whose name is taken, saying how the existing
// store's schema differs from the requested one when it does.
func (s *Server) existsErr(ctx context.Context, name string, want *generic.Spec, seal bool, exists *api.Error) error {
	ds, err := s.describe(ctx, s.generics, name)
	if err != nil {
		return exists
	}
	have, haveSeal, err := generic.FromArrow(ds.Schema().Arrow())
	if err != nil {
		return exists
	}
	if d := have.Diff(want); d != "" {
		return api.AlreadyExists("generic store %q already exists and was created with a different schema: %s", name, d).WithCause(exists)
	}
	if haveSeal != seal {
		return api.AlreadyExists("generic store %q already exists with seal_on_add=%t", name, haveSeal).WithCause(exists)
	}
	return exists
}

func (s *Server) handleGenericList(w http.ResponseWriter, r *http.Request) {
	s.listStores(w, r, s.generics)
}

func (s *Server) handleGenericDescribe(w http.ResponseWriter, r *http.Request) {
	name, err := pathName(r)
	if err == nil {
		_, err = api.Query(r)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ds, err := s.describe(r.Context(), s.generics, name)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	info, err := s.genericInfo(name, ds)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	api.WriteJSON(w, http.StatusOK, info)
}

func (s *Server) handleGenericDelete(w http.ResponseWriter, r *http.Request) {
	s.deleteStore(w, r, s.generics)
}

func (s *Server) handleGenericAppend(w http.ResponseWriter, r *http.Request) {
	name, err := pathName(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	flush, err := queryFlush(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ctx := r.Context()
	// Existence first: an unknown store is refused before its body is read.
	if err := s.generics.stores.known(ctx, name); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := api.CheckJSONContentType(r.Header.Get("Content-Type")); err != nil {
		s.fail(w, r, err)
		return
	}
	if r.ContentLength > s.cfg.MaxBodyBytes {
		s.fail(w, r, api.PayloadTooLarge("request body is %d bytes, larger than the limit of %d bytes", r.ContentLength, s.cfg.MaxBodyBytes))
		return
	}
	if r.Body == nil {
		s.fail(w, r, api.InvalidRequest("request body is empty"))
		return
	}
	body, err := api.ReadBody(r.Body, s.cfg.MaxBodyBytes, r.ContentLength)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	resp, err := s.AppendRows(ctx, name, body, flush)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	api.WriteJSON(w, http.StatusCreated, resp)
}

// AppendRows writes the rows of an append body ({"rows":[...]}) durably to the
// generic store: it returns once they are in a WAL object created with a conditional
// put. The body is decoded against the store's schema before anything is written
// (a bad row is a 400 that writes nothing). With flush, or when the store was created
// with seal_on_add, it also waits (up to Config.FlushTimeout) until they are sealed
// into a generation every reader sees.
func (s *Server) AppendRows(ctx context.Context, name string, body []byte, flush bool) (api.GenericAppendResponse, error) {
	if err := api.ValidateName(name); err != nil {
		return api.GenericAppendResponse{}, err
	}
	start := time.Now()
	opts := generic.DecodeOptions{MaxRows: s.cfg.MaxRecords}
	// Decode with the store's spec before its shard is opened (opening claims it, a
	// write): a refused body must write nothing.
	var rec arrow.RecordBatch
	var spec *generic.Spec
	err := s.withShard(ctx, s.generics, name, func(h *handle) error {
		var err error
		rec, err = generic.DecodeRows(body, h.spec, nil, opts)
		spec = h.spec
		return err
	})
	if err != nil {
		return api.GenericAppendResponse{}, s.toAPIError(ctx, err)
	}
	defer func() { rec.Release() }()
	var version uint64
	var visible bool
	err = s.withWriter(ctx, s.generics, name, func(h *handle, sh *wal.Shard) error {
		if h.spec != spec {
			// Another handle (the store was reopened): decode against its spec.
			next, err := generic.DecodeRows(body, h.spec, nil, opts)
			if err != nil {
				return err
			}
			rec.Release()
			rec, spec = next, h.spec
		}
		if _, err := sh.Append(ctx, rec); err != nil {
			return err
		}
		if flush || h.sealOnAdd {
			fctx, cancel := context.WithTimeout(ctx, s.cfg.FlushTimeout)
			defer cancel()
			if err := sh.Flush(fctx); err != nil {
				return fmt.Errorf("rows are durable but sealing them failed: %w", err)
			}
			visible = true
		}
		version = h.baseVersion.Load()
		return nil
	})
	if err != nil {
		return api.GenericAppendResponse{}, s.toAPIError(ctx, err)
	}
	fl := "false"
	if visible {
		fl = "true"
		s.met.appendsFlushed.Inc()
	}
	n := int(rec.NumRows())
	s.met.genericAppends.WithLabelValues(fl).Inc()
	s.met.genericRows.Add(float64(n))
	s.met.genericAppendDuration.WithLabelValues(fl).Observe(time.Since(start).Seconds())
	return api.GenericAppendResponse{Version: version, Count: n, Durable: true, Visible: visible}, nil
}

func (s *Server) handleGenericRows(w http.ResponseWriter, r *http.Request) {
	name, err := pathName(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	q, err := parseListQueryOf(r, s.cfg.ListMaxRows, genericListParams)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ctx := r.Context()
	err = s.withShard(ctx, s.generics, name, func(h *handle) error {
		return s.readRetry(ctx, h, func(sn *wal.Snapshot) error {
			if err := checkFilter(q.filter, sn.Base().Schema().Arrow()); err != nil {
				return err
			}
			sp := h.spec
			return s.writeList(ctx, w, sn, q, sp.DefaultColumns(), generic.KeyColumn,
				func(w io.Writer) listWriter { return generic.NewRowsWriter(w, sp) })
		})
	})
	if err != nil {
		s.streamFailed(w, r, "generic_list", err)
	}
}

// getRows reads the newest row of each id (first-requested order, each id once,
// missing ids left out) with the given columns (nil: the defaults), as JSON objects.
func (s *Server) getRows(ctx context.Context, name string, ids []string, columns []string) ([][]byte, error) {
	var out [][]byte
	err := s.withShard(ctx, s.generics, name, func(h *handle) error {
		cols, err := h.spec.Projection(columns)
		if err != nil {
			return err
		}
		return s.readRetry(ctx, h, func(sn *wal.Snapshot) error {
			out = out[:0]
			seen := make(map[string]bool, len(ids))
			for _, id := range ids {
				if seen[id] {
					continue
				}
				seen[id] = true
				rec, ok, err := sn.Get(ctx, id, cols)
				if err != nil {
					return err
				}
				if !ok {
					continue
				}
				row, err := h.spec.AppendRow(nil, rec, 0)
				rec.Release()
				if err != nil {
					return err
				}
				out = append(out, row)
			}
			return nil
		})
	})
	return out, err
}

func (s *Server) handleGenericGet(w http.ResponseWriter, r *http.Request) {
	name, id, err := pathNameID(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	q, err := api.Query(r, "columns")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var cols []string
	if q.Has("columns") {
		list, err := api.QueryString(q, "columns")
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if list == "" {
			s.fail(w, r, api.InvalidRequest("columns is empty; name the columns (a,b) or leave the parameter out"))
			return
		}
		cols = strings.Split(list, ",")
	}
	rows, err := s.getRows(r.Context(), name, []string{id}, cols)
	if err == nil && len(rows) == 0 {
		err = api.NotFound("row %s does not exist in generic store %q", api.QuoteTrunc(id, 100), name)
	}
	if err != nil {
		s.fail(w, r, s.toAPIError(r.Context(), err))
		return
	}
	w.Header().Set("Content-Type", api.ContentTypeJSON)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(rows[0], '\n'))
}

func (s *Server) handleGenericBatchGet(w http.ResponseWriter, r *http.Request) {
	name, err := pathName(r)
	if err == nil {
		_, err = api.Query(r)
	}
	if err == nil {
		// Existence first, as for appends: an unknown store is a 404 whatever the body.
		err = s.generics.stores.known(r.Context(), name)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var req api.GetRowsRequest
	if err := api.DecodeJSON(r, api.DefaultMaxBodyBytes, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if len(req.IDs) == 0 {
		s.fail(w, r, api.InvalidRequest("ids is empty; ask for 1 to %d ids", api.MaxBatchGetIDs))
		return
	}
	if len(req.IDs) > api.MaxBatchGetIDs {
		s.fail(w, r, api.InvalidRequest("ids: %d ids; the limit is %d per request", len(req.IDs), api.MaxBatchGetIDs))
		return
	}
	for i, id := range req.IDs {
		if err := api.ValidateIDField(fmt.Sprintf("ids[%d]", i), id); err != nil {
			s.fail(w, r, err)
			return
		}
	}
	if req.Columns != nil && len(req.Columns) == 0 {
		s.fail(w, r, api.InvalidRequest("columns is empty; name the columns or leave the field out"))
		return
	}
	rows, err := s.getRows(r.Context(), name, req.IDs, req.Columns)
	if err != nil {
		s.fail(w, r, s.toAPIError(r.Context(), err))
		return
	}
	buf := []byte(`{"rows":[`)
	for i, row := range rows {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, row...)
	}
	buf = append(buf, "]}\n"...)
	w.Header().Set("Content-Type", api.ContentTypeJSON)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(buf)
}

func (s *Server) handleGenericFlush(w http.ResponseWriter, r *http.Request) {
	name, err := pathName(r)
	if err == nil {
		_, err = api.Query(r)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.flush(r.Context(), s.generics, name); err != nil {
		s.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleGenericMergeWAL(w http.ResponseWriter, r *http.Request) {
	name, err := pathName(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	flush, err := queryFlush(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	res, err := s.mergeWAL(r.Context(), s.generics, name, flush)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	api.WriteJSON(w, http.StatusOK, res)
}
