package worker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/registry"
	"github.com/lancectx/lancectx/rollout"
	"github.com/lancectx/lancectx/wal"
)

// fail renders err as the error envelope, turning the WAL's and the context's errors
// into the statuses a client can act on.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error) {
	api.WriteErrorLog(w, s.log, s.toAPIError(r.Context(), err))
}

func (s *Server) toAPIError(ctx context.Context, err error) error {
	if _, ok := api.AsError(err); ok {
		return err
	}
	var bp *wal.BackpressureError
	switch {
	case errors.As(err, &bp):
		s.met.backpressure.Inc()
		return api.Overloaded(bp.RetryAfter, "appends are paused: %s (%d, cap %d); retry after %s",
			bp.Reason, bp.Pending, bp.Max, bp.RetryAfter.Round(time.Second)).WithCause(err)
	case errors.Is(err, errSchema):
		return api.Conflict("%s; the store's schema is immutable: restore the table or re-create the store",
			strings.TrimPrefix(err.Error(), "worker: ")).WithCause(err)
	case errors.Is(err, wal.ErrInvalidBatch):
		return api.InvalidRequest("%s", strings.TrimPrefix(err.Error(), "wal: ")).WithCause(err)
	case errors.Is(err, wal.ErrSnapshotChanged), errors.Is(err, wal.ErrSnapshotStale):
		return api.Overloaded(time.Second, "the store changed during the read (merges landing); retry the request").WithCause(err)
	case errors.Is(err, wal.ErrFenced), errors.Is(err, wal.ErrShardFailed), errors.Is(err, wal.ErrClosed):
		return api.Overloaded(time.Second, "the store's WAL shard is being reopened; retry the request").WithCause(err)
	case errors.Is(err, context.DeadlineExceeded):
		return api.Overloaded(time.Second, "the request did not finish within its deadline; retry later").WithCause(err)
	case errors.Is(err, context.Canceled) && ctx.Err() != nil:
		// The client went away; nobody reads this answer.
		return api.Overloaded(time.Second, "request cancelled").WithCause(err)
	}
	return err
}

// storeURI is where a store's dataset lives, as clients and LanceDB address it: the
// canonical form (objstore.DatasetURI) the master reports for the experiment too.
// Without a DataDir (an embedder that passed only Store) it is the path in the data
// directory.
func (s *Server) storeURI(k *storeKind, name string) string {
	dir := k.reg.DatasetDir(name)
	if s.cfg.DataDir == "" {
		return dir
	}
	return objstore.DatasetURI(s.cfg.DataDir, dir)
}

func (s *Server) datasetStore(k *storeKind, name string) objstore.Store {
	return objstore.Prefixed(s.data, k.reg.DatasetDir(name))
}

// pathName returns the validated {name} of the request path.
func pathName(r *http.Request) (string, error) {
	name := r.PathValue("name")
	return name, api.ValidateName(name)
}

func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request) {
	if _, err := api.Query(r); err != nil {
		s.fail(w, r, err)
		return
	}
	var req api.CreateRolloutStoreRequest
	if err := api.DecodeJSON(r, api.DefaultMaxBodyBytes, &req); err != nil {
		s.fail(w, r, err)
		return
	}
	if err := api.ValidateName(req.Name); err != nil {
		s.fail(w, r, err)
		return
	}
	if len(req.StorageOptions) > 0 {
		// Per-store credentials would be used by this open only (the reference's quirk);
		// the worker's data directory settings apply to every store.
		s.fail(w, r, api.InvalidRequest("storage_options are not supported: every store uses the worker's data directory settings"))
		return
	}
	ds, err := s.createStore(r.Context(), s.rollouts, req.Name, rollout.Schema())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	api.WriteJSON(w, http.StatusCreated, api.StoreInfo{Name: req.Name, URI: s.storeURI(s.rollouts, req.Name), Version: ds.Version()})
}

// createStore claims the name in the kind's registry (exactly one concurrent
// creator wins), then writes the empty base table of schema sch. If the table cannot
// be written, the entry and whatever was written are removed again.
func (s *Server) createStore(ctx context.Context, k *storeKind, name string, sch *arrow.Schema) (*lance.Dataset, error) {
	st := s.datasetStore(k, name)
	if _, err := k.reg.Get(ctx, name); errors.Is(err, registry.ErrNotFound) {
		if err := s.clearRemnant(ctx, k, name, st); err != nil {
			return nil, err
		}
	}
	entry, err := k.reg.Create(ctx, name, s.cfg.Now())
	if err != nil {
		if errors.Is(err, registry.ErrExists) {
			return nil, api.AlreadyExists("%s %q already exists", k.noun, name).WithCause(err)
		}
		return nil, err
	}
	rdr, err := array.NewRecordReader(sch, nil)
	if err == nil {
		var ds *lance.Dataset
		// The table carries the incarnation every writer checks, and starts past the
		// history of a deleted store of the same name (registry.Entry.FirstVersion).
		ds, err = lance.WriteStore(ctx, st, rdr, lance.WriteOptions{Mode: lance.ModeCreate, DataStorageVersion: s.cfg.DataStorageVersion,
			Config: map[string]string{wal.IncarnationKey: entry.Incarnation}, FirstVersion: entry.FirstVersion})
		rdr.Release()
		if err == nil {
			s.log.Info("worker: store created", "store", name, "kind", k.name, "version", ds.Version())
			return ds, nil
		}
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.RequestTimeout)
	defer cancel()
	if derr := k.reg.Delete(cctx, name); derr != nil {
		s.log.Error("worker: could not undo a failed store creation; delete the store to retry", "store", name, "kind", k.name,
			"err", derr, "create_err", err)
	}
	return nil, fmt.Errorf("worker: create base table of %q: %w", name, err)
}

