package expr

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// checkAgainstRef evaluates src over the fixture and over slices of it, and compares
// every row with the reference evaluator.
func checkAgainstRef(t testing.TB, fx *fixture, src string) {
	t.Helper()
	n := int(fx.rec.NumRows())
	checkAgainstRefSlices(t, fx, src, [][2]int{{0, n}, {3, n - 5}, {64, n}, {63, 65}, {7, 7}, {1, 2}})
}

// checkAgainstRefSlices is checkAgainstRef over the given row ranges.
func checkAgainstRefSlices(t testing.TB, fx *fixture, src string, slices [][2]int) {
	t.Helper()
	e, err := Parse(src)
	if err != nil {
		t.Fatalf("Parse(%q): %v", src, err)
	}
	b, err := Bind(e, fx.schema)
	if err != nil {
		t.Fatalf("Bind(%q): %v", src, err)
	}
	n := int(fx.rec.NumRows())
	for _, sl := range slices {
		if sl[1] > n || sl[0] > sl[1] {
			continue
		}
		rec := fx.rec
		if sl != [2]int{0, n} {
			rec = fx.rec.NewSlice(int64(sl[0]), int64(sl[1]))
		}
		sel, err := Select(context.Background(), b, rec)
		if err != nil {
			t.Fatalf("Select(%q) rows %v: %v", src, sl, err)
		}
		if sel.Len() != sl[1]-sl[0] {
			t.Fatalf("Select(%q) rows %v: Len %d", src, sl, sel.Len())
		}
		for r := 0; r < sel.Len(); r++ {
			want := fx.refEval(e, sl[0]+r) == rTrue
			if got := sel.Get(r); got != want {
				t.Fatalf("filter %q, row %d (slice %v): Eval says %v, reference says %v; row values: %s",
					src, sl[0]+r, sl, got, want, fx.describeRow(e, sl[0]+r))
			}
		}
		if rec != fx.rec {
			rec.Release()
		}
	}
}

func (fx *fixture) describeRow(e Expr, row int) string {
	var parts []string
	for _, c := range e.Columns() {
		parts = append(parts, fmt.Sprintf("%s=%#v", c, fx.cells[c][row]))
	}
	return strings.Join(parts, " ")
}

