package master

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/sqlquery"
	"github.com/lancectx/lancectx/wal"
)

// queryTimeout bounds a SQL query: loading the store's rows and running the statement.
const queryTimeout = 60 * time.Second

// handleQuery answers POST /api/v1/experiments/{name}/query: one read-only SELECT
// over the table `records` (the store's base table and its pending WAL generations,
// newest row per key; binary columns left out), through sqlquery (DuckDB), which reads
// only the columns the statement names. A statement without a top-level LIMIT over a
// store of more than sqlquery.DefaultMaxRows rows is refused before anything is read.
func (m *Master) handleQuery(w http.ResponseWriter, r *http.Request) {
	q, err := api.Query(r, "kind")
	if err != nil {
		m.fail(w, err)
		return
	}
	var req api.QueryRequest
	if err := api.DecodeJSON(r, sqlquery.MaxSQLBytes+1024, &req); err != nil {
		m.fail(w, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), queryTimeout)
	defer cancel()
	kind, name, err := m.experiment(ctx, r, q)
	if err != nil {
		m.fail(w, err)
		return
	}
	sn, err := wal.ReadSnapshot(ctx, m.datasetStore(kind, name), nil, wal.ReadOptions{KeyColumn: kind.KeyColumn})
	if err != nil {
		m.fail(w, err)
		return
	}
	var fields []arrow.Field
	for _, f := range sn.Base().Schema().Arrow().Fields() {
		if sqlquery.Supported(f.Type) {
			fields = append(fields, f)
		}
	}
	src := sqlquery.Source{
		Schema: arrow.NewSchema(fields, nil),
		Rows:   int(sn.Base().CountRows() + sn.PendingRows()),
		Open: func(ctx context.Context, columns []string) (array.RecordReader, error) {
			return sn.Scan(ctx, wal.ScanOptions{Columns: columns})
		},
	}
	res, err := sqlquery.Query(ctx, src, req.SQL, sqlquery.Options{})
	if errors.Is(err, sqlquery.ErrTooManyRows) {
		m.fail(w, api.InvalidRequest("%s; or read the experiment with the dataset tools (lancectx dataset scan) or LanceDB",
			strings.TrimPrefix(err.Error(), "sqlquery: ")).WithCause(err))
		return
	}
	switch {
	case errors.Is(err, sqlquery.ErrInvalid):
		m.fail(w, api.InvalidRequest("%s", strings.TrimPrefix(err.Error(), "sqlquery: ")).WithCause(err))
		return
	case ctx.Err() != nil && r.Context().Err() == nil:
		m.fail(w, api.InvalidRequest("the query ran past its %s limit; narrow it", queryTimeout).WithCause(err))
		return
	case err != nil:
		m.fail(w, err)
		return
	}
	api.WriteJSON(w, http.StatusOK, api.QueryResponse{Columns: res.Columns, Rows: res.Rows, RowCount: res.RowCount, Truncated: res.Truncated})
}
