package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/lance/expr"
	"github.com/lancectx/lancectx/rollout"
	"github.com/lancectx/lancectx/wal"
)

// blobFrame is how much of a payload is written at a time.
const blobFrame = 256 << 10

// errStreamCut marks an error that happened after the response status was sent: the
// handler can only cut the connection, so the client sees a truncated body (a list
// document without its end, an Arrow stream without its end-of-stream marker) rather
// than a complete-looking wrong answer.
type errStreamCut struct{ err error }

func (e *errStreamCut) Error() string { return "response cut off: " + e.err.Error() }
func (e *errStreamCut) Unwrap() error { return e.err }

// snapshot takes a consistent read view of the store: base table, every shard's
// sealed generations and this worker's unsealed rows.
func (s *Server) snapshot(ctx context.Context, h *handle) (*wal.Snapshot, error) {
	sn, err := h.reader.Snapshot(ctx, h.shard.Load())
	if err != nil {
		return nil, err
	}
	h.noteVersion(sn.Base().Version())
	return sn, nil
}

// readRetry runs f on a snapshot, and once more on a new one when a generation of
// the first was gone (merged and deleted meanwhile).
func (s *Server) readRetry(ctx context.Context, h *handle, f func(sn *wal.Snapshot) error) error {
	for attempt := 0; ; attempt++ {
		sn, err := s.snapshot(ctx, h)
		if err != nil {
			return err
		}
		err = f(sn)
		var cut *errStreamCut
		if attempt == 0 && errors.Is(err, wal.ErrSnapshotStale) && !errors.As(err, &cut) {
			s.met.snapshotRetries.Inc()
			continue
		}
		return err
	}
}

// streamFailed ends a handler whose stream broke: an error before anything was sent
// gets the envelope; after that, the connection is cut.
func (s *Server) streamFailed(w http.ResponseWriter, r *http.Request, kind string, err error) {
	var cut *errStreamCut
	if !errors.As(err, &cut) {
		s.fail(w, r, err)
		return
	}
	if r.Context().Err() == nil {
		s.met.streamsAborted.WithLabelValues(kind).Inc()
		s.log.Warn("worker: response stream cut off", "kind", kind, "path", r.URL.Path, "err", cut.err)
	}
	panic(http.ErrAbortHandler)
}

// listQuery is the parsed query of GET /api/v1/rollouts/{name}/records.
type listQuery struct {
	// limit is the page size; 0 when the request gave none (every matching row, up
	// to Config.ListMaxRows).
	limit  int
	offset int
	// filter is the SQL predicate of the filter parameter and of the filters object
	// (ANDed when both are given); "" for none.
	filter string
}

// listParams are the query parameters of the list route.
var listParams = []string{"limit", "offset", "filter", "filters"}

// parseListQuery parses the list route's query: limit (1 to maxRows; absent: every
// matching row), offset (0 to MaxListOffset), filter (a SQL predicate, as on the Arrow
// route and in `lancectx dataset scan`) and filters (the reference's JSON object,
// rollout.ParseFilters). Anything else, and every malformed value, is a 400 *api.Error.
// The filter's columns are checked against the store's schema later (checkFilter),
// when the snapshot is known.
func parseListQuery(r *http.Request, maxRows int) (listQuery, error) {
	return parseListQueryOf(r, maxRows, listParams)
}

