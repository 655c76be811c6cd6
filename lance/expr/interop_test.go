package expr

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
)

// interopColumns are the fixture columns that LanceDB 0.31 can store and filter. It
// cannot store a timestamp with a fixed-offset zone such as "+05:30" (the Rust side
// panics), nor string views.
var interopColumns = []string{
	"i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "f32", "f64", "s", "ls", "bin", "d8",
	"b", "b2", "ts_s", "ts_ms", "ts_us", "ts_ns", "ts_ny", "d32", "weird name", "Mixed", "timestamp",
}

// lanceRejects reports whether LanceDB refuses a filter that Bind accepts. Lance casts
// each literal to its column's type and fails when the cast is not exact, so it refuses
// an integer column against a float (even 3.0) or an out-of-range integer, a timestamp
// column against an integer, and a binary column against a string; and a filter that
// is the bare NULL literal. lance/expr accepts all of these on purpose (see Bind); so
// does Lance itself, but for the timestamp case, when they sit under a NOT.
// lanceInconsistent reports whether LanceDB's count for a filter cannot be trusted.
// Under a NOT, Lance leaves literals to DataFusion, which compares inexactly: it widens
// a float32 column to float64 instead of rounding the literal to float32 as Lance does
// everywhere else, and it compares a 64-bit integer column with a float literal in
// float64, where integers beyond 2^53 round. Bind is exact in both cases.
func lanceInconsistent(e Expr, schema *arrow.Schema) bool {
	inexact32 := func(a, b Expr) bool {
		c, ok1 := a.(*colRef)
		l, ok2 := b.(*literal)
		if !ok1 || !ok2 {
			c, ok1 = b.(*colRef)
			l, ok2 = a.(*literal)
		}
		if !ok1 || !ok2 {
			return false
		}
		switch schema.Field(schema.FieldIndices(c.name)[0]).Type.ID() {
		case arrow.FLOAT32:
			switch l.kind {
			case litFloat:
				return float64(float32(l.f)) != l.f
			case litInt:
				return int64(float32(l.i)) != l.i
			}
		case arrow.INT64, arrow.UINT64:
			return l.kind == litFloat
		}
		return false
	}
	var walk func(e Expr, underNot bool) bool
	walk = func(e Expr, underNot bool) bool {
		switch e := e.(type) {
		case *compare:
			return underNot && inexact32(e.l, e.r)
		case *between:
			return underNot && (inexact32(e.x, e.lo) || inexact32(e.x, e.hi))
		case *inList:
			// One float in the list makes DataFusion compare the whole list in float64.
			hasFloat := slices.ContainsFunc(e.list, func(l *literal) bool { return l.kind == litFloat })
			return underNot && slices.ContainsFunc(e.list, func(l *literal) bool {
				if hasFloat && l.kind == litInt {
					l = &literal{kind: litFloat, f: float64(l.i)}
				}
				return inexact32(e.x, l)
			})
		case *isExpr:
			return walk(e.x, underNot)
		case *notExpr:
			return walk(e.x, true)
		case *andExpr:
			return slices.ContainsFunc(e.terms, func(t Expr) bool { return walk(t, underNot) })
		case *orExpr:
			return slices.ContainsFunc(e.terms, func(t Expr) bool { return walk(t, underNot) })
		}
		return false
	}
	return walk(e, false)
}

func lanceRejects(e Expr, schema *arrow.Schema) bool {
	if l, ok := e.(*literal); ok && l.kind == litNull {
		return true
	}
	var walk func(e Expr, underNot bool) bool
	colLit := func(c *colRef, l *literal, underNot bool) bool {
		dt := schema.Field(schema.FieldIndices(c.name)[0]).Type
		if d, ok := dt.(*arrow.DictionaryType); ok {
			dt = d.ValueType
		}
		if dt.ID() == arrow.TIMESTAMP && l.kind == litInt {
			return true // DataFusion cannot coerce these either
		}
		if underNot {
			return false
		}
		switch colClass(dt) {
		case classSigned, classUnsigned:
			if l.kind == litFloat {
				return true
			}
			if l.kind == litInt {
				lo, hi := typeBounds(dt)
				return l.i < lo || l.i > hi
			}
		case classString:
			return (dt.ID() == arrow.BINARY || dt.ID() == arrow.LARGE_BINARY) && l.kind == litString
		}
		return false
	}
	pair := func(a, b Expr, underNot bool) bool {
		c, ok1 := a.(*colRef)
		l, ok2 := b.(*literal)
		if !ok1 || !ok2 {
			c, ok1 = b.(*colRef)
			l, ok2 = a.(*literal)
		}
		return ok1 && ok2 && colLit(c, l, underNot)
	}
	walk = func(e Expr, underNot bool) bool {
		switch e := e.(type) {
		case *compare:
			return pair(e.l, e.r, underNot)
		case *between:
			return pair(e.x, e.lo, underNot) || pair(e.x, e.hi, underNot)
		case *inList:
			for _, l := range e.list {
				if pair(e.x, l, underNot) {
					return true
				}
			}
		case *isExpr:
			return walk(e.x, underNot)
		case *notExpr:
			// Lance's literal resolution does not look under NOT; DataFusion then
			// coerces the types itself (exactly, like Bind) and accepts the filter.
			return walk(e.x, true)
		case *andExpr:
			return slices.ContainsFunc(e.terms, func(t Expr) bool { return walk(t, underNot) })
		case *orExpr:
			return slices.ContainsFunc(e.terms, func(t Expr) bool { return walk(t, underNot) })
		}
		return false
	}
	return walk(e, false)
}

