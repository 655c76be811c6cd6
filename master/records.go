package master

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/lance/expr"
	"github.com/lancectx/lancectx/rollout"
	"github.com/lancectx/lancectx/storekind"
	"github.com/lancectx/lancectx/wal"
)

// The record sources of GET /api/v1/experiments/{name}/records (the reference's).
const (
	// sourceFragments reads the base table as merges committed it.
	sourceFragments = "fragments"
	// sourceWAL reads the sealed WAL generations not merged yet.
	sourceWAL = "wal"
	// sourceAll reads both, newest row per id (what the worker's reads answer, less
	// what a worker holds only in memory).
	sourceAll = "all"
)

// recordFilterColumns are the equality filters the reference's records route takes.
var recordFilterColumns = []string{"id", "rollout_id", "problem_id", "dataset", "role", "content_type", "policy_version", "artifact_type"}

// recordsKind refuses a records route for a store kind other than rollout: the
// reference's routes serve rollout records (RolloutRecordDto); the other kinds' rows
// are read through their worker routes or SQL (POST .../query).
func recordsKind(kind storekind.Kind) error {
	if kind.Name != storekind.Rollout.Name {
		return api.InvalidRequest("the records routes read rollout stores; read a %s through the worker's /api/v1/%s routes or "+
			"POST /api/v1/experiments/{name}/query?kind=%s", kind.Noun, kindRoute(kind), kind.Name)
	}
	return nil
}

func kindRoute(kind storekind.Kind) string {
	if kind.Name == storekind.Rollout.Name {
		return "rollouts"
	}
	return kind.Name
}

// handleListRecords answers GET /api/v1/experiments/{name}/records: a page of
// records from the base table (source=fragments, the default), the sealed WAL
// generations (wal) or both (all), filtered by the reference's equality parameters
// and by filter (a SQL predicate, as on the worker).
func (m *Master) handleListRecords(w http.ResponseWriter, r *http.Request) {
	params := append([]string{"kind", "source", "limit", "offset", "filter", "include_in_training"}, recordFilterColumns...)
	q, err := api.Query(r, params...)
	if err != nil {
		m.fail(w, err)
		return
	}
	kind, name, err := m.experiment(r.Context(), r, q)
	if err == nil {
		err = recordsKind(kind)
	}
	if err != nil {
		m.fail(w, err)
		return
	}
	source := q.Get("source")
	if source == "" {
		source = sourceFragments
	}
	if source != sourceFragments && source != sourceWAL && source != sourceAll {
		m.fail(w, api.InvalidRequest("source=%q: want fragments, wal or all", truncateStr(source, 32)))
		return
	}
	// The reference clamps limit to 1..100 (default 25) rather than refusing it.
	limit, err := api.QueryInt(q, "limit", 25, -1<<31, 1<<31)
	if err != nil {
		m.fail(w, err)
		return
	}
	limit = min(max(limit, 1), 100)
	offset, err := api.QueryInt(q, "offset", 0, 0, 1_000_000)
	if err != nil {
		m.fail(w, err)
		return
	}
	filter, err := recordsFilter(q)
	if err != nil {
		m.fail(w, err)
		return
	}
	ctx := r.Context()
	sn, err := wal.ReadSnapshot(ctx, m.datasetStore(kind, name), nil, wal.ReadOptions{KeyColumn: kind.KeyColumn})
	if err != nil {
		m.fail(w, err)
		return
	}
	if err := checkFilterColumns(filter, sn); err != nil {
		m.fail(w, err)
		return
	}
	recs, hasMore, err := readRecords(ctx, sn, wal.ScanOptions{Filter: filter, Offset: offset, Limit: limit + 1,
		BaseOnly: source == sourceFragments, SkipBase: source == sourceWAL,
		Columns: rollout.DefaultReadColumns(sn.Base().Schema().Arrow())}, int(limit))
	if err != nil {
		m.fail(w, filterErr(err))
		return
	}
	api.WriteJSON(w, http.StatusOK, api.ExperimentRecordsResponse[rollout.Record]{Records: recs, HasMore: hasMore,
		Limit: int(limit), Offset: int(offset), Source: source})
}

// recordsFilter is the SQL predicate of the route's filters, ANDed.
func recordsFilter(q url.Values) (string, error) {
	var terms []string
	for _, col := range recordFilterColumns {
		if v, ok := q[col]; ok {
			terms = append(terms, expr.QuoteIdent(col)+" = '"+strings.ReplaceAll(v[0], "'", "''")+"'")
		}
	}
	if _, ok := q["include_in_training"]; ok {
		b, err := api.QueryBool(q, "include_in_training", false)
		if err != nil {
			return "", err
		}
		terms = append(terms, fmt.Sprintf("include_in_training = %t", b))
	}
	if f := q.Get("filter"); f != "" {
		if len(f) > expr.MaxInputLen {
			return "", api.InvalidRequest("filter is %d bytes long; the limit is %d", len(f), expr.MaxInputLen)
		}
		if _, err := expr.Parse(f); err != nil {
			return "", api.InvalidRequest("filter: %v", err).WithCause(err)
		}
		terms = append(terms, "("+f+")")
	}
	return strings.Join(terms, " AND "), nil
}

