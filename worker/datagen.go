package worker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/datagen"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/wal"
)

// Datagen stores (/api/v1/datagen): append-only event logs (package datagen) on the
// same handles, WAL shards, merges and snapshots as the other kinds. Every append is
// sealed before its 201 (concurrent appends share one seal: the shard's Flush joins
// the seal in progress), and checked against what the store already has: an event_id
// reused with other content, or another event_id at an (item_id, item_seq), is a 400
// that writes nothing.

var datagenAppendDecoder = api.NewJSONDecoder(&api.AddDatagenEventsRequest{}).WithRoot("request body")

// dgState is a datagen handle's in-flight reservations: the events of appends that
// passed their checks and are not yet in the shard's memtable, so two concurrent
// appends cannot both pass with conflicting events. Its mutex is never held across
// I/O.
type dgState struct {
	mu    sync.Mutex
	ids   map[string]*dgRes // event_id -> reservation
	seqs  map[dgSeq]string  // (item_id, item_seq) -> event_id
	scope string            // key-cache scope of the base's item_id index
	// bases is what checks learnt of the base table's items (datagen_seqs.go).
	bases *seqCache
	// index is what the store holds, in memory (datagen_index.go).
	index *dgIndex
	// snaps shares snapshots between concurrent appends (datagen_snap.go).
	snaps snapGroup
}

type dgSeq struct {
	item string
	seq  int64
}

// dgRes is one reserved event: its content is compared (datagen.Content, a JSON
// encoding) only when another append reserves the same event_id.
type dgRes struct {
	ev   *api.DatagenEvent
	refs int
}

func openDatagen(h *handle, ds *lance.Dataset) error {
	if !datagen.SameSchema(ds.Schema().Arrow()) {
		return fmt.Errorf("%w: not the datagen event schema", errSchema)
	}
	h.dg = &dgState{ids: map[string]*dgRes{}, seqs: map[dgSeq]string{}, scope: fmt.Sprintf("datagen items %s %p", h.name, h),
		bases: newSeqCache(), index: newDgIndex(dgIndexLimit)}
	return nil
}

func checkDatagen(_ context.Context, ds *lance.Dataset, incarnation string) (*lance.Dataset, error) {
	if inc := wal.Incarnation(ds); inc != incarnation {
		return nil, fmt.Errorf("%w: the base table is incarnation %q, not %q", wal.ErrIncarnation, inc, incarnation)
	}
	if !datagen.SameSchema(ds.Schema().Arrow()) {
		return nil, fmt.Errorf("%w: not the datagen event schema", errSchema)
	}
	return ds, nil
}

// reserve registers evs as in flight, refusing conflicts with other in-flight
// appends; release undoes it.
func (d *dgState) reserve(evs []api.DatagenEvent) (release func(), err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for i := range evs {
		ev := &evs[i]
		if r := d.ids[ev.EventID]; r != nil && datagen.Content(r.ev) != datagen.Content(ev) {
			return nil, api.InvalidRequest("events[%d]: event_id %s was reused with different content (an append in flight has it)",
				i, api.QuoteTrunc(ev.EventID, 100))
		}
		if id, ok := d.seqs[dgSeq{ev.ItemID, ev.ItemSeq}]; ok && id != ev.EventID {
			return nil, api.InvalidRequest("events[%d]: item %s already has event %s at item_seq %d (in flight)",
				i, api.QuoteTrunc(ev.ItemID, 100), api.QuoteTrunc(id, 100), ev.ItemSeq)
		}
	}
	for i := range evs {
		ev := &evs[i]
		r := d.ids[ev.EventID]
		if r == nil {
			r = &dgRes{ev: ev}
			d.ids[ev.EventID] = r
			d.seqs[dgSeq{ev.ItemID, ev.ItemSeq}] = ev.EventID
		}
		r.refs++
	}
	return func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		for i := range evs {
			ev := &evs[i]
			if r := d.ids[ev.EventID]; r != nil {
				if r.refs--; r.refs == 0 {
					delete(d.ids, ev.EventID)
					delete(d.seqs, dgSeq{ev.ItemID, ev.ItemSeq})
				}
			}
		}
	}, nil
}

