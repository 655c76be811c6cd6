package expr

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

const benchRows = 1 << 20

// benchRecord has 1M rows: an int64 column, a string column and a dictionary string
// column, each about 10% NULL.
func benchRecord(b *testing.B) arrow.RecordBatch {
	rng := rand.New(rand.NewPCG(1, 2))
	mem := memory.DefaultAllocator
	ib := array.NewInt64Builder(mem)
	sb := array.NewStringBuilder(mem)
	dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}
	db := array.NewDictionaryBuilder(mem, dt).(*array.BinaryDictionaryBuilder)
	words := make([]string, 1000)
	for i := range words {
		words[i] = fmt.Sprintf("user-%04d-%x", i, rng.Uint32())
	}
	for i := 0; i < benchRows; i++ {
		if rng.IntN(10) == 0 {
			ib.AppendNull()
			sb.AppendNull()
			db.AppendNull()
			continue
		}
		ib.Append(rng.Int64N(1000))
		w := words[rng.IntN(len(words))]
		sb.Append(w)
		if err := db.AppendString(w); err != nil {
			b.Fatal(err)
		}
	}
	cols := []arrow.Array{ib.NewArray(), sb.NewArray(), db.NewArray()}
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "x", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "d", Type: dt, Nullable: true},
	}, nil)
	rec := array.NewRecordBatch(schema, cols, benchRows)
	for _, c := range cols {
		c.Release()
	}
	return rec
}

// BenchmarkEval reports ns/row for typical filters over 1M rows.
func BenchmarkEval(b *testing.B) {
	rec := benchRecord(b)
	defer rec.Release()
	w := rec.Column(1).(*array.String).Value(0)
	cases := []struct{ name, src string }{
		{"int64_gt", "x > 500"},
		{"int64_eq", "x = 500"},
		{"string_eq", "s = '" + w + "'"},
		{"string_lt", "s < 'user-0500'"},
		{"string_in_3", "s IN ('" + w + "', 'b', 'c')"},
		{"string_like_prefix", "s LIKE 'user-01%'"},
		{"string_like_general", "s LIKE 'user-_1%a%'"},
		{"dict_string_eq", "d = '" + w + "'"},
		{"int64_in_20", "x IN (1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20)"},
		{"int64_between_and_string", "x BETWEEN 100 AND 200 AND s >= 'user-05'"},
		{"is_not_null", "x IS NOT NULL"},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			e, err := Parse(tc.src)
			if err != nil {
				b.Fatal(err)
			}
			bound, err := Bind(e, rec.Schema())
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ResetTimer()
			for b.Loop() {
				sel, err := Select(ctx, bound, rec)
				if err != nil {
					b.Fatal(err)
				}
				_ = sel
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/benchRows, "ns/row")
		})
	}
}

// BenchmarkParse measures Parse+Bind of a moderately complex filter.
func BenchmarkParse(b *testing.B) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "x", Type: arrow.PrimitiveTypes.Int64},
		{Name: "s", Type: arrow.BinaryTypes.String},
	}, nil)
	src := "(x > 5 AND s LIKE 'abc%') OR x IN (1, 2, 3) OR s BETWEEN 'a' AND 'b'"
	for b.Loop() {
		e, err := Parse(src)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Bind(e, schema); err != nil {
			b.Fatal(err)
		}
	}
}