// checkFilterColumns refuses a filter naming a column the store does not have.
func checkFilterColumns(filter string, sn *wal.Snapshot) error {
	if filter == "" {
		return nil
	}
	e, err := expr.Parse(filter)
	if err != nil {
		return api.InvalidRequest("filter: %v", err).WithCause(err)
	}
	for _, c := range e.Columns() {
		if sn.Base().Schema().Field(c) == nil {
			return api.InvalidRequest("filter: no column %q in the store", truncateStr(c, 64))
		}
	}
	return nil
}

// filterErr turns a filter the table cannot bind (unknown column, wrong type) into a 400.
func filterErr(err error) error {
	if errors.Is(err, expr.ErrInvalid) {
		return api.InvalidRequest("filter: %v", err).WithCause(err)
	}
	return err
}

// readRecords reads up to limit records of a scan asking for limit+1 rows; hasMore
// tells whether the extra row came.
func readRecords(ctx context.Context, sn *wal.Snapshot, opts wal.ScanOptions, limit int) ([]rollout.Record, bool, error) {
	rdr, err := sn.Scan(ctx, opts)
	if err != nil {
		return nil, false, err
	}
	defer rdr.Release()
	out := []rollout.Record{}
	for rdr.Next() {
		recs, err := rollout.FromBatch(rdr.RecordBatch(), false)
		if err != nil {
			return nil, false, err
		}
		out = append(out, recs...)
	}
	if err := rdr.Err(); err != nil {
		return nil, false, err
	}
	if len(out) > limit {
		return out[:limit], true, nil
	}
	return out, false, nil
}

// handleGetRecord answers GET /api/v1/experiments/{name}/records/{id}: the newest
// record of the id (base and sealed WAL generations), without its binary payload.
func (m *Master) handleGetRecord(w http.ResponseWriter, r *http.Request) {
	q, err := api.Query(r, "kind")
	if err != nil {
		m.fail(w, err)
		return
	}
	rec, err := m.record(r, q, false)
	if err != nil {
		m.fail(w, err)
		return
	}
	api.WriteJSON(w, http.StatusOK, api.GetRecordResponse[rollout.Record]{Record: *rec})
}

// record reads the {id} record of the {name} store, with its payload when asked.
func (m *Master) record(r *http.Request, q url.Values, withPayload bool) (*rollout.Record, error) {
	kind, name, err := m.experiment(r.Context(), r, q)
	if err == nil {
		err = recordsKind(kind)
	}
	if err != nil {
		return nil, err
	}
	id := r.PathValue("id")
	if err := api.ValidateIDField("id", id); err != nil {
		return nil, err
	}
	ctx := r.Context()
	sn, err := wal.ReadSnapshot(ctx, m.datasetStore(kind, name), nil, wal.ReadOptions{KeyColumn: kind.KeyColumn})
	if err != nil {
		return nil, err
	}
	cols := rollout.DefaultReadColumns(sn.Base().Schema().Arrow())
	if withPayload {
		cols = nil
	}
	rec, ok, err := sn.Get(ctx, id, cols)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, api.NotFound("experiment %q has no record %q", name, api.QuoteTrunc(id, 100))
	}
	defer rec.Release()
	recs, err := rollout.FromBatch(rec, withPayload)
	if err != nil {
		return nil, err
	}
	return &recs[0], nil
}

// handleRecordBlob answers GET /api/v1/experiments/{name}/records/{id}/blob: the
// record's binary payload, typed by its content_type (else octet-stream), as an
// attachment named by user_metadata's "filename" or the id (sanitized).
func (m *Master) handleRecordBlob(w http.ResponseWriter, r *http.Request) {
	q, err := api.Query(r, "kind")
	if err != nil {
		m.fail(w, err)
		return
	}
	rec, err := m.record(r, q, true)
	if err != nil {
		m.fail(w, err)
		return
	}
	if rec.BinaryPayload == nil {
		m.fail(w, api.NotFound("record %q has no binary payload", api.QuoteTrunc(rec.ID, 100)))
		return
	}
	ct := "application/octet-stream"
	if rec.ContentType != "" {
		if _, _, err := mime.ParseMediaType(rec.ContentType); err == nil {
			ct = rec.ContentType
		}
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": blobFilename(rec)}))
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(rec.BinaryPayload)
}

var unsafeFilename = regexp.MustCompile(`[^A-Za-z0-9._-]`)

// blobFilename is the reference's attachment name: user_metadata's "filename", else
// the id, reduced to [A-Za-z0-9._-] and 180 bytes, else "rollout-blob".
func blobFilename(rec *rollout.Record) string {
	name := rec.ID
	if rec.UserMetadata != nil {
		var meta struct {
			Filename string `json:"filename"`
		}
		if json.Unmarshal([]byte(*rec.UserMetadata), &meta) == nil && meta.Filename != "" {
			name = meta.Filename
		}
	}
	name = unsafeFilename.ReplaceAllString(name, "_")
	if len(name) > 180 {
		name = name[:180]
	}
	if strings.Trim(name, "._") == "" {
		return "rollout-blob"
	}
	return name
}