// evalFilters cover every type, operator and NULL case; each is checked against the
// reference evaluator and, in TestLanceDBAgrees, against LanceDB.
var evalFilters = []string{
	// integers of every width, including out-of-range and fractional literals
	"i8 = 1", "i8 != 1", "i8 < 0", "i8 <= -1", "i8 > 100", "i8 >= 127", "i8 < 1000", "i8 > -1000", "i8 = 1000",
	"i8 < 2.5", "i8 <= 2.5", "i8 > 2.5", "i8 >= -2.5", "i8 = 3.0", "i8 != 2.5", "i8 < -128.5", "i8 > 127.5",
	"i16 = -32768", "i32 > 5", "i64 = -9223372036854775807", "i64 < -9223372036854775807", "i64 <= -9223372036854775807", "i64 >= 9223372036854775807",
	"i64 < 1e19", "i64 > -1e19", "i64 = 1e19",
	"u8 = 255", "u8 > -1", "u8 < 0", "u8 = 2.0", "u16 <= 65535", "u32 > 4294967294", "u64 > 9223372036854775806",
	"u64 < 0", "u64 >= -5", "u64 < 2e19", "u64 > 1.8446744073709552e19", "u64 = 1.8446744073709552e19",
	"5 < i32", "100 >= i64", "-1 = i8",
	// floats, with NaN and signed zeros in the data
	"f64 = 0", "f64 = -0.0", "f64 != 1.5", "f64 < 2.5", "f64 > 2.5", "f64 >= 1e300", "f64 <= -1e300",
	"f64 > 1e308", "f32 = 0.1", "f32 = 1.5", "f32 < 3", "f32 > -1", "f32 >= 7", "2.5 > f64",
	// strings of every layout, including dictionaries with null values
	"s = 'abc'", "s != ''", "s < 'b'", "s >= 'ab'", "s > 'héllo'", "s = 'O''Brien'",
	"ls = 'a'", "ls <= 'abd'", "bin = 'ab'", "bin > 'a'", "sv = 'aé'", "sv > 'b'",
	"d8 = 'abc'", "d8 != 'abc'", "d8 < 'b'", "du16 = 'ab'", "du16 >= 'ba'", "di64 = 5", "di64 > 2.5",
	// booleans
	"b", "NOT b", "b = TRUE", "b = FALSE", "b != TRUE", "b < TRUE", "b >= FALSE", "b > FALSE", "TRUE = b",
	// temporal columns of every unit and zone
	"ts_s = TIMESTAMP '2024-01-02 03:04:05'", "ts_s > TIMESTAMP '2024-01-02 03:04:05'", "ts_s < DATE '2024-01-02'",
	"ts_ms = TIMESTAMP '2024-01-02 03:04:05.001'", "ts_ms <= TIMESTAMP '2024-01-02 03:04:04.999'",
	"ts_us >= TIMESTAMP '2024-01-02 03:04:05.000001'", "ts_us = TIMESTAMP '2024-01-02 03:04:05.000001+00:00'",
	"ts_ns = TIMESTAMP(9) '2024-01-02 03:04:05.000000001'", "ts_ns > TIMESTAMP '2024-01-02 03:04:05'",
	"ts_k = TIMESTAMP '2024-01-02 08:34:05'", "ts_k >= TIMESTAMP '2024-01-02 00:00:00'", "ts_ms = DATE '2024-01-02'", "ts_ms = TIMESTAMP '2024-01-02 08:34:05+05:30'",
	"ts_ny < TIMESTAMP '2024-01-01 22:04:05'", "ts_ny = TIMESTAMP '2024-01-01 22:04:05'",
	"ts_us = 1704164645000000", "ts_us > 0", "ts_s = -1",
	"d32 = DATE '2024-01-02'", "d32 < DATE '2024-01-02'", "d32 > TIMESTAMP '2024-01-02 12:00:00'",
	"d32 >= TIMESTAMP '2024-01-02 12:00:00'", "d32 = TIMESTAMP '2024-01-02 00:00:00'", "d32 = TIMESTAMP '2024-01-02 12:00:00'",
	"d64 = DATE '2024-01-02'", "d64 < TIMESTAMP '2024-01-02 00:00:00.001'", "d64 > DATE '1969-12-31'",
	"d32 < DATE '0001-01-01'", "d32 > DATE '9999-12-31'",
	// NULL everywhere
	"i8 = NULL", "NULL = s", "i8 IS NULL", "i8 IS NOT NULL", "d8 IS NULL", "du16 IS NOT NULL", "di64 IS NULL",
	"lst IS NULL", "lst IS NOT NULL", "nul IS NULL", "nul IS NOT NULL", "NULL IS NULL", "5 IS NULL",
	"b IS TRUE", "b IS NOT TRUE", "b IS FALSE", "b IS NOT FALSE", "(i8 > 0) IS NULL", "(i8 > 0 OR s = 'a') IS NOT TRUE",
	// IN lists
	"i8 IN (1, 2, 3)", "i8 NOT IN (1, 2, 3)", "i8 IN (1, NULL)", "i8 NOT IN (1, NULL)", "i8 IN (1000, 2.5, 3.0)",
	"i64 IN (0, 1, 2, 3, 5, 7, 100, -100, 11, 12, 13, 14)", "u64 IN (-1, 0, 255)",
	"f64 IN (0, 1.5, NULL)", "f32 NOT IN (0.1, 7)", "s IN ('a', 'ab', '')", "s NOT IN ('a', NULL)",
	"d8 IN ('abc', 'zz')", "du16 NOT IN ('a')", "b IN (TRUE)", "b NOT IN (FALSE, NULL)", "b IN (NULL)",
	"ts_us IN (TIMESTAMP '2024-01-02 03:04:05', 0)", "d32 IN (DATE '2024-01-02', TIMESTAMP '2024-01-02 12:00:00')",
	"1 IN (1, 2)", "3 NOT IN (1, NULL)", "'a' IN ('b')", "NULL IN (1)",
	// BETWEEN
	"i32 BETWEEN 0 AND 7", "i32 NOT BETWEEN 0 AND 7", "f64 BETWEEN -1 AND 2.5", "s BETWEEN 'a' AND 'b'",
	"ts_us BETWEEN DATE '2024-01-02' AND TIMESTAMP '2024-01-02 03:04:05'", "i8 BETWEEN NULL AND 5", "i8 BETWEEN i16 AND i32",
	"3 BETWEEN i8 AND 5",
	// LIKE
	"s LIKE 'a%'", "s LIKE '%b'", "s LIKE '%b%'", "s LIKE 'a_c'", "s LIKE '_'", "s LIKE '__'", "s LIKE ''",
	"s LIKE '%'", "s LIKE 'a\\%b'", "s LIKE 'a\\_b'", "s LIKE 'a\\b'", "s LIKE '%\\%'", "s NOT LIKE 'a%'",
	"s LIKE 'a\\\\b'", "s LIKE '\\a%'", "s LIKE 'a\\'", "s LIKE '%\\\\'", "s LIKE '\\日%'",
	"s LIKE 'h_llo'", "s LIKE '%a%b%'", "s LIKE 'a%b%c'", "s LIKE '_%_'", "s LIKE '%é'", "ls LIKE 'ab%'",
	"sv LIKE '%a%a%'", "bin LIKE 'a%'", "d8 LIKE '%b%'", "du16 NOT LIKE 'a_'", "'abc' LIKE 'a%'", "NULL LIKE 'a'",
	// column against column
	"i8 = i16", "i8 < i64", "u8 > i32", "u32 <= u64", "u64 = u8", "f32 = f64", "i8 < f64", "f64 >= u8",
	"s = ls", "s < bin", "ls >= bin", "b = b2", "b < b2", "b >= b2", "ts_ns >= ts_ns", "ts_ms != ts_ms", "ts_k < ts_k", "d32 = d32",
	"i64 = `weird name`", "`weird name` > 2", "Mixed < 3", "`timestamp` >= TIMESTAMP '2024-01-02 03:04:05'",
	"timestamp < timestamp '2024-01-02 03:04:05.001'", "timestamp <= timestamp", "Mixed IN (1, 2)",
	// literals only
	"TRUE", "FALSE", "NULL", "NOT NULL", "1 = 1", "1 < 2.5", "'a' < 'b'", "DATE '2024-01-02' = TIMESTAMP '2024-01-02 00:00:00'",
	"TRUE AND NULL", "FALSE AND NULL", "TRUE OR NULL", "FALSE OR NULL", "NOT (NULL AND FALSE)",
	// logic mixing NULLs
	"i8 > 0 AND s = 'a'", "i8 > 0 OR s = 'a'", "NOT (i8 > 0 AND s = 'a')", "NOT (i8 > 0 OR b)",
	"(i8 > 0 OR i16 < 0) AND NOT (f64 = 0 OR b) AND s IS NOT NULL",
	"i8 > 0 AND i8 > 1 AND i8 > 2 AND i8 > 3 OR i8 = -1 OR s LIKE 'a%' AND b",
}

