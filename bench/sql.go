package bench

import (
	"bytes"
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	duckdb "github.com/duckdb/duckdb-go/v2"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/master"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/registry"
	"github.com/lancectx/lancectx/rollout"
	"github.com/lancectx/lancectx/wal"
)

// Bench names of the sql section (issue 14).
const benchSQLQuery = "sql-query"

// sqlExperiment is the experiment of the sql fixture.
const sqlExperiment = "sql-1m"

// SQLGroupBy is the statement the sql section times (issue 14's query: GROUP BY
// rollout_id with avg(reward)). Its LIMIT lets it scan more than the 200,000 rows a
// statement without one may.
const SQLGroupBy = `SELECT rollout_id, avg(reward) AS avg_reward, count(*) AS steps FROM records GROUP BY rollout_id ORDER BY avg_reward DESC, rollout_id LIMIT 100`

// SQLQueryOptions configure `lancebench sql-query`.
type SQLQueryOptions struct {
	// Fixture is the directory of the fixture (built once, reused while its marker
	// matches); URI the hard-linked copy the master serves.
	Fixture, URI string
	// Rows in all; PendingRows of them in sealed WAL generations of 10,000 rows.
	Rows, PendingRows int
	// Iters is the number of timed queries of each side.
	Iters int
}

// SQLQueryResult is the output of sql-query.
type SQLQueryResult struct {
	Cmd         string `json:"cmd"`
	Side        string `json:"side"`
	Rows        int    `json:"rows"`
	BaseRows    int    `json:"base_rows"`
	PendingRows int    `json:"pending_rows"`
	Query       string `json:"query"`
	// Seconds are the end-to-end times of POST /api/v1/experiments/{name}/query
	// against a real master (HTTP on loopback, JSON decoded).
	Seconds []float64 `json:"seconds"`
	Median  float64   `json:"median_seconds"`
	// Groups is the row count of the master's answer (the LIMIT).
	Groups int `json:"groups"`
	// DuckDBParquetSeconds are the times of the same statement in DuckDB (one thread,
	// as the master's) over a Parquet export of the same rows: the physical
	// reference, reading a columnar file with no WAL to fold in.
	DuckDBParquetSeconds []float64 `json:"duckdb_parquet_seconds"`
	DuckDBParquetMedian  float64   `json:"duckdb_parquet_median_seconds"`
	ParquetBytes         int64     `json:"parquet_bytes"`
	// Same reports whether both answers are equal.
	Same bool `json:"same_answer"`
	// DuckDB is the version of the DuckDB library (SELECT version()).
	DuckDB  string           `json:"duckdb_version"`
	Fixture GenFixtureResult `json:"fixture"`
}

