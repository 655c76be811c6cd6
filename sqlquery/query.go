package sqlquery

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	duckdb "github.com/duckdb/duckdb-go/v2"
)

// Limits of a query (the reference's).
const (
	// DefaultMaxRows bounds the rows a statement without a LIMIT may scan.
	DefaultMaxRows = 200_000
	// DefaultMaxLimitedRows bounds the rows a statement with a top-level LIMIT may
	// scan (an aggregate such as GROUP BY ... LIMIT over a large experiment).
	DefaultMaxLimitedRows = 5_000_000
	// DefaultMaxResultRows bounds the rows of an answer; more are cut (Truncated).
	DefaultMaxResultRows = 10_000
	// MaxSQLBytes bounds the statement text.
	MaxSQLBytes = 64 << 10
	// TableName is the table the statement reads.
	TableName = "records"
	// scanFunction is the table function behind the view TableName.
	scanFunction = "lancectx_scan"
)

// ErrInvalid marks a statement refused or failed for what it says (syntax, unknown
// column, not a SELECT, more than one statement, a function that needs access the
// database does not have): the caller's mistake, a 400.
var ErrInvalid = errors.New("sqlquery: invalid query")

// ErrTooManyRows: the source holds more rows than the statement may scan
// (Options.MaxRows without a LIMIT, Options.MaxLimitedRows with one).
var ErrTooManyRows = errors.New("sqlquery: too many rows to query")

// Options bound a query. The zero value takes the defaults.
type Options struct {
	// MaxRows is the most source rows a statement without a top-level LIMIT scans
	// (DefaultMaxRows when 0).
	MaxRows int
	// MaxLimitedRows is the most source rows a statement with a top-level LIMIT
	// scans (DefaultMaxLimitedRows when 0).
	MaxLimitedRows int
	// MaxResultRows is the most rows answered (DefaultMaxResultRows when 0).
	MaxResultRows int
	// MemoryLimit is DuckDB's max_memory for the query ("256MB" when empty).
	MemoryLimit string
}

func (o Options) withDefaults() Options {
	if o.MaxRows <= 0 {
		o.MaxRows = DefaultMaxRows
	}
	if o.MaxLimitedRows <= 0 {
		o.MaxLimitedRows = DefaultMaxLimitedRows
	}
	if o.MaxResultRows <= 0 {
		o.MaxResultRows = DefaultMaxResultRows
	}
	if o.MemoryLimit == "" {
		o.MemoryLimit = "256MB"
	}
	return o
}

// Source is the table a statement reads.
type Source struct {
	// Schema is every column of the table (see Supported).
	Schema *arrow.Schema
	// Rows is the number of rows the table holds, known before it is read (a store's
	// base rows plus its pending WAL rows): the bounds are checked against it before
	// any row is read, and again while rows stream.
	Rows int
	// Open reads every row of the named columns (a subset of Schema's, in its order),
	// once, when the statement first needs rows: only the columns the statement uses
	// are read.
	Open func(ctx context.Context, columns []string) (array.RecordReader, error)
}

// ReaderSource is a Source over batches already at hand (every column of rdr's
// schema is read; Rows is counted as they stream, so no bound is known before).
func ReaderSource(rdr array.RecordReader) Source {
	return Source{Schema: rdr.Schema(), Rows: -1, Open: func(context.Context, []string) (array.RecordReader, error) {
		rdr.Retain()
		return rdr, nil
	}}
}

// Result is an answer: column names, rows of JSON-ready values (strings, numbers,
// booleans, nil, lists, objects; timestamps as RFC 3339 strings, bytes as base64 by
// encoding/json), and whether rows were cut at Options.MaxResultRows.
type Result struct {
	Columns   []string `json:"columns"`
	Rows      [][]any  `json:"rows"`
	RowCount  int      `json:"row_count"`
	Truncated bool     `json:"truncated"`
	// SourceRows is the number of rows the statement read from the table.
	SourceRows int `json:"-"`
}