func TestEvalMatchesReference(t *testing.T) {
	fx := newFixture(1, 300)
	defer fx.rec.Release()
	for _, src := range evalFilters {
		t.Run(src, func(t *testing.T) { checkAgainstRef(t, fx, src) })
	}
}

// randomFilter writes a random filter over the fixture's columns. Literals are drawn
// from the pools the data comes from, so comparisons hit equality often; now and then
// a literal of the wrong type is used, to exercise bind errors.
func randomFilter(rng *rand.Rand, fields []arrow.Field, depth int) string {
	if depth > 0 && rng.IntN(3) == 0 {
		switch rng.IntN(3) {
		case 0:
			return "(" + randomFilter(rng, fields, depth-1) + " AND " + randomFilter(rng, fields, depth-1) + ")"
		case 1:
			return "(" + randomFilter(rng, fields, depth-1) + " OR " + randomFilter(rng, fields, depth-1) + ")"
		default:
			return "NOT (" + randomFilter(rng, fields, depth-1) + ")"
		}
	}
	f := fields[rng.IntN(len(fields))]
	col := QuoteIdent(f.Name)
	ops := []string{"=", "!=", "<", "<=", ">", ">="}
	op := ops[rng.IntN(len(ops))]
	switch rng.IntN(10) {
	case 0:
		return col + " IS NULL"
	case 1:
		return col + " IS NOT NULL"
	case 2:
		g := fields[rng.IntN(len(fields))]
		for tries := 0; tries < 20 && rng.IntN(4) != 0 && colClass(g.Type) != colClass(f.Type); tries++ {
			g = fields[rng.IntN(len(fields))] // mostly a comparable column
		}
		return col + " " + op + " " + QuoteIdent(g.Name)
	case 3:
		var items []string
		for i := 0; i < 1+rng.IntN(12); i++ {
			items = append(items, randomLiteral(rng, f.Type))
		}
		not := ""
		if rng.IntN(2) == 0 {
			not = "NOT "
		}
		return col + " " + not + "IN (" + strings.Join(items, ", ") + ")"
	case 4:
		return col + " BETWEEN " + randomLiteral(rng, f.Type) + " AND " + randomLiteral(rng, f.Type)
	case 5:
		for tries := 0; tries < 20 && rng.IntN(4) != 0 && colClass(stripDict(f.Type)) != classString; tries++ {
			f = fields[rng.IntN(len(fields))]
		}
		col = QuoteIdent(f.Name)
		pats := []string{"a%", "%b", "%a%", "a_", "_", "%", "a\\%b", "%é%", "_b%", "%a%b%", "h_llo", ""}
		return col + " LIKE " + QuoteString(pats[rng.IntN(len(pats))])
	case 6:
		return randomLiteral(rng, f.Type) + " " + op + " " + col
	case 7:
		for tries := 0; tries < 20 && rng.IntN(4) != 0 && f.Type.ID() != arrow.BOOL; tries++ {
			f = fields[rng.IntN(len(fields))]
		}
		return QuoteIdent(f.Name) + " IS TRUE"
	}
	return col + " " + op + " " + randomLiteral(rng, f.Type)
}

