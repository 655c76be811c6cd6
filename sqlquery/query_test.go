package sqlquery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

var relType = arrow.StructOf(
	arrow.Field{Name: "target_id", Type: arrow.BinaryTypes.String},
	arrow.Field{Name: "weight", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
)

var testSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.BinaryTypes.String},
	{Name: "rollout_id", Type: arrow.BinaryTypes.String},
	{Name: "role", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}},
	{Name: "sequence_order", Type: arrow.PrimitiveTypes.Int32},
	{Name: "reward", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
	{Name: "include_in_training", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	{Name: "created_at", Type: &arrow.TimestampType{Unit: arrow.Microsecond}},
	{Name: "content", Type: arrow.BinaryTypes.LargeString, Nullable: true},
	{Name: "tokens", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
	{Name: "relationships", Type: arrow.ListOf(relType), Nullable: true},
}, nil)

// testRows builds n rows in batches of 7: rollout r{i%3}, step i, reward i/10 (null
// for every 5th), role alternating user/assistant.
func testRows(t *testing.T, n int) array.RecordReader {
	t.Helper()
	var recs []arrow.RecordBatch
	base := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	for start := 0; start < n; start += 7 {
		b := array.NewRecordBuilder(memory.DefaultAllocator, testSchema)
		for i := start; i < min(start+7, n); i++ {
			b.Field(0).(*array.StringBuilder).Append("id-" + string(rune('a'+i%26)) + "-" + strconv.Itoa(i))
			b.Field(1).(*array.StringBuilder).Append("r" + strconv.Itoa(i%3))
			role := "user"
			if i%2 == 1 {
				role = "assistant"
			}
			if err := b.Field(2).(*array.BinaryDictionaryBuilder).AppendString(role); err != nil {
				t.Fatal(err)
			}
			b.Field(3).(*array.Int32Builder).Append(int32(i))
			if i%5 == 0 {
				b.Field(4).AppendNull()
			} else {
				b.Field(4).(*array.Float32Builder).Append(float32(i) / 10)
			}
			b.Field(5).(*array.BooleanBuilder).Append(i%2 == 0)
			b.Field(6).(*array.TimestampBuilder).Append(arrow.Timestamp(base.Add(time.Duration(i) * time.Second).UnixMicro()))
			b.Field(7).(*array.LargeStringBuilder).Append("it's step " + strconv.Itoa(i))
			lb := b.Field(8).(*array.ListBuilder)
			lb.Append(true)
			for k := range i % 4 {
				lb.ValueBuilder().(*array.Int32Builder).Append(int32(k))
			}
			rb := b.Field(9).(*array.ListBuilder)
			rb.Append(true)
			sb := rb.ValueBuilder().(*array.StructBuilder)
			sb.Append(true)
			sb.FieldBuilder(0).(*array.StringBuilder).Append("t" + strconv.Itoa(i))
			sb.FieldBuilder(1).(*array.Float32Builder).Append(0.5)
		}
		recs = append(recs, b.NewRecordBatch())
		b.Release()
	}
	rdr, err := array.NewRecordReader(testSchema, recs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		r.Release()
	}
	t.Cleanup(rdr.Release)
	return rdr
}

// testSource is n test rows as a Source whose row count is known before the scan; the
// columns each Open asked for are appended to opened.
func testSource(t *testing.T, n int, opened *[][]string) Source {
	t.Helper()
	return Source{Schema: testSchema, Rows: n, Open: func(_ context.Context, cols []string) (array.RecordReader, error) {
		if opened != nil {
			*opened = append(*opened, cols)
		}
		return testRows(t, n), nil
	}}
}

func query(t *testing.T, n int, sql string, opts Options) (Result, error) {
	t.Helper()
	return Query(t.Context(), testSource(t, n, nil), sql, opts)
}

// TestQueryAnswers: aggregates, filters, windows, CTEs, lists and structs over every
// column type a store has, in the API's JSON forms.
func TestQueryAnswers(t *testing.T) {
	for _, c := range []struct{ sql, want string }{
		{`SELECT count(*) AS n, count(reward) AS rewarded FROM records`, `{"columns":["n","rewarded"],"rows":[[50,40]],"row_count":1,"truncated":false}`},
		{`SELECT rollout_id, max(sequence_order) AS last, round(sum(reward), 1) AS total FROM records GROUP BY rollout_id ORDER BY rollout_id`,
			`{"columns":["rollout_id","last","total"],"rows":[["r0",48,31.8],["r1",49,35],["r2",47,33.2]],"row_count":3,"truncated":false}`},
		{`SELECT id, role, created_at, content, tokens, relationships[1].target_id AS t FROM records WHERE sequence_order = 3`,
			`{"columns":["id","role","created_at","content","tokens","t"],"rows":[["id-d-3","assistant","2026-01-02T03:04:08.000006Z","it's step 3",[0,1,2],"t3"]],"row_count":1,"truncated":false}`},
		{`WITH steps AS (SELECT rollout_id, sequence_order, row_number() OVER (PARTITION BY rollout_id ORDER BY sequence_order DESC) AS k FROM records)
		  SELECT rollout_id, sequence_order FROM steps WHERE k = 1 ORDER BY rollout_id`,
			`{"columns":["rollout_id","sequence_order"],"rows":[["r0",48],["r1",49],["r2",47]],"row_count":3,"truncated":false}`},
		{`SELECT include_in_training, count(*) FROM records WHERE reward IS NULL GROUP BY ALL ORDER BY 1`,
			`{"columns":["include_in_training","count_star()"],"rows":[[false,5],[true,5]],"row_count":2,"truncated":false}`},
		{`select 'x' as "odd ""name""", NULL::INTEGER AS n, 'nan'::DOUBLE AS f`, `{"columns":["odd \"name\"","n","f"],"rows":[["x",null,"NaN"]],"row_count":1,"truncated":false}`},
	} {
		res, err := query(t, 50, c.sql, Options{})
		if err != nil {
			t.Fatalf("%s: %v", c.sql, err)
		}
		got, _ := json.Marshal(res)
		if string(got) != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.sql, got, c.want)
		}
		// A statement that reads no table reads no row.
		if want := map[bool]int{true: 50, false: 0}[strings.Contains(c.sql, "FROM records")]; res.SourceRows != want {
			t.Errorf("%s: %d source rows, want %d", c.sql, res.SourceRows, want)
		}
	}
}

