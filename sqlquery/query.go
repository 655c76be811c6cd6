package sqlquery

import (
	"context"
	"database/sql"
	"database/sql/driver"
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
	// DefaultMaxRows bounds the rows loaded into the query's table.
	DefaultMaxRows = 200_000
	// DefaultMaxResultRows bounds the rows of an answer; more are cut (Truncated).
	DefaultMaxResultRows = 10_000
	// MaxSQLBytes bounds the statement text.
	MaxSQLBytes = 64 << 10
	// TableName is the table the statement reads.
	TableName = "records"
)

// ErrInvalid marks a statement refused or failed for what it says (syntax, unknown
// column, not a SELECT, more than one statement, a function that needs access the
// database does not have): the caller's mistake, a 400.
var ErrInvalid = errors.New("sqlquery: invalid query")

// ErrTooManyRows: the source holds more rows than Options.MaxRows.
var ErrTooManyRows = errors.New("sqlquery: too many rows to query")

// Options bound a query. The zero value takes the defaults.
type Options struct {
	// MaxRows is the most source rows loaded (DefaultMaxRows when 0).
	MaxRows int
	// MaxResultRows is the most rows answered (DefaultMaxResultRows when 0).
	MaxResultRows int
	// MemoryLimit is DuckDB's max_memory for the query ("256MB" when empty).
	MemoryLimit string
}

func (o Options) withDefaults() Options {
	if o.MaxRows <= 0 {
		o.MaxRows = DefaultMaxRows
	}
	if o.MaxResultRows <= 0 {
		o.MaxResultRows = DefaultMaxResultRows
	}
	if o.MemoryLimit == "" {
		o.MemoryLimit = "256MB"
	}
	return o
}

// Result is an answer: column names, rows of JSON-ready values (strings, numbers,
// booleans, nil, lists, objects; timestamps as RFC 3339 strings, bytes as base64 by
// encoding/json), and whether rows were cut at Options.MaxResultRows.
type Result struct {
	Columns   []string `json:"columns"`
	Rows      [][]any  `json:"rows"`
	RowCount  int      `json:"row_count"`
	Truncated bool     `json:"truncated"`
	// SourceRows is the number of rows the table held.
	SourceRows int `json:"-"`
}

// Query loads the batches of src (every column of its schema; see Supported) into the
// table `records` of a new in-memory database, runs statement over it and returns
// the answer. src is read to its end unless it holds more than Options.MaxRows rows
// (ErrTooManyRows). ctx bounds the whole query, interrupting DuckDB when it ends.
func Query(ctx context.Context, src array.RecordReader, statement string, opts Options) (Result, error) {
	opts = opts.withDefaults()
	statement = strings.TrimSpace(statement)
	switch {
	case statement == "":
		return Result{}, fmt.Errorf("%w: sql is empty", ErrInvalid)
	case len(statement) > MaxSQLBytes:
		return Result{}, fmt.Errorf("%w: sql is %d bytes, over the %d byte limit", ErrInvalid, len(statement), MaxSQLBytes)
	}
	cols, err := tableColumns(src.Schema())
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
	if _, err := conn.ExecContext(ctx, createTable(cols)); err != nil {
		return Result{}, fmt.Errorf("sqlquery: create the table: %w", err)
	}
	var res Result
	err = conn.Raw(func(dc any) error {
		n, err := load(ctx, dc.(driver.Conn), src, cols, opts.MaxRows)
		res.SourceRows = n
		if err != nil {
			return err
		}
		out, err := run(ctx, dc.(driver.Conn), statement, opts.MaxResultRows)
		out.SourceRows = n
		res = out
		return err
	})
	return res, err
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

// load appends the rows of src to the table, at most max of them.
func load(ctx context.Context, dc driver.Conn, src array.RecordReader, cols []column, max int) (int, error) {
	app, err := duckdb.NewAppenderFromConn(dc, "", TableName)
	if err != nil {
		return 0, fmt.Errorf("sqlquery: append to the table: %w", err)
	}
	n := 0
	row := make([]driver.Value, len(cols))
	for src.Next() {
		if err := ctx.Err(); err != nil {
			_ = app.Close()
			return n, err
		}
		rec := src.RecordBatch()
		if n+int(rec.NumRows()) > max {
			_ = app.Close()
			return n + int(rec.NumRows()), fmt.Errorf("%w: the store holds more than %d rows", ErrTooManyRows, max)
		}
		arrs := make([]arrow.Array, len(cols))
		for j, c := range cols {
			arrs[j] = rec.Column(c.index)
		}
		for i := range int(rec.NumRows()) {
			for j, c := range cols {
				row[j] = c.value(arrs[j], i)
			}
			if err := app.AppendRow(row...); err != nil {
				_ = app.Close()
				return n, fmt.Errorf("sqlquery: load row %d: %w", n, err)
			}
			n++
		}
	}
	if err := src.Err(); err != nil {
		_ = app.Close()
		return n, fmt.Errorf("sqlquery: read the store: %w", err)
	}
	if err := app.Close(); err != nil {
		return n, fmt.Errorf("sqlquery: load the table: %w", err)
	}
	return n, nil
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