// parseListQueryOf is parseListQuery taking the given parameters (a generic store's
// list has no filters object).
func parseListQueryOf(r *http.Request, maxRows int, params []string) (listQuery, error) {
	q, err := api.Query(r, params...)
	if err != nil {
		return listQuery{}, err
	}
	limit, err := api.QueryInt(q, "limit", 0, 1, MaxListOffset)
	if err != nil {
		return listQuery{}, err
	}
	if limit > int64(maxRows) {
		return listQuery{}, api.InvalidRequest("limit=%d is more than one answer holds (%d rows, ROLLOUT_LIST_MAX_ROWS); %s",
			limit, maxRows, pageOrStream)
	}
	offset, err := api.QueryInt(q, "offset", 0, 0, MaxListOffset)
	if err != nil {
		return listQuery{}, err
	}
	filter, err := api.QueryString(q, "filter")
	if err != nil {
		return listQuery{}, err
	}
	if len(filter) > expr.MaxInputLen {
		return listQuery{}, api.InvalidRequest("filter is %d bytes long; the limit is %d", len(filter), expr.MaxInputLen)
	}
	if filter != "" {
		// Syntax now; the columns are checked against the store's schema with the
		// snapshot (checkFilter).
		if _, err := expr.Parse(filter); err != nil {
			return listQuery{}, api.InvalidRequest("filter: %v", err).WithCause(err)
		}
	}
	text, err := api.QueryString(q, "filters")
	if err != nil {
		return listQuery{}, err
	}
	filters, err := rollout.ParseFilters(text)
	if err != nil {
		return listQuery{}, err
	}
	switch {
	case filter == "":
		filter = filters
	case filters != "":
		filter = "(" + filter + ") AND (" + filters + ")"
	}
	return listQuery{limit: int(limit), offset: int(offset), filter: filter}, nil
}

// pageOrStream tells a client what to do instead of one answer with too many rows.
const pageOrStream = "page with limit and offset (has_more tells when to stop), or stream every row with GET /api/v1/rollouts/{name}/arrow"

func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	name, err := pathName(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	q, err := parseListQuery(r, s.cfg.ListMaxRows)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ctx := r.Context()
	err = s.withShard(ctx, s.rollouts, name, func(h *handle) error {
		return s.readRetry(ctx, h, func(sn *wal.Snapshot) error {
			if err := checkFilter(q.filter, sn.Base().Schema().Arrow()); err != nil {
				return err
			}
			return s.writeList(ctx, w, sn, q, rollout.DefaultReadColumns(sn.Base().Schema().Arrow()), rollout.KeyColumn,
				func(w io.Writer) listWriter { return rolloutList{rollout.NewListWriter(w)} })
		})
	})
	if err != nil {
		s.streamFailed(w, r, "list", err)
	}
}

// writeList streams the answer: rows offset..offset+limit of the snapshot's scan
// order, asking for one row more to learn has_more. Without a limit the answer is
// every matching row, decided before any byte is sent: more than ListMaxRows of them
// is a 400, never a truncated answer. Nothing is sent until the first batch was read,
// so a failing snapshot still gets a proper error.
func (s *Server) writeList(ctx context.Context, w http.ResponseWriter, sn *wal.Snapshot, q listQuery, cols []string, key string,
	newWriter func(io.Writer) listWriter) error {
	limit := int64(q.limit)
	if limit == 0 {
		limit = int64(s.cfg.ListMaxRows)
		fits, err := listFits(ctx, sn, q, limit, key)
		if err != nil {
			return err
		}
		if !fits {
			return api.InvalidRequest("the listing has more than %d rows, the most one answer holds (ROLLOUT_LIST_MAX_ROWS); %s",
				limit, pageOrStream)
		}
	}
	rdr, err := sn.Scan(ctx, wal.ScanOptions{Columns: cols, Filter: q.filter, Offset: int64(q.offset), Limit: limit + 1})
	if err != nil {
		return err
	}
	defer rdr.Release()
	more := rdr.Next()
	if !more && rdr.Err() != nil {
		return rdr.Err()
	}
	cw := &countingWriter{w: w}
	w.Header().Set("Content-Type", api.ContentTypeJSON)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	lw := newWriter(cw)
	cut := func(err error) error {
		if cw.n > 0 {
			return &errStreamCut{err}
		}
		return err
	}
	n, hasMore := int64(0), false
	for ; more; more = rdr.Next() {
		rec := rdr.RecordBatch()
		take := min(rec.NumRows(), limit-n)
		if take < rec.NumRows() {
			hasMore = true
		}
		if take > 0 {
			part := rec.NewSlice(0, take)
			err := lw.WriteBatch(part)
			part.Release()
			if err != nil {
				return cut(err)
			}
			n += take
		}
		if hasMore {
			break
		}
	}
	if err := rdr.Err(); err != nil {
		return cut(err)
	}
	if q.limit == 0 && hasMore {
		// The count said every row fits; the same snapshot now has more. Cut rather
		// than send a complete-looking partial answer.
		return cut(fmt.Errorf("worker: list of %d counted rows found more", limit))
	}
	if err := lw.Close(hasMore, int(limit), q.offset); err != nil {
		return &errStreamCut{err}
	}
	return nil
}