// TestQueryLimits: answers are cut at MaxResultRows (truncated), a source over
// MaxRows is refused before the statement runs, and an ended context stops it.
func TestQueryLimits(t *testing.T) {
	res, err := query(t, 50, `SELECT id FROM records ORDER BY sequence_order`, Options{MaxResultRows: 3})
	if err != nil || !res.Truncated || res.RowCount != 3 || len(res.Rows) != 3 || res.Rows[2][0] != "id-c-2" {
		t.Fatalf("truncated answer: %+v, %v", res, err)
	}
	if res, err := query(t, 3, `SELECT id FROM records`, Options{MaxResultRows: 3}); err != nil || res.Truncated || res.RowCount != 3 {
		t.Fatalf("an answer of exactly the limit: %+v, %v", res, err)
	}
	if _, err := query(t, 50, `SELECT 1`, Options{MaxRows: 49}); !errors.Is(err, ErrTooManyRows) {
		t.Fatalf("50 rows over a limit of 49: %v, want ErrTooManyRows", err)
	}
	if _, err := query(t, 49, `SELECT 1`, Options{MaxRows: 49}); err != nil {
		t.Fatalf("49 rows at a limit of 49: %v", err)
	}
	// A top-level LIMIT raises the scan bound to MaxLimitedRows; a LIMIT in a
	// subquery, a string or a comment does not.
	limited := Options{MaxRows: 49, MaxLimitedRows: 50}
	if res, err := query(t, 50, `SELECT rollout_id, count(*) FROM records GROUP BY 1 ORDER BY 1 LIMIT 2`, limited); err != nil || res.RowCount != 2 || res.SourceRows != 50 {
		t.Fatalf("50 rows, a LIMIT and a limited bound of 50: %+v, %v", res, err)
	}
	if _, err := query(t, 51, `SELECT count(*) FROM records LIMIT 1`, limited); !errors.Is(err, ErrTooManyRows) {
		t.Fatalf("51 rows over a limited bound of 50: %v, want ErrTooManyRows", err)
	}
	for _, sql := range []string{
		`SELECT * FROM (SELECT * FROM records LIMIT 5)`,
		`SELECT 'LIMIT 5' AS x FROM records`,
		`SELECT count(*) FROM records -- LIMIT 5`,
		`SELECT count(*) FROM records WHERE id IN (SELECT id FROM records LIMIT 1)`,
	} {
		if _, err := query(t, 50, sql, limited); !errors.Is(err, ErrTooManyRows) {
			t.Errorf("%s over 50 rows with a bound of 49 without a top-level LIMIT: %v, want ErrTooManyRows", sql, err)
		}
	}
	// A source whose size is not known up front is bounded while it streams.
	if _, err := Query(t.Context(), ReaderSource(testRows(t, 50)), `SELECT count(*) FROM records`, Options{MaxRows: 49}); !errors.Is(err, ErrTooManyRows) {
		t.Fatalf("streaming 50 rows over a limit of 49: %v, want ErrTooManyRows", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Query(ctx, testSource(t, 10, nil), `SELECT 1`, Options{}); err == nil {
		t.Fatal("a query with an ended context answered")
	}
	for _, sql := range []string{"", "   ", strings.Repeat("x", MaxSQLBytes+1)} {
		if _, err := query(t, 1, sql, Options{}); !errors.Is(err, ErrInvalid) {
			t.Errorf("sql of %d bytes: %v, want ErrInvalid", len(sql), err)
		}
	}
}

// TestQueryCannotEscape tries each way out of the table a SQL statement has: reading
// and writing files, attaching databases, extensions, settings, writes to the table,
// several statements. Each is refused as invalid, and nothing appears on disk.
func TestQueryCannotEscape(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret.csv")
	if err := os.WriteFile(secret, []byte("a,b\n1,2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	for _, sql := range []string{
		`SELECT * FROM read_csv('` + secret + `')`,
		`SELECT * FROM '` + secret + `'`,
		`SELECT * FROM read_text('` + secret + `')`,
		`SELECT * FROM read_blob('` + secret + `')`,
		`SELECT * FROM glob('` + dir + `/*')`,
		`SELECT * FROM read_parquet('https://example.invalid/x.parquet')`,
		`COPY records TO '` + out + `.csv'`,
		`COPY (SELECT * FROM records) TO '` + out + `.parquet' (FORMAT parquet)`,
		`EXPORT DATABASE '` + out + `'`,
		`ATTACH '` + out + `.db' AS other`,
		`INSTALL httpfs`,
		`LOAD httpfs`,
		`SET enable_external_access = true`,
		`SET lock_configuration = false`,
		`RESET enable_external_access`,
		`PRAGMA enable_profiling`,
		`CREATE TABLE t AS SELECT * FROM records`,
		`INSERT INTO records SELECT * FROM records`,
		`UPDATE records SET reward = 0`,
		`DELETE FROM records`,
		`DROP TABLE records`,
		`CREATE MACRO m() AS 1`,
		`SELECT 1; SELECT 2`,
		`SELECT 1; DROP TABLE records`,
		`DROP TABLE records; SELECT 1`,
		`COPY records TO '` + out + `.csv'; SELECT 1`,
		`CALL pragma_version()`,
		`SELECT getenv('HOME')`,
		`SELECT * FROM duckdb_secrets()`,
		`SELECT ?`,
		`SELEC id FROM records`,
		`SELECT nope FROM records`,
	} {
		_, err := query(t, 5, sql, Options{})
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", sql, err)
			continue
		}
		t.Logf("refused %-60.60q: %v", sql, err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) != 1 {
		t.Fatalf("the directory holds %v (%v); want only the secret file", ents, err)
	}
}

// TestQueryReadsOnlyTheColumnsItUses: the source is opened once, for the columns the
// statement names (one column for a statement that names none).
func TestQueryReadsOnlyTheColumnsItUses(t *testing.T) {
	for _, c := range []struct {
		sql  string
		want string
	}{
		{`SELECT rollout_id, avg(reward) FROM records GROUP BY rollout_id`, "[[rollout_id reward]]"},
		{`SELECT count(*) FROM records`, "[[id]]"},
		{`SELECT id FROM records WHERE sequence_order > 3`, "[[id sequence_order]]"},
		{`SELECT 1`, "[]"},
	} {
		var opened [][]string
		if _, err := Query(t.Context(), testSource(t, 20, &opened), c.sql, Options{}); err != nil {
			t.Fatalf("%s: %v", c.sql, err)
		}
		if got := fmt.Sprint(opened); got != c.want {
			t.Errorf("%s opened %s, want %s", c.sql, got, c.want)
		}
	}
}

// TestSupported: binary columns are not queryable (the caller leaves them out).
func TestSupported(t *testing.T) {
	if Supported(arrow.BinaryTypes.LargeBinary) || Supported(arrow.BinaryTypes.Binary) || !Supported(testSchema.Field(9).Type) {
		t.Fatal("Supported: binary must be refused, list<struct> accepted")
	}
	s := arrow.NewSchema([]arrow.Field{{Name: "payload", Type: arrow.BinaryTypes.LargeBinary}}, nil)
	rdr, _ := array.NewRecordReader(s, nil)
	defer rdr.Release()
	if _, err := Query(t.Context(), ReaderSource(rdr), "SELECT 1", Options{}); err == nil || !strings.Contains(err.Error(), "payload") {
		t.Fatalf("a binary column: %v", err)
	}
}