func stripDict(dt arrow.DataType) arrow.DataType {
	if d, ok := dt.(*arrow.DictionaryType); ok {
		return d.ValueType
	}
	return dt
}

func randomLiteral(rng *rand.Rand, dt arrow.DataType) string {
	if d, ok := dt.(*arrow.DictionaryType); ok {
		dt = d.ValueType
	}
	if rng.IntN(12) == 0 {
		return "NULL"
	}
	if rng.IntN(20) == 0 { // anything at all, usually a type error
		all := []string{"1", "2.5", "'a'", "TRUE", "DATE '2024-01-02'", "TIMESTAMP '2024-01-02 03:04:05'"}
		return all[rng.IntN(len(all))]
	}
	switch dt.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		lo, hi := typeBounds(dt)
		pool := intPool(max(lo, -math.MaxInt64), hi)
		switch rng.IntN(6) {
		case 0:
			extra := []string{"1000", "-1", "-129", "256", "2.5", "-2.5", "3.0", "1e19", "-1e19", "127.5"}
			return extra[rng.IntN(len(extra))]
		}
		return strconv.FormatInt(pool[rng.IntN(len(pool))], 10)
	case arrow.FLOAT32, arrow.FLOAT64:
		vals := []string{"0", "-0.0", "1", "-1", "1.5", "2.5", "-2.5", "3", "100", "1e300", "-1e300", "0.1", "7", "1e308"}
		return vals[rng.IntN(len(vals))]
	case arrow.STRING, arrow.LARGE_STRING, arrow.BINARY, arrow.STRING_VIEW:
		return QuoteString(stringPool[rng.IntN(len(stringPool))])
	case arrow.BOOL:
		if rng.IntN(2) == 0 {
			return "TRUE"
		}
		return "FALSE"
	case arrow.TIMESTAMP:
		vals := []string{
			"TIMESTAMP '2024-01-02 03:04:05'", "TIMESTAMP '2024-01-02 03:04:04'", "TIMESTAMP '2024-01-02 03:04:05.001'",
			"TIMESTAMP '2024-01-02 03:04:05.000001'", "TIMESTAMP(9) '2024-01-02 03:04:05.000000001'",
			"TIMESTAMP '2024-01-02 08:34:05+05:30'", "TIMESTAMP '2024-01-01 22:04:05'", "DATE '2024-01-02'",
			"TIMESTAMP '1970-01-01 00:00:00'", "0", "-1", "1704164645",
		}
		return vals[rng.IntN(len(vals))]
	case arrow.DATE32, arrow.DATE64:
		vals := []string{"DATE '2024-01-02'", "DATE '2024-01-01'", "DATE '1970-01-01'", "DATE '1969-12-31'",
			"TIMESTAMP '2024-01-02 12:00:00'", "TIMESTAMP '2024-01-02 00:00:00'", "TIMESTAMP '2024-01-01 23:59:59.999'"}
		return vals[rng.IntN(len(vals))]
	}
	return "1"
}

func TestEvalRandomFiltersMatchReference(t *testing.T) {
	fx := newFixture(2, 200)
	defer fx.rec.Release()
	rng := rand.New(rand.NewPCG(3, 4))
	fields := fx.schema.Fields()
	bound, rejected := 0, 0
	for i := 0; i < 2000; i++ {
		src := randomFilter(rng, fields, 3)
		e, err := Parse(src)
		if err != nil {
			t.Fatalf("generated filter %q does not parse: %v", src, err)
		}
		checkRoundTrip(t, src, e)
		if _, err := Bind(e, fx.schema); err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Bind(%q) error %v does not wrap ErrInvalid", src, err)
			}
			rejected++
			continue
		}
		bound++
		checkAgainstRefSlices(t, fx, src, [][2]int{{0, 200}, {5, 197}})
	}
	t.Logf("%d random filters evaluated, %d rejected by Bind", bound, rejected)
	if bound < 1000 {
		t.Fatalf("only %d of 2000 random filters bound; the generator is off", bound)
	}
}