// clearRemnant makes the place of a store about to be created empty. A dataset there
// that the registry does not know is not ours to take over or to clean up (another
// tool's table, an operator's copy): 409. The exception is what a writer of a deleted
// incarnation of the name left after the delete (its table carries that incarnation,
// and the registry's tombstone names it): that is removed.
func (s *Server) clearRemnant(ctx context.Context, k *storeKind, name string, st objstore.Store) error {
	ds, err := lance.OpenStore(ctx, st)
	if errors.Is(err, lance.ErrDatasetNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if inc := wal.Incarnation(ds); inc != "" {
		t, ok, err := k.reg.Tombstone(ctx, name)
		if err != nil {
			return err
		}
		if ok && t.Incarnation == inc {
			s.log.Warn("worker: removing what a writer of the deleted store left at its place", "store", name,
				"incarnation", inc, "version", ds.Version())
			return k.reg.Purge(ctx, name)
		}
	}
	// Most often a store of the system lancectx replaces (lance-context), or a copy of one:
	// adoption takes it over with its data and history; creating would have to drop them.
	return api.Conflict("a dataset (version %d) already exists at %s but is not a registered store; adopt it "+
		"(lancectx adopt DATA_DIR, or start with --adopt) to serve it with its rows and history, or move it away first",
		ds.Version(), k.reg.DatasetDir(name))
}

func (s *Server) handleListStores(w http.ResponseWriter, r *http.Request) {
	s.listStores(w, r, s.rollouts)
}

func (s *Server) listStores(w http.ResponseWriter, r *http.Request, k *storeKind) {
	if _, err := api.Query(r); err != nil {
		s.fail(w, r, err)
		return
	}
	names, err := k.reg.Names(r.Context())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := api.ListStoresResponse{Stores: make([]api.StoreSummary, 0, len(names))}
	for _, n := range names {
		out.Stores = append(out.Stores, api.StoreSummary{Name: n, URI: s.storeURI(k, n)})
	}
	api.WriteJSON(w, http.StatusOK, out)
}

func (s *Server) handleDescribe(w http.ResponseWriter, r *http.Request) {
	name, err := pathName(r)
	if err == nil {
		_, err = api.Query(r)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ds, err := s.describe(r.Context(), s.rollouts, name)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	api.WriteJSON(w, http.StatusOK, api.StoreInfo{Name: name, URI: s.storeURI(s.rollouts, name), Version: ds.Version()})
}

// describe reads the latest base table of a registered store (no handle opened).
func (s *Server) describe(ctx context.Context, k *storeKind, name string) (*lance.Dataset, error) {
	if _, err := k.reg.Get(ctx, name); err != nil {
		return nil, k.stores.registryErr(name, err)
	}
	ds, err := lance.OpenStore(ctx, s.datasetStore(k, name))
	if errors.Is(err, lance.ErrDatasetNotFound) {
		err = api.NotFound("%s %q has no dataset yet (its creation has not completed)", k.noun, name).WithCause(err)
	}
	return ds, err
}

func (s *Server) handleDelete(w http.ResponseWriter, r *http.Request) {
	s.deleteStore(w, r, s.rollouts)
}

func (s *Server) deleteStore(w http.ResponseWriter, r *http.Request, k *storeKind) {
	name, err := pathName(r)
	if err == nil {
		_, err = api.Query(r)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := k.stores.delete(r.Context(), name); err != nil {
		s.fail(w, r, err)
		return
	}
	s.log.Info("worker: store deleted", "store", name, "kind", k.name)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleAppend(w http.ResponseWriter, r *http.Request) {
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
	// Existence first (no write: an unknown store is refused before its body is read,
	// and the store is opened only for a body that decoded).
	if err := s.rollouts.stores.known(ctx, name); err != nil {
		s.fail(w, r, err)
		return
	}
	opts := rollout.DecodeOptions{MaxBodyBytes: s.cfg.MaxBodyBytes,
		MaxRecords: s.cfg.MaxRecords, MaxPartBytes: s.cfg.MaxPartBytes, Now: s.cfg.Now}
	if isArrowStream(r) {
		recs, err := DecodeAppendArrow(r, opts)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		defer func() {
			for _, rec := range recs {
				rec.Release()
			}
		}()
		resp, err := s.AppendArrow(ctx, name, recs, flush)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		api.WriteJSON(w, http.StatusCreated, resp)
		return
	}
	records, release, err := decodeAppendRequestPooled(r, opts)
	// The records' strings point into the pooled body: it goes back only after the
	// answer (which holds the ids) is written.
	defer release()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	resp, err := s.Append(ctx, name, records, flush)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeAppendCreated(w, resp)
}

// Append writes decoded records (DecodeAppendRequest, or records a Go caller
// built and checked with rollout.ValidateRecords) durably to the store: it returns
// once they are in a WAL object created with a conditional put. With flush, it also
// waits (up to Config.FlushTimeout) until they are sealed into a generation every
// reader sees.
func (s *Server) Append(ctx context.Context, name string, records []rollout.AddRecord, flush bool) (api.AppendResponse, error) {
	if len(records) == 0 {
		return api.AppendResponse{}, api.InvalidRequest("records is empty; send at least one record")
	}
	resp, err := s.appendRows(ctx, name, flush, len(records), func(sh *wal.Shard) ([]arrow.RecordBatch, error) {
		rec, err := rollout.ToBatch(records, sh.Schema())
		if err != nil {
			return nil, err
		}
		return []arrow.RecordBatch{rec}, nil
	})
	if err != nil {
		return resp, err
	}
	resp.IDs = make([]string, len(records))
	for i := range records {
		resp.IDs[i] = records[i].ID
	}
	return resp, nil
}

// AppendArrow writes record batches of rollout columns (rollout.ParseAppendArrow's
// result: coerced and validated) durably to the store, all in one WAL entry, with
// Append's guarantees. The caller keeps and releases recs.
func (s *Server) AppendArrow(ctx context.Context, name string, recs []arrow.RecordBatch, flush bool) (api.AppendResponse, error) {
	n := 0
	for _, r := range recs {
		n += int(r.NumRows())
	}
	if n == 0 {
		return api.AppendResponse{}, api.InvalidRequest("records: the Arrow stream has no rows; send at least one")
	}
	resp, err := s.appendRows(ctx, name, flush, n, func(*wal.Shard) ([]arrow.RecordBatch, error) {
		for _, r := range recs {
			r.Retain()
		}
		return recs, nil
	})
	if err != nil {
		return resp, err
	}
	resp.IDs = make([]string, 0, n)
	for _, r := range recs {
		ids := r.Column(r.Schema().FieldIndices(rollout.ColID)[0]).(*array.String)
		for i := 0; i < ids.Len(); i++ {
			resp.IDs = append(resp.IDs, strings.Clone(ids.Value(i)))
		}
	}
	return resp, nil
}

// appendRows is the durable half of both append routes: build makes the batches for
// the store's shard (its schema), which are appended in one WAL entry; n is their row
// count. The response lacks the ids, which each route knows best.
func (s *Server) appendRows(ctx context.Context, name string, flush bool, n int,
	build func(*wal.Shard) ([]arrow.RecordBatch, error)) (api.AppendResponse, error) {
	if err := api.ValidateName(name); err != nil {
		return api.AppendResponse{}, err
	}
	start := time.Now()
	var version uint64
	err := s.withWriter(ctx, s.rollouts, name, func(h *handle, sh *wal.Shard) error {
		recs, err := build(sh)
		if err != nil {
			return err
		}
		defer func() {
			for _, r := range recs {
				r.Release()
			}
		}()
		if _, err := sh.AppendBatches(ctx, recs); err != nil {
			return err
		}
		if flush {
			fctx, cancel := context.WithTimeout(ctx, s.cfg.FlushTimeout)
			defer cancel()
			if err := sh.Flush(fctx); err != nil {
				return fmt.Errorf("rows are durable but sealing them failed: %w", err)
			}
		}
		version = h.baseVersion.Load()
		return nil
	})
	if err != nil {
		return api.AppendResponse{}, s.toAPIError(ctx, err)
	}
	fl := "false"
	if flush {
		fl = "true"
		s.met.appendsFlushed.Inc()
	}
	s.met.appends.WithLabelValues(fl).Inc()
	s.met.recordsAppended.Add(float64(n))
	s.met.appendDuration.WithLabelValues(fl).Observe(time.Since(start).Seconds())
	return api.AppendResponse{Version: version, Count: n, Durable: true, Visible: flush}, nil
}

func (s *Server) handleMergeWAL(w http.ResponseWriter, r *http.Request) {
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
	res, err := s.mergeWAL(r.Context(), s.rollouts, name, flush)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	api.WriteJSON(w, http.StatusOK, res)
}

func (s *Server) handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	if _, err := api.Query(r); err != nil {
		s.fail(w, r, err)
		return
	}
	doc := api.OpenAPI()
	w.Header().Set("Content-Type", api.ContentTypeJSON)
	_, _ = w.Write(doc)
}

// handleHealthQuery refuses query parameters on GET /api/v1/health, then answers as
// handleHealth.
func (s *Server) handleHealthQuery(w http.ResponseWriter, r *http.Request) {
	if _, err := api.Query(r); err != nil {
		s.fail(w, r, err)
		return
	}
	s.handleHealth(w, r)
}