// listFits tells whether a list query matches at most max rows. It counts them
// reading only the key column (and the filter's), stopping at max+1; a snapshot with
// at most max rows in all needs no scan.
func listFits(ctx context.Context, sn *wal.Snapshot, q listQuery, max int64, key string) (bool, error) {
	if sn.PendingGenerations() == 0 && sn.Base().CountRows()+sn.MemtableRows() <= max {
		return true, nil // an upper bound of the matching rows
	}
	rdr, err := sn.Scan(ctx, wal.ScanOptions{Columns: []string{key}, Filter: q.filter,
		Offset: int64(q.offset), Limit: max + 1})
	if err != nil {
		return false, err
	}
	defer rdr.Release()
	var n int64
	for rdr.Next() {
		n += rdr.RecordBatch().NumRows()
	}
	return n <= max, rdr.Err()
}

// listWriter writes a list answer: the rows of each batch, then the paging fields.
type listWriter interface {
	WriteBatch(rec arrow.RecordBatch) error
	Close(hasMore bool, limit, offset int) error
}

// rolloutList lists rollout records without their payloads.
type rolloutList struct{ *rollout.ListWriter }

func (l rolloutList) WriteBatch(rec arrow.RecordBatch) error {
	return l.ListWriter.WriteBatch(rec, false)
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// pathNameID returns the validated {name} and {id} of the request path.
func pathNameID(r *http.Request) (string, string, error) {
	name, err := pathName(r)
	if err != nil {
		return "", "", err
	}
	id := r.PathValue("id")
	return name, id, api.ValidateID(id)
}

func (s *Server) handleGet(w http.ResponseWriter, r *http.Request) {
	name, id, err := pathNameID(r)
	if err == nil {
		_, err = api.Query(r)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ctx := r.Context()
	var out *rollout.Record
	err = s.withShard(ctx, s.rollouts, name, func(h *handle) error {
		return s.readRetry(ctx, h, func(sn *wal.Snapshot) error {
			rec, ok, err := sn.Get(ctx, id, rollout.DefaultReadColumns(sn.Base().Schema().Arrow()))
			if err != nil || !ok {
				return err
			}
			defer rec.Release()
			recs, err := rollout.FromBatch(rec, false)
			if err != nil {
				return err
			}
			if len(recs) == 1 {
				out = &recs[0]
			}
			return nil
		})
	})
	if err != nil {
		s.fail(w, r, err)
		return
	}
	// A missing record is {"record": null}, as in the reference; an unknown store was
	// a 404 above.
	api.WriteJSON(w, http.StatusOK, api.GetRecordResponse[*rollout.Record]{Record: out})
}

func (s *Server) handleBlob(w http.ResponseWriter, r *http.Request) {
	name, id, err := pathNameID(r)
	if err == nil {
		_, err = api.Query(r)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	ctx := r.Context()
	var payload []byte
	var found bool
	err = s.withShard(ctx, s.rollouts, name, func(h *handle) error {
		return s.readRetry(ctx, h, func(sn *wal.Snapshot) error {
			rec, ok, err := sn.Get(ctx, id, []string{rollout.ColBinaryPayload})
			if err != nil || !ok {
				return err
			}
			defer rec.Release()
			b, ok, err := binaryValue(rec.Column(0))
			if err != nil || !ok {
				return err
			}
			// The batch's buffers go back to the allocator on Release: keep a copy.
			payload, found = append([]byte(nil), b...), true
			return nil
		})
	})
	if err == nil && !found {
		err = api.NotFound("record %q of rollout store %q has no payload", id, name)
	}
	if err != nil {
		s.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", api.ContentTypeOctetStream)
	w.Header().Set("Content-Length", strconv.Itoa(len(payload)))
	w.WriteHeader(http.StatusOK)
	for off := 0; off < len(payload); off += blobFrame {
		if _, err := w.Write(payload[off:min(off+blobFrame, len(payload))]); err != nil {
			return // the client went away
		}
	}
}

// binaryValue reads row 0 of a binary column (ok false when null).
func binaryValue(col arrow.Array) ([]byte, bool, error) {
	if col.Len() == 0 || col.IsNull(0) {
		return nil, false, nil
	}
	switch a := col.(type) {
	case *array.LargeBinary:
		return a.Value(0), true, nil
	case *array.Binary:
		return a.Value(0), true, nil
	}
	return nil, false, fmt.Errorf("worker: %s column has type %s", rollout.ColBinaryPayload, col.DataType())
}

func (s *Server) handleArrow(w http.ResponseWriter, r *http.Request) {
	name, err := pathName(r)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	q, err := api.Query(r, "columns", "filter")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	colsParam, err := api.QueryString(q, "columns")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	filter, err := api.QueryString(q, "filter")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if len(filter) > expr.MaxInputLen {
		s.fail(w, r, api.InvalidRequest("filter is %d bytes long; the limit is %d", len(filter), expr.MaxInputLen))
		return
	}
	ctx := r.Context()
	err = s.withShard(ctx, s.rollouts, name, func(h *handle) error {
		return s.readRetry(ctx, h, func(sn *wal.Snapshot) error {
			sch := sn.Base().Schema().Arrow()
			cols, err := rollout.ParseColumns(colsParam, sch)
			if err != nil {
				return err
			}
			if err := checkFilter(filter, sch); err != nil {
				return err
			}
			return s.writeArrow(ctx, w, sn, wal.ScanOptions{Columns: cols, Filter: filter})
		})
	})
	if err != nil {
		s.streamFailed(w, r, "arrow", err)
	}
}

// checkFilter parses and binds a filter against the store's schema, so that a bad
// one is a 400 naming the problem rather than a failed scan.
func checkFilter(filter string, sch *arrow.Schema) error {
	if filter == "" {
		return nil
	}
	e, err := expr.Parse(filter)
	if err != nil {
		return api.InvalidRequest("filter: %v", err).WithCause(err)
	}
	if _, err := expr.Bind(e, sch); err != nil {
		return api.InvalidRequest("filter: %v", err).WithCause(err)
	}
	return nil
}

// writeArrow streams the scan as an Arrow IPC stream. Nothing is sent until the
// first batch was read.
func (s *Server) writeArrow(ctx context.Context, w http.ResponseWriter, sn *wal.Snapshot, opts wal.ScanOptions) error {
	rdr, err := sn.Scan(ctx, opts)
	if err != nil {
		return err
	}
	defer rdr.Release()
	more := rdr.Next()
	if !more && rdr.Err() != nil {
		return rdr.Err()
	}
	w.Header().Set("Content-Type", api.ContentTypeArrowStream)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	iw := ipc.NewWriter(w, ipc.WithSchema(rdr.Schema()))
	for ; more; more = rdr.Next() {
		if err := iw.Write(rdr.RecordBatch()); err != nil {
			// No Close: its end-of-stream marker would make the cut stream look whole.
			return &errStreamCut{err}
		}
	}
	if err := rdr.Err(); err != nil {
		return &errStreamCut{err}
	}
	if err := iw.Close(); err != nil {
		return &errStreamCut{err}
	}
	return nil
}