func TestBindErrors(t *testing.T) {
	fx := newFixture(1, 10)
	defer fx.rec.Release()
	cases := map[string]struct {
		src, column, msg string
	}{
		"an unknown column lists the valid ones":           {"nope = 1", "nope", "unknown column nope; valid columns: i8, i16"},
		"a column differing only in case gets a hint":      {"I8 = 1", "I8", "did you mean i8?"},
		"an unknown column deep inside is found":           {"i8 = 1 AND (s = 'a' OR NOT zz IS NULL)", "zz", "unknown column zz"},
		"an int column against a string":                   {"i8 = 'a'", "i8", "cannot compare column i8 of type int8 with string literal 'a'"},
		"a string column against a number":                 {"s > 5", "s", "cannot compare column s of type utf8 with integer literal 5"},
		"a dictionary column against a number":             {"d8 = 1", "d8", "cannot compare column d8 of type utf8 with integer literal 1"},
		"a bool column against a number":                   {"b = 1", "b", "with integer literal 1"},
		"a float column against a bool":                    {"f64 < TRUE", "f64", "boolean literal TRUE"},
		"a timestamp column against a string":              {"ts_us > '2024-01-01'", "ts_us", "write TIMESTAMP '2024-01-01'"},
		"a date column against a string":                   {"d32 = '2024-01-01'", "d32", "write DATE '2024-01-01'"},
		"a date column against an integer":                 {"d32 = 5", "d32", "write DATE 'YYYY-MM-DD'"},
		"a seconds column against milliseconds":            {"ts_s = TIMESTAMP '2024-01-02 03:04:05.5'", "ts_s", "more precise than column ts_s"},
		"a microseconds column against nanoseconds":        {"ts_us < TIMESTAMP(9) '2024-01-02 03:04:05.0000005'", "ts_us", "Lance would truncate"},
		"an offset literal against a zoned column":         {"ts_k = TIMESTAMP '2024-01-02 03:04:05Z'", "ts_k", "write the wall-clock time in +05:30 without an offset"},
		"a DATE against a zoned column":                    {"ts_k BETWEEN DATE '2024-01-01' AND TIMESTAMP '2024-01-02 00:00:00'", "ts_k", "write TIMESTAMP '2024-01-01 00:00:00' for midnight in +05:30"},
		"timestamps of different zones":                    {"ts_us = ts_k", "ts_us", "cannot compare column ts_us"},
		"an IN list with a wrong-typed value":              {"i8 IN (1, 'a')", "i8", "with string literal 'a'"},
		"an IN list on a list column":                      {"lst IN (1)", "lst", "which IN cannot compare"},
		"comparing a list column":                          {"lst = 1", "lst", "which filters cannot compare"},
		"a non-boolean column as a condition":              {"i8 AND b", "i8", "did you mean i8 IS NOT NULL?"},
		"a number as a condition":                          {"5", "", "integer literal 5 cannot stand alone"},
		"IS TRUE on a non-boolean column":                  {"i8 IS TRUE", "i8", "only a boolean column"},
		"LIKE on a number column":                          {"i8 LIKE 'a%'", "i8", "LIKE needs a string column"},
		"LIKE on a number literal":                         {"5 LIKE 'a%'", "", "LIKE needs a string"},
		"two columns of unrelated types":                   {"i8 = s", "i8", "cannot compare column i8 of type int8 with column s of type utf8"},
		"uint64 against a signed column":                   {"u64 < i8", "u64", "cannot compare column u64"},
		"timestamps of different units":                    {"ts_s = ts_ms", "ts_s", "cannot compare column ts_s"},
		"a date against a timestamp column":                {"d32 = ts_us", "d32", "cannot compare"},
		"two literals of different types":                  {"1 = 'a'", "", "cannot compare integer literal 1 with string literal 'a'"},
		"BETWEEN with a wrong-typed bound":                 {"i8 BETWEEN 1 AND 'z'", "i8", "string literal 'z'"},
		"a column whose name is ambiguous":                 {"dup = 1", "dup", "ambiguous"},
		"a quoted column that does not exist":              {"`weird  name` = 1", "weird  name", "unknown column `weird  name`"},
		"a column in a zone that does not exist":           {"ts_bad = DATE '2024-01-01'", "ts_bad", "cannot be loaded"},
		"a dictionary of lists cannot be compared":         {"dl = 1", "dl", "which filters cannot compare"},
		"a null-type column cannot be compared":            {"nul = 1", "nul", "which filters cannot compare"},
		"an offset is reported for the failing comparison": {"i8 = 1 AND s = 2", "s", "(at offset 15)"},
	}
	fields := append(fx.schema.Fields(),
		arrow.Field{Name: "dup", Type: arrow.PrimitiveTypes.Int8},
		arrow.Field{Name: "dup", Type: arrow.PrimitiveTypes.Int8},
		arrow.Field{Name: "ts_bad", Type: &arrow.TimestampType{Unit: arrow.Second, TimeZone: "Mars/Olympus_Mons"}},
		arrow.Field{Name: "dl", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.ListOf(arrow.PrimitiveTypes.Int8)}},
	)
	schema := arrow.NewSchema(fields, nil)
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e, err := Parse(tc.src)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.src, err)
			}
			_, err = Bind(e, schema)
			var be *BindError
			if !errors.As(err, &be) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("Bind(%q) = %v, want a *BindError wrapping ErrInvalid", tc.src, err)
			}
			if be.Column != tc.column || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Bind(%q) = %q (column %q), want column %q and %q", tc.src, err, be.Column, tc.column, tc.msg)
			}
		})
	}
}