// sqlString quotes s as a SQL string literal.
func sqlString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// checkStored refuses events that conflict with what the snapshot holds: the same
// event_id with other content (a key lookup per event), or another event_id at one
// of their (item_id, item_seq) (per item: checkBaseSeqs for the base table, and a
// scan of the item's rows in the pending generations and the memtable).
func (s *Server) checkStored(ctx context.Context, h *handle, sn *wal.Snapshot, evs []api.DatagenEvent) error {
	cols := datagen.Schema().Fields()
	all := make([]string, len(cols))
	for i, f := range cols {
		all[i] = f.Name
	}
	ids := make([]string, len(evs))
	for i := range evs {
		ids[i] = evs[i].EventID
	}
	stored, err := sn.GetMany(ctx, ids, all)
	if err != nil {
		return err
	}
	var conflict error
	for i, rec := range stored {
		if rec == nil {
			continue
		}
		old, err := datagen.NewRows(rec).Event(0)
		rec.Release()
		switch {
		case conflict != nil:
		case err != nil:
			conflict = err
		case datagen.Content(&old) != datagen.Content(&evs[i]):
			conflict = api.InvalidRequest("events[%d]: event_id %s was reused with different content (the store has it)",
				i, api.QuoteTrunc(evs[i].EventID, 100))
		}
	}
	if conflict != nil {
		return conflict
	}
	byItem := map[string][]int{}
	for i := range evs {
		byItem[evs[i].ItemID] = append(byItem[evs[i].ItemID], i)
	}
	for item, idx := range byItem {
		seqs := make([]int64, len(idx))
		want := make(map[int64]int, len(idx))
		for j, i := range idx {
			seqs[j] = evs[i].ItemSeq
			want[evs[i].ItemSeq] = i
		}
		conflict := func(rows *datagen.Rows) error {
			for r := 0; r < rows.Len(); r++ {
				i, ok := want[rows.Int64(datagen.ColItemSeq, r)]
				if !ok {
					continue
				}
				if id := rows.String(datagen.ColEventID, r); id != evs[i].EventID {
					return api.InvalidRequest("events[%d]: item %s already has event %s at item_seq %d",
						i, api.QuoteTrunc(item, 100), api.QuoteTrunc(id, 100), evs[i].ItemSeq)
				}
			}
			return nil
		}
		if err := s.checkBaseSeqs(ctx, h, sn.Base(), item, seqs, conflict); err != nil {
			return err
		}
		// The pending generations and the memtable: the scan skips, unread, the
		// generations without the item.
		strs := make([]string, len(seqs))
		for j, q := range seqs {
			strs[j] = strconv.FormatInt(q, 10)
		}
		rdr, err := sn.Scan(ctx, wal.ScanOptions{Columns: []string{datagen.ColEventID, datagen.ColItemSeq}, SkipBase: true,
			Match:  &wal.Match{Column: datagen.ColItemID, Value: item},
			Filter: fmt.Sprintf("%s IN (%s)", datagen.ColItemSeq, strings.Join(strs, ","))})
		if err != nil {
			return err
		}
		var cerr error
		for cerr == nil && rdr.Next() {
			cerr = conflict(datagen.NewRows(rdr.RecordBatch()))
		}
		err = rdr.Err()
		rdr.Release()
		if cerr != nil {
			return cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// AppendEvents writes the events of an append body ({"events":[...]}) to the datagen
// store, checked (per event, per batch, against the store) before anything is
// written, and returns once they are durable and sealed (visible to every reader).
// With checkpoint the batch must be one checkpoint (datagen.CheckBatch).
func (s *Server) AppendEvents(ctx context.Context, name string, body []byte, checkpoint bool) (api.DatagenAppendResponse, error) {
	if err := api.ValidateName(name); err != nil {
		return api.DatagenAppendResponse{}, err
	}
	var req api.AddDatagenEventsRequest
	if err := datagenAppendDecoder.Unmarshal(body, &req); err != nil {
		return api.DatagenAppendResponse{}, err
	}
	if len(req.Events) == 0 {
		return api.DatagenAppendResponse{}, api.InvalidRequest("events array must not be empty")
	}
	if len(req.Events) > s.cfg.MaxRecords {
		return api.DatagenAppendResponse{}, api.PayloadTooLarge("events: %d events; at most %d per append; split the batch", len(req.Events), s.cfg.MaxRecords)
	}
	now := s.cfg.Now()
	for i := range req.Events {
		if err := datagen.Normalize(i, &req.Events[i], now); err != nil {
			return api.DatagenAppendResponse{}, err
		}
	}
	evs, err := datagen.CheckBatch(req.Events, checkpoint)
	if err != nil {
		return api.DatagenAppendResponse{}, err
	}
	rec := datagen.ToRecord(evs)
	defer rec.Release()
	var version uint64
	err = s.withWriter(ctx, s.datagens, name, func(h *handle, sh *wal.Shard) error {
		release, err := h.dg.reserve(evs)
		if err != nil {
			return err
		}
		defer release()
		sn, err := h.dg.snaps.get(ctx, func(ctx context.Context) (*wal.Snapshot, error) {
			ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
			defer cancel()
			return s.snapshot(ctx, h)
		})
		if err != nil {
			return err
		}
		if err := h.dg.index.cover(ctx, sn, sh.ID()); err != nil {
			return err
		}
		if h.dg.index.mayConflict(evs) {
			if err := s.checkStored(ctx, h, sn, evs); err != nil {
				return err
			}
		}
		if _, err := sh.Append(ctx, rec); err != nil {
			// The entry may still land (a timeout): the index reads the store again.
			h.dg.index.forget()
			return err
		}
		// In the log: the index has them before the reservation goes.
		h.dg.index.add(evs)
		fctx, cancel := context.WithTimeout(ctx, s.cfg.FlushTimeout)
		defer cancel()
		if err := sh.Flush(fctx); err != nil {
			return fmt.Errorf("events are durable but sealing them failed: %w", err)
		}
		version = h.baseVersion.Load()
		return nil
	})
	if err != nil {
		return api.DatagenAppendResponse{}, s.toAPIError(ctx, err)
	}
	return api.DatagenAppendResponse{Version: version, Count: len(req.Events), Durable: true, Visible: true}, nil
}

func (s *Server) handleDatagenCreate(w http.ResponseWriter, r *http.Request) {
	if _, err := api.Query(r); err != nil {
		s.fail(w, r, err)
		return
	}
	var req api.CreateDatagenStoreRequest
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
	ds, err := s.createStore(r.Context(), s.datagens, req.Name, datagen.Schema())
	if err != nil {
		s.fail(w, r, err)
		return
	}
	api.WriteJSON(w, http.StatusCreated, api.DatagenStoreInfo{Name: req.Name, URI: s.storeURI(s.datagens, req.Name), Version: ds.Version()})
}

func (s *Server) handleDatagenList(w http.ResponseWriter, r *http.Request) {
	s.listStores(w, r, s.datagens)
}

func (s *Server) handleDatagenDescribe(w http.ResponseWriter, r *http.Request) {
	name, err := pathName(r)
	if err == nil {
		_, err = api.Query(r)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ds, err := s.describe(r.Context(), s.datagens, name)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	api.WriteJSON(w, http.StatusOK, api.DatagenStoreInfo{Name: name, URI: s.storeURI(s.datagens, name), Version: ds.Version()})
}

func (s *Server) handleDatagenDelete(w http.ResponseWriter, r *http.Request) {
	s.deleteStore(w, r, s.datagens)
}

func (s *Server) handleDatagenAppend(w http.ResponseWriter, r *http.Request) {
	name, err := pathName(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	q, err := api.Query(r, "checkpoint")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	checkpoint, err := api.QueryBool(q, "checkpoint", false)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ctx := r.Context()
	if err := s.datagens.stores.known(ctx, name); err != nil {
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
	resp, err := s.AppendEvents(ctx, name, body, checkpoint)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	api.WriteJSON(w, http.StatusCreated, resp)
}

// scanEvents reads the events whose string column equals value (sorted by item_id,
// item_seq, event_id) from a snapshot: the rows of one item or one root, never the
// store. Blob bytes are read only with blobs.
func (s *Server) scanEvents(ctx context.Context, sn *wal.Snapshot, column, value string, blobs bool) ([]api.DatagenEvent, error) {
	cols := datagen.ReadColumns()
	if blobs {
		cols = append(cols, datagen.ColValueBlob)
	}
	rdr, err := sn.Scan(ctx, wal.ScanOptions{Columns: cols, Match: &wal.Match{Column: column, Value: value}})
	if err != nil {
		return nil, err
	}
	defer rdr.Release()
	// The batches first, then the events into one slice of the right size: growing it
	// copied every event (a few hundred bytes each) about twice over.
	var recs []arrow.RecordBatch
	defer func() {
		for _, rec := range recs {
			rec.Release()
		}
	}()
	n := 0
	for rdr.Next() {
		rec := rdr.RecordBatch()
		rec.Retain()
		recs = append(recs, rec)
		n += int(rec.NumRows())
	}
	if err := rdr.Err(); err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, nil
	}
	out := make([]api.DatagenEvent, 0, n)
	for _, rec := range recs {
		rows := datagen.NewRows(rec)
		for i := 0; i < rows.Len(); i++ {
			ev, err := rows.Event(i)
			if err != nil {
				return nil, err
			}
			out = append(out, ev)
		}
	}
	datagen.SortEvents(out)
	return out, nil
}

// datagenRead runs f on a snapshot of the store with a validated name.
func (s *Server) datagenRead(ctx context.Context, name string, f func(h *handle, sn *wal.Snapshot) error) error {
	return s.withShard(ctx, s.datagens, name, func(h *handle) error {
		return s.readRetry(ctx, h, func(sn *wal.Snapshot) error { return f(h, sn) })
	})
}

func foldErr(err error) error {
	if errors.Is(err, datagen.ErrInconsistent) {
		return api.Conflict("%s", strings.TrimPrefix(err.Error(), "datagen: ")).WithCause(err)
	}
	return err
}

// itemEvents answers the item routes: name and item from the path, the item's
// events (with blob bytes when blobs).
func (s *Server) itemEvents(r *http.Request, blobs bool) (string, []api.DatagenEvent, error) {
	name, err := pathName(r)
	if err != nil {
		return "", nil, err
	}
	item := r.PathValue("item_id")
	if err := api.ValidateIDField("item_id", item); err != nil {
		return "", nil, err
	}
	var evs []api.DatagenEvent
	err = s.datagenRead(r.Context(), name, func(_ *handle, sn *wal.Snapshot) error {
		var err error
		evs, err = s.scanEvents(r.Context(), sn, datagen.ColItemID, item, blobs)
		return err
	})
	return name, evs, err
}

func (s *Server) handleDatagenItem(w http.ResponseWriter, r *http.Request) {
	q, err := api.Query(r, "load_blobs")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	load, err := api.QueryBool(q, "load_blobs", false)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	_, evs, err := s.itemEvents(r, load)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	it, err := datagen.Fold(evs, load)
	if err != nil {
		s.fail(w, r, foldErr(err))
		return
	}
	api.WriteJSON(w, http.StatusOK, api.GetFoldedDatagenItemResponse{Item: it})
}

func (s *Server) handleDatagenFailures(w http.ResponseWriter, r *http.Request) {
	if _, err := api.Query(r); err != nil {
		s.fail(w, r, err)
		return
	}
	_, evs, err := s.itemEvents(r, false)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	fs, err := datagen.Failures(evs)
	if err != nil {
		s.fail(w, r, foldErr(err))
		return
	}
	api.WriteJSON(w, http.StatusOK, api.ListDatagenFailuresResponse{Failures: fs})
}

func (s *Server) handleDatagenItemEvents(w http.ResponseWriter, r *http.Request) {
	if _, err := api.Query(r); err != nil {
		s.fail(w, r, err)
		return
	}
	_, evs, err := s.itemEvents(r, false)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if evs == nil {
		evs = []api.DatagenEvent{}
	}
	api.WriteJSON(w, http.StatusOK, api.ListDatagenEventsResponse{Events: evs})
}

func (s *Server) handleDatagenRootEvents(w http.ResponseWriter, r *http.Request) {
	name, err := pathName(r)
	if err == nil {
		_, err = api.Query(r)
	}
	root := r.PathValue("root_item_id")
	if err == nil {
		err = api.ValidateIDField("root_item_id", root)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var evs []api.DatagenEvent
	err = s.datagenRead(r.Context(), name, func(_ *handle, sn *wal.Snapshot) error {
		var err error
		evs, err = s.scanEvents(r.Context(), sn, datagen.ColRootItemID, root, false)
		return err
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if evs == nil {
		evs = []api.DatagenEvent{}
	}
	api.WriteJSON(w, http.StatusOK, api.ListDatagenEventsResponse{Events: evs})
}

// maxRootStatusIDs bounds the ids of one root-status request.
const maxRootStatusIDs = 1024

func (s *Server) handleDatagenRootStatus(w http.ResponseWriter, r *http.Request) {
	name, err := pathName(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	q, err := api.Query(r, "ids")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var ids []string
	if q.Has("ids") {
		raw, err := api.QueryString(q, "ids")
		if err != nil {
			s.fail(w, r, err)
			return
		}
		for _, id := range strings.Split(raw, ",") {
			if id = strings.TrimSpace(id); id != "" {
				if err := api.ValidateIDField("ids", id); err != nil {
					s.fail(w, r, err)
					return
				}
				ids = append(ids, id)
			}
		}
	}
	if len(ids) > maxRootStatusIDs {
		s.fail(w, r, api.InvalidRequest("ids: %d ids; the limit is %d per request", len(ids), maxRootStatusIDs))
		return
	}
	out := api.DatagenRootItemStatusesResponse{Statuses: map[string]string{}}
	if len(ids) == 0 {
		if err := s.datagens.stores.known(r.Context(), name); err != nil {
			s.fail(w, r, err)
			return
		}
		api.WriteJSON(w, http.StatusOK, out)
		return
	}
	quoted := make([]string, len(ids))
	for i, id := range ids {
		quoted[i] = sqlString(id)
	}
	err = s.datagenRead(r.Context(), name, func(_ *handle, sn *wal.Snapshot) error {
		rdr, err := sn.Scan(r.Context(), wal.ScanOptions{
			Columns: []string{datagen.ColItemID, datagen.ColRootItemID, datagen.ColParentItemID, datagen.ColItemSeq, datagen.ColEventType, datagen.ColStatus},
			Filter:  fmt.Sprintf("%s IN (%s)", datagen.ColItemID, strings.Join(quoted, ","))})
		if err != nil {
			return err
		}
		defer rdr.Release()
		byItem := map[string][]api.DatagenEvent{}
		for rdr.Next() {
			rows := datagen.NewRows(rdr.RecordBatch())
			for i := 0; i < rows.Len(); i++ {
				ev, err := rows.Event(i)
				if err != nil {
					return err
				}
				byItem[ev.ItemID] = append(byItem[ev.ItemID], ev)
			}
		}
		if err := rdr.Err(); err != nil {
			return err
		}
		clear(out.Statuses)
		for id, evs := range byItem {
			if st := datagen.Status(evs); st != "" {
				out.Statuses[id] = st
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

// Overview aggregates the whole log of a datagen store: from the handle's index
// (datagen_index.go) once it covers the snapshot, else by a scan.
func (s *Server) Overview(ctx context.Context, name string) (api.DatagenRunOverview, error) {
	var out api.DatagenRunOverview
	err := s.datagenRead(ctx, name, func(h *handle, sn *wal.Snapshot) error {
		local := ""
		if sh := h.shard.Load(); sh != nil {
			local = sh.ID()
		}
		if err := h.dg.index.cover(ctx, sn, local); err != nil {
			return err
		}
		if o, ok := h.dg.index.overview(); ok {
			out = o
			return nil
		}
		var err error
		out, err = scanOverview(ctx, sn)
		return err
	})
	return out, err
}

// scanOverview aggregates the whole log of a snapshot, streaming only the columns
// the overview needs (memory: a few numbers per item).
func scanOverview(ctx context.Context, sn *wal.Snapshot) (api.DatagenRunOverview, error) {
	rdr, err := sn.Scan(ctx, wal.ScanOptions{Columns: []string{datagen.ColItemID, datagen.ColRootItemID,
		datagen.ColParentItemID, datagen.ColItemSeq, datagen.ColEventType, datagen.ColStatus, datagen.ColErrorType,
		datagen.ColRunID, datagen.ColStepName}})
	if err != nil {
		return api.DatagenRunOverview{}, err
	}
	defer rdr.Release()
	o := datagen.NewOverview()
	for rdr.Next() {
		rows := datagen.NewRows(rdr.RecordBatch())
		for i := 0; i < rows.Len(); i++ {
			o.Add(rows.OverviewRow(i))
		}
	}
	if err := rdr.Err(); err != nil {
		return api.DatagenRunOverview{}, err
	}
	return o.Result(), nil
}

func (s *Server) handleDatagenOverview(w http.ResponseWriter, r *http.Request) {
	name, err := pathName(r)
	if err == nil {
		_, err = api.Query(r)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out, err := s.Overview(r.Context(), name)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	api.WriteJSON(w, http.StatusOK, out)
}

func (s *Server) handleDatagenBlob(w http.ResponseWriter, r *http.Request) {
	name, err := pathName(r)
	if err == nil {
		_, err = api.Query(r)
	}
	id := r.PathValue("event_id")
	if err == nil {
		err = api.ValidateIDField("event_id", id)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var data []byte
	var found bool
	err = s.datagenRead(r.Context(), name, func(_ *handle, sn *wal.Snapshot) error {
		rec, ok, err := sn.Get(r.Context(), id, []string{datagen.ColValueBlob})
		if err != nil || !ok {
			return err
		}
		defer rec.Release()
		var b []byte
		b, found, err = binaryValue(rec.Column(0))
		data = slices.Clone(b)
		return err
	})
	if err == nil && !found {
		err = api.NotFound("datagen event %s has no blob", api.QuoteTrunc(id, 100))
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
}