// SQLQuery builds (or reuses) a fixture of one rollout experiment with o.Rows rows,
// o.PendingRows of them pending in the WAL, serves a hard-linked copy with a real
// master and times the GROUP BY through the query route, then the same
// statement in DuckDB over a Parquet export of the rows.
func SQLQuery(ctx context.Context, o SQLQueryOptions) (*SQLQueryResult, error) {
	if o.Fixture == "" || o.URI == "" {
		return nil, fmt.Errorf("%w: sql-query needs --fixture and --uri", ErrUsage)
	}
	if o.Iters <= 0 {
		o.Iters = 5
	}
	if o.PendingRows > o.Rows || o.Rows <= 0 {
		return nil, fmt.Errorf("%w: sql-query: --rows %d, pending %d", ErrUsage, o.Rows, o.PendingRows)
	}
	fx, err := fixture(o.Fixture, "gen-sql", FixtureMarker{Generator: fmt.Sprintf("sql-v1-pending-%d", o.PendingRows), Experiments: 1, Versions: o.Rows},
		func() error { return buildSQLFixture(ctx, o.Fixture, o.Rows, o.PendingRows) })
	if err != nil {
		return nil, fmt.Errorf("sql fixture: %w", err)
	}
	if err := os.RemoveAll(o.URI); err != nil {
		return nil, err
	}
	if _, err := LinkTree(o.Fixture, o.URI); err != nil {
		return nil, err
	}
	res := &SQLQueryResult{Cmd: benchSQLQuery, Side: SideGo, Rows: o.Rows, BaseRows: o.Rows - o.PendingRows, PendingRows: o.PendingRows, Query: SQLGroupBy, Fixture: *fx}

	set := master.DefaultSettings()
	set.StatsScanInterval, set.MergeWALInterval, set.CompactionInterval, set.CleanupInterval, set.StatsRefreshInterval = 0, 0, 0, 0, 0
	env, err := startMaster(ctx, o.URI, set)
	if err != nil {
		return nil, err
	}
	defer env.close()
	body, _ := json.Marshal(api.QueryRequest{SQL: SQLGroupBy})
	var answer api.QueryResponse
	for i := range o.Iters + 1 {
		t0 := time.Now()
		resp, err := http.Post(env.url+"/api/v1/experiments/"+sqlExperiment+"/query", "application/json", bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("query: %d %s", resp.StatusCode, raw)
		}
		answer = api.QueryResponse{}
		if err := json.Unmarshal(raw, &answer); err != nil {
			return nil, err
		}
		if i > 0 { // the first query warms the page cache and the process
			res.Seconds = append(res.Seconds, time.Since(t0).Seconds())
		}
	}
	res.Groups = answer.RowCount
	res.Median = medianSeconds(res.Seconds)

	parquet := filepath.Join(filepath.Dir(o.URI), "sql-export.parquet")
	defer os.Remove(parquet)
	if err := exportParquet(ctx, env.data, parquet); err != nil {
		return nil, fmt.Errorf("parquet export: %w", err)
	}
	if st, err := os.Stat(parquet); err == nil {
		res.ParquetBytes = st.Size()
	}
	var ref [][]any
	for i := range o.Iters + 1 {
		rows, secs, err := duckdbParquet(ctx, parquet)
		if err != nil {
			return nil, fmt.Errorf("duckdb over parquet: %w", err)
		}
		if i > 0 {
			res.DuckDBParquetSeconds = append(res.DuckDBParquetSeconds, secs)
		}
		ref = rows
	}
	res.DuckDBParquetMedian = medianSeconds(res.DuckDBParquetSeconds)
	if c, err := duckdb.NewConnector("", nil); err == nil {
		db := sql.OpenDB(c)
		_ = db.QueryRowContext(ctx, "SELECT version()").Scan(&res.DuckDB)
		db.Close()
	}
	a, _ := json.Marshal(answer.Rows)
	b, _ := json.Marshal(ref)
	res.Same = bytes.Equal(a, b)
	return res, nil
}

func medianSeconds(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return Median(s)
}

// buildSQLFixture writes the experiment: rollouts of 100 steps with rewards in
// [0, 1), a short content per step; the base table in 100,000-row appends, then the
// pending rows as sealed WAL generations of 10,000 rows through a shard, as a worker
// seals them.
func buildSQLFixture(ctx context.Context, dir string, rows, pending int) error {
	fx, err := newFixtureStore(dir)
	if err != nil {
		return err
	}
	defer fx.Close()
	reg := registry.New(fx, "rollout")
	entry, err := reg.Create(ctx, sqlExperiment, time.Now())
	if err != nil {
		return err
	}
	st := objstore.Prefixed(fx, reg.DatasetDir(sqlExperiment))
	content := "step content: the quick brown fox jumps over the lazy dog"
	batch := func(start, n int) (arrow.RecordBatch, error) {
		recs := make([]rollout.AddRecord, n)
		for k := range recs {
			i := start + k
			reward := float32((i*7919)%1000) / 1000
			recs[k] = rollout.AddRecord{ID: fmt.Sprintf("step-%08d", i), RolloutID: fmt.Sprintf("rollout-%06d", i/100), ProblemID: fmt.Sprintf("p-%d", i/1000),
				SequenceOrder: int32(i % 100), Role: "assistant", Content: &content, ContentType: rollout.DefaultContentType,
				Reward: &reward, CreatedAt: time.Unix(1767225600+int64(i), 0)}
		}
		return rollout.ToBatch(recs, rollout.Schema())
	}
	base := rows - pending
	const chunk = 100_000
	for start := 0; start < base; start += chunk {
		rec, err := batch(start, min(chunk, base-start))
		if err != nil {
			return err
		}
		rdr, err := array.NewRecordReader(rollout.Schema(), []arrow.RecordBatch{rec})
		rec.Release()
		if err != nil {
			return err
		}
		opts := lance.WriteOptions{Mode: lance.ModeAppend}
		if start == 0 {
			opts = lance.WriteOptions{Mode: lance.ModeCreate, Config: map[string]string{wal.IncarnationKey: entry.Incarnation}, FirstVersion: entry.FirstVersion}
		}
		_, err = lance.WriteStore(ctx, st, rdr, opts)
		rdr.Release()
		if err != nil {
			return err
		}
	}
	if pending == 0 {
		return nil
	}
	sh, err := wal.Open(ctx, wal.Options{Store: st, WorkerID: "bench", Incarnation: entry.Incarnation, KeyColumn: rollout.KeyColumn,
		SealInterval: time.Hour, MaxPendingGenerations: 100_000})
	if err != nil {
		return err
	}
	const gen = 10_000
	for start := base; start < rows; start += gen {
		rec, err := batch(start, min(gen, rows-start))
		if err != nil {
			_ = sh.Close(ctx)
			return err
		}
		_, err = sh.Append(ctx, rec)
		rec.Release()
		if err == nil {
			err = sh.Flush(ctx)
		}
		if err != nil {
			_ = sh.Close(ctx)
			return err
		}
	}
	return sh.Close(ctx)
}