// TestEvalTruthTables pins the SQL three-valued truth tables with literals and with a
// hand-made column, independently of the reference evaluator.
func TestEvalTruthTables(t *testing.T) {
	mem := memory.DefaultAllocator
	bb := array.NewBooleanBuilder(mem)
	bb.AppendValues([]bool{true, false, false}, []bool{true, true, false}) // TRUE, FALSE, NULL
	col := bb.NewArray()
	bb.Release()
	schema := arrow.NewSchema([]arrow.Field{{Name: "p", Type: arrow.FixedWidthTypes.Boolean, Nullable: true}}, nil)
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, 3)
	col.Release()
	defer rec.Release()
	cases := map[string]struct {
		src  string
		want string // selection per row: p = TRUE, FALSE, NULL
	}{
		"p keeps only TRUE":                  {"p", "100"},
		"NOT p keeps only FALSE":             {"NOT p", "010"},
		"NOT NOT p is p":                     {"NOT NOT p", "100"},
		"p AND TRUE is p":                    {"p AND TRUE", "100"},
		"p AND FALSE is never TRUE":          {"p AND FALSE", "000"},
		"NOT (p AND FALSE) is always TRUE":   {"NOT (p AND FALSE)", "111"},
		"NOT (p AND NULL): NULL unless p=F":  {"NOT (p AND NULL)", "010"},
		"p OR TRUE is always TRUE":           {"p OR TRUE", "111"},
		"p OR NULL is TRUE only for TRUE":    {"p OR NULL", "100"},
		"NOT (p OR NULL) is never TRUE":      {"NOT (p OR NULL)", "000"},
		"NOT (p OR FALSE) is NOT p":          {"NOT (p OR FALSE)", "010"},
		"p = NULL is never TRUE":             {"p = NULL", "000"},
		"NOT (p = NULL) is never TRUE":       {"NOT (p = NULL)", "000"},
		"p IS NULL":                          {"p IS NULL", "001"},
		"p IS NOT NULL":                      {"p IS NOT NULL", "110"},
		"p IS TRUE":                          {"p IS TRUE", "100"},
		"p IS NOT TRUE":                      {"p IS NOT TRUE", "011"},
		"p IS FALSE":                         {"p IS FALSE", "010"},
		"p IS NOT FALSE":                     {"p IS NOT FALSE", "101"},
		"p IN (TRUE, NULL): NULL for misses": {"NOT (p IN (TRUE, NULL))", "000"},
		"p NOT IN (TRUE)":                    {"p NOT IN (TRUE)", "010"},
		"p = p is NULL for NULL":             {"p = p", "110"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e, err := Parse(tc.src)
			if err != nil {
				t.Fatal(err)
			}
			mask, err := Eval(context.Background(), e, rec)
			if err != nil {
				t.Fatal(err)
			}
			defer mask.Release()
			var got strings.Builder
			for i := 0; i < mask.Len(); i++ {
				if mask.IsNull(i) {
					t.Fatalf("mask has a NULL at row %d", i)
				}
				if mask.Value(i) {
					got.WriteByte('1')
				} else {
					got.WriteByte('0')
				}
			}
			if got.String() != tc.want {
				t.Fatalf("%s: got %s, want %s", tc.src, got.String(), tc.want)
			}
		})
	}
}