// Query runs statement over src as the table `records` of a new in-memory database
// and returns the answer. The table is a view over a table function that streams
// src's batches into DuckDB's vectors as the statement pulls them, so no row is
// copied into a DuckDB table and only the columns the statement names are read; the
// row bounds of opts are checked before the first row is read (src.Rows) and while
// rows stream. ctx bounds the whole query, interrupting DuckDB when it ends.
func Query(ctx context.Context, src Source, statement string, opts Options) (Result, error) {
	opts = opts.withDefaults()
	statement = strings.TrimSpace(statement)
	switch {
	case statement == "":
		return Result{}, fmt.Errorf("%w: sql is empty", ErrInvalid)
	case len(statement) > MaxSQLBytes:
		return Result{}, fmt.Errorf("%w: sql is %d bytes, over the %d byte limit", ErrInvalid, len(statement), MaxSQLBytes)
	}
	cols, err := tableColumns(src.Schema)
	if err != nil {
		return Result{}, err
	}
	db, err := open(opts)
	if err != nil {
		return Result{}, err
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("sqlquery: connect: %w", err)
	}
	defer conn.Close()
	limited, err := hasTopLevelLimit(ctx, conn, statement)
	if err != nil {
		return Result{}, err
	}
	bound := opts.MaxRows
	if limited {
		bound = opts.MaxLimitedRows
	}
	if src.Rows > bound {
		return Result{SourceRows: 0}, tooMany(src.Rows, bound, limited, opts)
	}
	sc := &scan{ctx: ctx, src: src, cols: cols, bound: bound, limited: limited, opts: opts}
	defer sc.close()
	if err := duckdb.RegisterTableUDF(conn, scanFunction, duckdb.ChunkTableFunction{
		BindArguments: func(map[string]any, ...any) (duckdb.ChunkTableSource, error) { return sc, nil },
	}); err != nil {
		return Result{}, fmt.Errorf("sqlquery: register the table: %w", err)
	}
	if _, err := conn.ExecContext(ctx, "CREATE TEMP VIEW "+TableName+" AS SELECT * FROM "+scanFunction+"()"); err != nil {
		return Result{}, fmt.Errorf("sqlquery: create the table: %w", err)
	}
	var res Result
	err = conn.Raw(func(dc any) error {
		out, err := run(ctx, dc.(driver.Conn), statement, opts.MaxResultRows)
		res = out
		return err
	})
	res.SourceRows = sc.rows
	if sc.err != nil {
		// The scan's own error (a bound passed while streaming, a failed read) is the
		// cause; DuckDB reports it only as text.
		return Result{SourceRows: sc.rows}, sc.err
	}
	return res, err
}

func tooMany(rows, bound int, limited bool, opts Options) error {
	if limited {
		return fmt.Errorf("%w: the store holds %d rows, more than the %d a query scans", ErrTooManyRows, rows, bound)
	}
	return fmt.Errorf("%w: the store holds %d rows, more than the %d a query without a LIMIT scans "+
		"(a statement ending in LIMIT n scans up to %d)", ErrTooManyRows, rows, bound, opts.MaxLimitedRows)
}

// hasTopLevelLimit reports whether the statement's outermost query ends in a LIMIT,
// read from DuckDB's own parse of it (json_serialize_sql), so that a LIMIT inside a
// subquery, a string or a comment does not count.
func hasTopLevelLimit(ctx context.Context, conn *sql.Conn, statement string) (bool, error) {
	var doc string
	if err := conn.QueryRowContext(ctx, "SELECT CAST(json_serialize_sql(?::VARCHAR) AS VARCHAR)", statement).Scan(&doc); err != nil {
		return false, fmt.Errorf("sqlquery: parse the statement: %w", err)
	}
	var parsed struct {
		Error      bool   `json:"error"`
		Message    string `json:"error_message"`
		Statements []struct {
			Node struct {
				Modifiers []struct {
					Type string `json:"type"`
				} `json:"modifiers"`
			} `json:"node"`
		} `json:"statements"`
	}
	if err := json.Unmarshal([]byte(doc), &parsed); err != nil {
		return false, fmt.Errorf("sqlquery: read the parse of the statement: %w", err)
	}
	if parsed.Error {
		// Not only syntax errors: json_serialize_sql parses only SELECT statements.
		// The statement is prepared next, and refused there with DuckDB's own reason.
		return false, nil
	}
	if len(parsed.Statements) != 1 {
		return false, nil
	}
	for _, m := range parsed.Statements[0].Node.Modifiers {
		if m.Type == "LIMIT_MODIFIER" || m.Type == "LIMIT_PERCENT_MODIFIER" {
			return true, nil
		}
	}
	return false, nil
}