// exportParquet writes the experiment's rows (base and WAL, as the query route reads
// them) that the statement uses, plus id and content, to a Parquet file with DuckDB.
func exportParquet(ctx context.Context, data objstore.Store, path string) error {
	reg := registry.New(data, "rollout")
	sn, err := wal.ReadSnapshot(ctx, objstore.Prefixed(data, reg.DatasetDir(sqlExperiment)), nil, wal.ReadOptions{KeyColumn: rollout.KeyColumn})
	if err != nil {
		return err
	}
	cols := []string{rollout.ColID, rollout.ColRolloutID, rollout.ColSequenceOrder, "reward", rollout.ColContent}
	rdr, err := sn.Scan(ctx, wal.ScanOptions{Columns: cols})
	if err != nil {
		return err
	}
	defer rdr.Release()
	c, err := duckdb.NewConnector("?threads=1", nil)
	if err != nil {
		return err
	}
	db := sql.OpenDB(c)
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `CREATE TABLE records (id VARCHAR, rollout_id VARCHAR, sequence_order INTEGER, reward FLOAT, content VARCHAR)`); err != nil {
		return err
	}
	err = conn.Raw(func(dc any) error {
		app, err := duckdb.NewAppenderFromConn(dc.(driver.Conn), "", "records")
		if err != nil {
			return err
		}
		for rdr.Next() {
			rec := rdr.RecordBatch()
			id := rec.Column(0).(*array.String)
			ro := rec.Column(1).(*array.String)
			so := rec.Column(2).(*array.Int32)
			rw := rec.Column(3).(*array.Float32)
			co := rec.Column(4).(*array.LargeString)
			for i := range int(rec.NumRows()) {
				var reward, content driver.Value
				if rw.IsValid(i) {
					reward = rw.Value(i)
				}
				if co.IsValid(i) {
					content = co.Value(i)
				}
				if err := app.AppendRow(id.Value(i), ro.Value(i), so.Value(i), reward, content); err != nil {
					_ = app.Close()
					return err
				}
			}
		}
		if err := rdr.Err(); err != nil {
			_ = app.Close()
			return err
		}
		return app.Close()
	})
	if err != nil {
		return err
	}
	_, err = conn.ExecContext(ctx, fmt.Sprintf(`COPY records TO '%s' (FORMAT parquet)`, path))
	return err
}

// duckdbParquet runs SQLGroupBy over the Parquet file in a new one-thread database
// (as the master's query runs) and returns the answer in the API's JSON shape.
func duckdbParquet(ctx context.Context, path string) ([][]any, float64, error) {
	t0 := time.Now()
	c, err := duckdb.NewConnector("?threads=1", nil)
	if err != nil {
		return nil, 0, err
	}
	db := sql.OpenDB(c)
	defer db.Close()
	q := fmt.Sprintf("WITH records AS (SELECT * FROM read_parquet('%s')) %s", path, SQLGroupBy)
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	var out [][]any
	for rows.Next() {
		var id string
		var avg float64
		var n int64
		if err := rows.Scan(&id, &avg, &n); err != nil {
			return nil, 0, err
		}
		out = append(out, []any{id, avg, n})
	}
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	return out, time.Since(t0).Seconds(), nil
}
