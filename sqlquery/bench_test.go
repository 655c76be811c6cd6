package sqlquery

import (
	"context"
	"strconv"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// BenchmarkGroupBy1M: the query, GROUP BY rollout_id with avg(reward), over
// 1M rows in 8,192-row batches already in memory (the engine's part of the master's
// query route: the store read is not in it). 10,000 rollouts of 100 steps.
func BenchmarkGroupBy1M(b *testing.B) {
	const rows, batch = 1_000_000, 8192
	sch := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.BinaryTypes.String},
		{Name: "rollout_id", Type: arrow.BinaryTypes.String},
		{Name: "reward", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
		{Name: "content", Type: arrow.BinaryTypes.LargeString, Nullable: true},
	}, nil)
	var recs []arrow.RecordBatch
	for start := 0; start < rows; start += batch {
		bld := array.NewRecordBuilder(memory.DefaultAllocator, sch)
		for i := start; i < min(start+batch, rows); i++ {
			bld.Field(0).(*array.StringBuilder).Append("step-" + strconv.Itoa(i))
			bld.Field(1).(*array.StringBuilder).Append("rollout-" + strconv.Itoa(i/100))
			bld.Field(2).(*array.Float32Builder).Append(float32(i%7) / 7)
			bld.Field(3).(*array.LargeStringBuilder).Append("some content of the step")
		}
		recs = append(recs, bld.NewRecordBatch())
		bld.Release()
	}
	src := Source{Schema: sch, Rows: rows, Open: func(context.Context, []string) (array.RecordReader, error) {
		return array.NewRecordReader(sch, recs)
	}}
	b.ResetTimer()
	for b.Loop() {
		res, err := Query(b.Context(), src, `SELECT rollout_id, avg(reward) AS r FROM records GROUP BY rollout_id ORDER BY r DESC, rollout_id LIMIT 100`, Options{})
		if err != nil || res.RowCount != 100 || res.SourceRows != rows {
			b.Fatalf("%+v %v", res.RowCount, err)
		}
	}
}