// moduleRoot finds the directory holding go.mod.
func moduleRoot(t testing.TB) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the working directory")
		}
		dir = parent
	}
}

// projectFixture keeps only the named columns of a fixture.
func projectFixture(fx *fixture, names []string) *fixture {
	var fields []arrow.Field
	var cols []arrow.Array
	cells := map[string][]any{}
	for _, n := range names {
		i := fx.schema.FieldIndices(n)[0]
		fields = append(fields, fx.schema.Field(i))
		cols = append(cols, fx.rec.Column(i))
		cells[n] = fx.cells[n]
	}
	schema := arrow.NewSchema(fields, nil)
	return &fixture{schema: schema, rec: array.NewRecordBatch(schema, cols, fx.rec.NumRows()), cells: cells}
}

// TestLanceDBAgrees writes the fixture into a LanceDB table and checks that LanceDB's
// countRows accepts the canonical text of every filter and counts what Select selects.
func TestLanceDBAgrees(t *testing.T) {
	full := newFixture(21, 400)
	defer full.rec.Release()
	cols := interopColumns
	if nyZone != "America/New_York" {
		// No tz database here; Lance cannot store the fixed-offset fallback zone.
		cols = slices.DeleteFunc(slices.Clone(cols), func(c string) bool { return c == "ts_ny" })
	}
	fx := projectFixture(full, cols)
	defer fx.rec.Release()

	// Filters: the hand-written list and random ones, restricted to stored columns.
	var srcs []string
	for _, src := range evalFilters {
		e, err := Parse(src)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Bind(e, fx.schema); err == nil {
			srcs = append(srcs, src)
		}
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for tries := 0; len(srcs) < len(evalFilters)+400 && tries < 10000; tries++ {
		src := randomFilter(rng, fx.schema.Fields(), 2)
		e, err := Parse(src)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Bind(e, fx.schema); err == nil {
			srcs = append(srcs, src)
		}
	}
	var canon []string
	var want []int
	for _, src := range srcs {
		e, _ := Parse(src)
		sel, err := Select(context.Background(), e, fx.rec)
		if err != nil {
			t.Fatal(err)
		}
		canon = append(canon, e.String())
		want = append(want, sel.Count())
	}

	got := lanceCounts(t, fx, canon)
	var failures []string
	rejected, inconsistent := 0, 0
	for i, g := range got {
		e, _ := Parse(srcs[i])
		wantReject := lanceRejects(e, fx.schema)
		switch {
		case wantReject && g.Error != "":
			rejected++
		case wantReject:
			failures = append(failures, "LanceDB accepts "+canon[i]+", which lanceRejects says it refuses")
		case g.Error != "":
			failures = append(failures, "LanceDB rejects "+canon[i]+": "+firstLine(g.Error))
		case lanceInconsistent(e, fx.schema):
			inconsistent++
		case *g.Count != want[i]:
			failures = append(failures, "count differs for "+canon[i]+": LanceDB "+strconv.Itoa(*g.Count)+", expr "+strconv.Itoa(want[i]))
		}
	}
	slices.Sort(failures)
	if len(failures) > 0 {
		t.Fatalf("%d of %d filters disagree with LanceDB:\n%s", len(failures), len(canon), strings.Join(failures, "\n"))
	}
	t.Logf("LanceDB agrees on all %d filters (%d refused by both LanceDB and lanceRejects; %d counts not compared, see lanceInconsistent)", len(canon), rejected, inconsistent)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return clip(s, 300)
}

type lanceResult struct {
	Count *int   `json:"count"`
	Error string `json:"error"`
}

// lanceCounts stores fx in a fresh LanceDB table and returns LanceDB's countRows for
// each filter, in one node process.
func lanceCounts(t testing.TB, fx *fixture, filters []string) []lanceResult {
	t.Helper()
	root := moduleRoot(t)
	script := filepath.Join(root, "tests", "interop", "expr_filters.mjs")
	if _, err := os.Stat(filepath.Join(root, "tests", "interop", "node_modules", "@lancedb", "lancedb")); err != nil {
		t.Fatalf("LanceDB oracle not installed: run `npm ci --prefix tests/interop` (%v)", err)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("the LanceDB interop check needs node on PATH: %v", err)
	}
	dir := t.TempDir()
	var buf bytes.Buffer
	w, err := ipc.NewFileWriter(&buf, ipc.WithSchema(fx.schema))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(fx.rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	dataPath := filepath.Join(dir, "data.arrow")
	filtersPath := filepath.Join(dir, "filters.json")
	js, _ := json.Marshal(filters)
	if err := os.WriteFile(dataPath, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filtersPath, js, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script, dataPath, filtersPath, filepath.Join(dir, "db"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %s: %v\n%s", script, err, stderr.String())
	}
	var got []lanceResult
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil || len(got) != len(filters) {
		t.Fatalf("oracle output (%v): %.500s", err, stdout.String())
	}
	return got
}