// open opens a private in-memory database that can reach nothing outside itself.
func open(opts Options) (*sql.DB, error) {
	dsn := "?threads=1&max_memory=" + opts.MemoryLimit +
		"&enable_external_access=false&autoinstall_known_extensions=false&autoload_known_extensions=false" +
		"&allow_community_extensions=false&allow_unsigned_extensions=false&lock_configuration=true"
	c, err := duckdb.NewConnector(dsn, nil)
	if err != nil {
		return nil, fmt.Errorf("sqlquery: open the database: %w", err)
	}
	db := sql.OpenDB(c)
	db.SetMaxOpenConns(1)
	return db, nil
}

// scan is the table function behind `records`: DuckDB calls FillChunk for each
// vector of rows it wants; the first call learns which columns the statement uses
// (the projected ones) and opens the source for those alone.
type scan struct {
	ctx     context.Context
	src     Source
	cols    []column
	bound   int
	limited bool
	opts    Options

	rdr    array.RecordReader
	proj   []int // indexes into cols of the projected columns
	arrs   []arrow.Array
	rec    arrow.RecordBatch
	off    int
	rows   int
	done   bool
	err    error
	opened bool
}

// ColumnInfos is every column of the table.
func (s *scan) ColumnInfos() []duckdb.ColumnInfo {
	out := make([]duckdb.ColumnInfo, len(s.cols))
	for i, c := range s.cols {
		out[i] = duckdb.ColumnInfo{Name: c.name, T: c.info}
	}
	return out
}

// Cardinality is the source's row count when known (it helps DuckDB plan joins).
func (s *scan) Cardinality() *duckdb.CardinalityInfo {
	if s.src.Rows < 0 {
		return nil
	}
	return &duckdb.CardinalityInfo{Cardinality: uint(s.src.Rows), Exact: true}
}

// Init does nothing: the source opens on the first FillChunk, when the projection
// is known.
func (s *scan) Init() {}

// FillChunk writes up to a vector of rows into chunk; a chunk of size 0 ends the scan.
func (s *scan) FillChunk(chunk duckdb.DataChunk) error {
	err := s.fill(chunk)
	if err != nil && s.err == nil {
		s.err = err
	}
	return err
}