func TestSelection(t *testing.T) {
	fx := newFixture(5, 200)
	defer fx.rec.Release()
	e, _ := Parse("i8 > 0")
	sel, err := Select(context.Background(), e, fx.rec)
	if err != nil {
		t.Fatal(err)
	}
	rows := sel.AppendRows(nil)
	if len(rows) != sel.Count() || len(rows) == 0 {
		t.Fatalf("AppendRows gave %d rows, Count %d", len(rows), sel.Count())
	}
	for i, r := range rows {
		if i > 0 && rows[i-1] >= r {
			t.Fatal("rows not ascending")
		}
		if !sel.Get(int(r)) || fx.cells["i8"][r] == nil || fx.cells["i8"][r].(int64) <= 0 {
			t.Fatalf("row %d selected wrongly", r)
		}
	}
	mask := sel.Boolean()
	defer mask.Release()
	if mask.Len() != 200 || mask.NullN() != 0 {
		t.Fatalf("mask len %d nulls %d", mask.Len(), mask.NullN())
	}
	for i := 0; i < 200; i++ {
		if mask.Value(i) != sel.Get(i) {
			t.Fatalf("mask differs at %d", i)
		}
	}
	if sel.Get(-1) || sel.Get(200) {
		t.Fatal("Get out of range must be false")
	}
	// The mask works with Arrow's own filter machinery (a smoke check of its shape).
	if got := array.NewBooleanData(mask.Data()).Len(); got != 200 {
		t.Fatal(got)
	}
}

func TestEvalRejectsOtherSchemas(t *testing.T) {
	fx := newFixture(1, 20)
	defer fx.rec.Release()
	e, _ := Parse("i8 > 0")
	b, err := Bind(e, fx.schema)
	if err != nil {
		t.Fatal(err)
	}
	other := arrow.NewSchema([]arrow.Field{{Name: "i8", Type: arrow.PrimitiveTypes.Int64}}, nil)
	ib := array.NewInt64Builder(memory.DefaultAllocator)
	ib.AppendValues([]int64{1, 2}, nil)
	col := ib.NewArray()
	rec := array.NewRecordBatch(other, []arrow.Array{col}, 2)
	col.Release()
	defer rec.Release()
	if _, err := Select(context.Background(), b, rec); err == nil || !strings.Contains(err.Error(), "does not match the schema") {
		t.Fatalf("got %v", err)
	}
	// Unbound, the same filter binds to the batch's own schema and works.
	sel, err := Select(context.Background(), e, rec)
	if err != nil || sel.Count() != 2 {
		t.Fatalf("got %v, %d", err, sel.Count())
	}
	// Rebinding a bound filter to another schema works too.
	b2, err := Bind(b, other)
	if err != nil || b2.String() != "i8 > 0" || b2.Schema() != other {
		t.Fatalf("rebind: %v", err)
	}
}

func TestEvalHonoursContext(t *testing.T) {
	fx := newFixture(1, 20)
	defer fx.rec.Release()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	e, _ := Parse("i8 > 0 AND s = 'a'")
	if _, err := Select(ctx, e, fx.rec); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	ctx, cancel = context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	if _, err := Eval(ctx, e, fx.rec); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v", err)
	}
}