func (s *scan) fill(chunk duckdb.DataChunk) error {
	if s.err != nil {
		return s.err
	}
	if !s.opened {
		s.opened = true
		var names []string
		for i, c := range s.cols {
			if _, err := chunk.GetVector(i); err == nil {
				s.proj = append(s.proj, i)
				names = append(names, c.name)
			}
		}
		if len(names) == 0 {
			// count(*) and the like read no column: read the smallest one to count rows.
			names = []string{s.cols[0].name}
		}
		rdr, err := s.src.Open(s.ctx, names)
		if err != nil {
			return fmt.Errorf("sqlquery: read the store: %w", err)
		}
		s.rdr = rdr
	}
	capacity := duckdb.GetDataChunkCapacity()
	n := 0
	for n < capacity && !s.done {
		if s.rec == nil || s.off == int(s.rec.NumRows()) {
			if err := s.ctx.Err(); err != nil {
				return err
			}
			if !s.rdr.Next() {
				if err := s.rdr.Err(); err != nil {
					return fmt.Errorf("sqlquery: read the store: %w", err)
				}
				s.done = true
				break
			}
			s.rec, s.off = s.rdr.RecordBatch(), 0
			if s.rows+int(s.rec.NumRows()) > s.bound {
				return tooMany(s.rows+int(s.rec.NumRows()), s.bound, s.limited, s.opts)
			}
			s.rows += int(s.rec.NumRows())
			s.arrs = s.arrs[:0]
			sch := s.rec.Schema()
			for _, ci := range s.proj {
				idx := sch.FieldIndices(s.cols[ci].name)
				if len(idx) != 1 {
					return fmt.Errorf("sqlquery: the store's batch has no column %q", s.cols[ci].name)
				}
				s.arrs = append(s.arrs, s.rec.Column(idx[0]))
			}
			continue
		}
		take := min(capacity-n, int(s.rec.NumRows())-s.off)
		for k, ci := range s.proj {
			a, set := s.arrs[k], s.cols[ci].set
			for r := range take {
				if err := set(chunk, ci, n+r, a, s.off+r); err != nil {
					return fmt.Errorf("sqlquery: column %q: %w", s.cols[ci].name, err)
				}
			}
		}
		n += take
		s.off += take
	}
	return chunk.SetSize(n)
}

func (s *scan) close() {
	if s.rdr != nil {
		s.rdr.Release()
	}
}

// run prepares statement, refuses anything DuckDB does not classify as a SELECT, and
// reads at most max rows of its answer.
func run(ctx context.Context, dc driver.Conn, statement string, max int) (Result, error) {
	// Prepare, not PrepareContext: the driver's PrepareContext executes every
	// statement but the last of a multi-statement text, and Prepare refuses such a
	// text instead. Preparing only parses and binds; the context bounds the run.
	st, err := dc.Prepare(statement)
	if err != nil {
		if strings.Contains(err.Error(), "multi-statement") {
			return Result{}, fmt.Errorf("%w: only a single statement is allowed", ErrInvalid)
		}
		return Result{}, fmt.Errorf("%w: %s", ErrInvalid, duckMessage(err))
	}
	defer st.Close()
	ds, ok := st.(*duckdb.Stmt)
	if !ok {
		return Result{}, errors.New("sqlquery: unexpected statement type")
	}
	typ, err := ds.StatementType()
	if err != nil {
		return Result{}, fmt.Errorf("%w: %s", ErrInvalid, duckMessage(err))
	}
	if typ != duckdb.STATEMENT_TYPE_SELECT {
		return Result{}, fmt.Errorf("%w: only a single read-only SELECT (or WITH ... SELECT) statement is allowed", ErrInvalid)
	}
	if ds.NumInput() > 0 {
		return Result{}, fmt.Errorf("%w: the statement has parameters; write the values into it", ErrInvalid)
	}
	rows, err := ds.QueryContext(ctx, nil)
	if err != nil {
		if ctx.Err() != nil {
			return Result{}, ctx.Err()
		}
		return Result{}, fmt.Errorf("%w: %s", ErrInvalid, duckMessage(err))
	}
	defer rows.Close()
	res := Result{Columns: rows.Columns(), Rows: [][]any{}}
	dest := make([]driver.Value, len(res.Columns))
	for {
		err := rows.Next(dest)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			if ctx.Err() != nil {
				return Result{}, ctx.Err()
			}
			return Result{}, fmt.Errorf("%w: %s", ErrInvalid, duckMessage(err))
		}
		if len(res.Rows) == max {
			res.Truncated = true
			break
		}
		out := make([]any, len(dest))
		for i, v := range dest {
			out[i] = jsonValue(v)
		}
		res.Rows = append(res.Rows, out)
	}
	res.RowCount = len(res.Rows)
	return res, nil
}

// duckMessage is DuckDB's message without the driver's prefixes.
func duckMessage(err error) string {
	var de *duckdb.Error
	if errors.As(err, &de) {
		return de.Msg
	}
	return err.Error()
}