func TestEvalCorruptArraysAreErrors(t *testing.T) {
	mem := memory.DefaultAllocator
	t.Run("string offsets that go backwards", func(t *testing.T) {
		offs := arrow.Int32Traits.CastToBytes([]int32{0, 3, 1, 4})
		data := array.NewData(arrow.BinaryTypes.String, 3, []*memory.Buffer{nil, memory.NewBufferBytes(offs), memory.NewBufferBytes([]byte("abcd"))}, nil, 0, 0)
		arr := array.NewStringData(data)
		data.Release()
		schema := arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String}}, nil)
		rec := array.NewRecordBatch(schema, []arrow.Array{arr}, 3)
		arr.Release()
		defer rec.Release()
		for _, src := range []string{"s = 'a'", "s < 'a'", "s IN ('a')", "s LIKE 'a%'", "s = s"} {
			e, _ := Parse(src)
			if _, err := Select(context.Background(), e, rec); err == nil || !strings.Contains(err.Error(), "corrupt string array") {
				t.Fatalf("%s: got %v", src, err)
			}
		}
	})
	t.Run("a dictionary index past the dictionary", func(t *testing.T) {
		ib := array.NewInt8Builder(mem)
		ib.AppendValues([]int8{0, 5, 1}, []bool{true, true, true})
		idx := ib.NewArray()
		ib.Release()
		sb := array.NewStringBuilder(mem)
		sb.AppendValues([]string{"a", "b"}, nil)
		dict := sb.NewArray()
		sb.Release()
		dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}
		arr := array.NewDictionaryArray(dt, idx, dict)
		idx.Release()
		dict.Release()
		schema := arrow.NewSchema([]arrow.Field{{Name: "d", Type: dt}}, nil)
		rec := array.NewRecordBatch(schema, []arrow.Array{arr}, 3)
		arr.Release()
		defer rec.Release()
		e, _ := Parse("d = 'a'")
		if _, err := Select(context.Background(), e, rec); err == nil || !strings.Contains(err.Error(), "corrupt dictionary") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("a garbage dictionary index under a null is ignored", func(t *testing.T) {
		ib := array.NewInt8Builder(mem)
		ib.AppendValues([]int8{0, -7, 1}, []bool{true, false, true})
		idx := ib.NewArray()
		ib.Release()
		sb := array.NewStringBuilder(mem)
		sb.AppendValues([]string{"a", "b"}, nil)
		dict := sb.NewArray()
		sb.Release()
		dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}
		arr := array.NewDictionaryArray(dt, idx, dict)
		idx.Release()
		dict.Release()
		schema := arrow.NewSchema([]arrow.Field{{Name: "d", Type: dt}}, nil)
		rec := array.NewRecordBatch(schema, []arrow.Array{arr}, 3)
		arr.Release()
		defer rec.Release()
		e, _ := Parse("d != 'x'")
		sel, err := Select(context.Background(), e, rec)
		if err != nil || sel.Count() != 2 || sel.Get(1) {
			t.Fatalf("got %v, %d", err, sel.Count())
		}
	})
}

func TestBoundIsReusableAndConcurrent(t *testing.T) {
	fx := newFixture(9, 500)
	defer fx.rec.Release()
	e, _ := Parse("(i64 > 0 AND s LIKE 'a%') OR d8 IN ('b', 'zz') OR ts_us >= DATE '2024-01-02'")
	b, err := Bind(e, fx.schema)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Select(context.Background(), b, fx.rec)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 4)
	for g := 0; g < 4; g++ {
		go func() {
			for i := 0; i < 20; i++ {
				got, err := Select(context.Background(), b, fx.rec)
				if err != nil {
					errc <- err
					return
				}
				if got.Count() != want.Count() {
					errc <- fmt.Errorf("count %d, want %d", got.Count(), want.Count())
					return
				}
			}
			errc <- nil
		}()
	}
	for g := 0; g < 4; g++ {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
}

func TestEvalEmptyBatches(t *testing.T) {
	fx := newFixture(1, 10)
	defer fx.rec.Release()
	// Arrays built empty, as a reader may produce them, not slices of full ones.
	cols := make([]arrow.Array, fx.schema.NumFields())
	for i, f := range fx.schema.Fields() {
		cols[i] = array.MakeArrayOfNull(memory.DefaultAllocator, f.Type, 0)
	}
	rec := array.NewRecordBatch(fx.schema, cols, 0)
	for _, c := range cols {
		c.Release()
	}
	defer rec.Release()
	for _, src := range evalFilters {
		e, _ := Parse(src)
		b, err := Bind(e, fx.schema)
		if err != nil {
			continue
		}
		sel, err := Select(context.Background(), b, rec)
		if err != nil || sel.Len() != 0 || sel.Count() != 0 {
			t.Fatalf("%s over an empty batch: %v, %d rows", src, err, sel.Len())
		}
		mask := sel.Boolean()
		if mask.Len() != 0 {
			t.Fatalf("mask of %d rows", mask.Len())
		}
		mask.Release()
	}
}

// TestEvalAllNullColumns runs every filter over columns that hold only NULLs, as
// Arrow builds them (often without a values buffer worth reading).
func TestEvalAllNullColumns(t *testing.T) {
	base := newFixture(1, 10)
	defer base.rec.Release()
	const n = 130
	fx := &fixture{schema: base.schema, cells: map[string][]any{}}
	cols := make([]arrow.Array, base.schema.NumFields())
	for i, f := range base.schema.Fields() {
		cols[i] = array.MakeArrayOfNull(memory.DefaultAllocator, f.Type, n)
		fx.cells[f.Name] = make([]any, n)
	}
	fx.rec = array.NewRecordBatch(base.schema, cols, n)
	for _, c := range cols {
		c.Release()
	}
	defer fx.rec.Release()
	for _, src := range evalFilters {
		e, _ := Parse(src)
		if _, err := Bind(e, fx.schema); err != nil {
			continue
		}
		checkAgainstRef(t, fx, src)
	}
}
