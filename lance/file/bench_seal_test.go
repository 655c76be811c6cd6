package file

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lancectx/lancectx/lance/schema"
	"github.com/lancectx/lancectx/rollout"
)

// sealBatches are the batches a WAL seal of the Arrow ingest route hands the writer:
// entries of rows each (as bench/worker_bench -route arrow posts them, ~1 KiB content),
// decoded by rollout.ParseAppendArrow and laid out as the whole rollout schema, the
// columns the body lacks all null.
func sealBatches(tb testing.TB, entries, rows int) []arrow.RecordBatch {
	tb.Helper()
	client := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "rollout_id", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "sequence_order", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "role", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "content", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "reward", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "policy_version", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	words := strings.Fields("the model reasons about the tool output and then answers the user with a short plan")
	var sb strings.Builder
	for i := 0; sb.Len() < 1000; i++ {
		sb.WriteString(words[(i*7)%len(words)])
		sb.WriteByte(' ')
	}
	content := sb.String()
	full := rollout.Schema()
	out := make([]arrow.RecordBatch, 0, entries)
	var buf bytes.Buffer
	for e := range entries {
		b := array.NewRecordBuilder(memory.DefaultAllocator, client)
		for k := range rows {
			b.Field(0).(*array.StringBuilder).Append("c3-" + strconv.Itoa(e) + "-" + strconv.Itoa(k))
			b.Field(1).(*array.StringBuilder).Append("r3-" + strconv.Itoa(e))
			b.Field(2).(*array.Int64Builder).Append(int64(k))
			b.Field(3).(*array.StringBuilder).Append([...]string{"system", "user", "assistant", "tool"}[k%4])
			b.Field(4).(*array.StringBuilder).Append(content[k%64:])
			b.Field(5).(*array.Float64Builder).Append(float64(k) / 16)
			b.Field(6).(*array.StringBuilder).Append("ckpt-1")
		}
		rec := b.NewRecordBatch()
		b.Release()
		buf.Reset()
		w := ipc.NewWriter(&buf, ipc.WithSchema(client))
		if err := w.Write(rec); err != nil {
			tb.Fatal(err)
		}
		if err := w.Close(); err != nil {
			tb.Fatal(err)
		}
		rec.Release()
		recs, err := rollout.ParseAppendArrow(buf.Bytes(), rollout.DecodeOptions{Now: func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }})
		if err != nil {
			tb.Fatal(err)
		}
		for _, r := range recs {
			cols := make([]arrow.Array, full.NumFields())
			for i, f := range full.Fields() {
				if j := r.Schema().FieldIndices(f.Name); len(j) > 0 {
					cols[i] = r.Column(j[0])
					cols[i].Retain()
				} else {
					cols[i] = array.MakeArrayOfNull(memory.DefaultAllocator, f.Type, int(r.NumRows()))
				}
			}
			out = append(out, array.NewRecordBatch(full, cols, r.NumRows()))
			for _, c := range cols {
				c.Release()
			}
			r.Release()
		}
	}
	return out
}

// BenchmarkSeal21 writes one WAL generation of Arrow-route rollout rows (8,000 rows,
// about 8 MiB, the whole rollout schema) to a 2.1 file as a seal does, from entries of
// 1,000 rows (bench/worker_bench -route arrow -batch 1000) and of 10 rows (-batch 10),
// and reports the writer's cost per row: wall and process CPU time, bytes and
// allocations (B/op and allocs/op are per file), and the file's bytes per row.
func BenchmarkSeal21(b *testing.B) {
	for _, rows := range []int{1000, 10} {
		b.Run("entry="+strconv.Itoa(rows), func(b *testing.B) { benchSeal21(b, 8000/rows, rows) })
	}
}

func benchSeal21(b *testing.B, entries, rows int) {
	recs := sealBatches(b, entries, rows)
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	s, err := schema.FromArrow(rollout.Schema())
	if err != nil {
		b.Fatal(err)
	}
	// The hint a seal passes (wal.varBytes): each string column's value bytes.
	var hint []int64
	for i := range rollout.Schema().NumFields() {
		var n int64
		for _, r := range recs {
			if a, ok := r.Column(i).(interface{ ValueBytes() []byte }); ok {
				n += int64(len(a.ValueBytes()))
			}
		}
		hint = append(hint, n)
	}
	total := entries * rows
	var size int64
	b.ReportAllocs()
	cpu0 := processCPU()
	for b.Loop() {
		var out countingDiscard
		w, err := NewWriter(&out, s, WriterOptions{Version: V2_1, VarBytesHint: hint})
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range recs {
			if err := w.Write(r); err != nil {
				b.Fatal(err)
			}
		}
		info, err := w.Close()
		if err != nil {
			b.Fatal(err)
		}
		size = int64(info.Size)
	}
	cpu := processCPU() - cpu0
	el := b.Elapsed()
	b.ReportMetric(float64(el.Nanoseconds())/float64(b.N*total), "ns/row")
	// On a shared machine wall time mostly measures the neighbours; process CPU time
	// (GC included) is the writer's cost.
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*total), "cpu-ns/row")
	b.ReportMetric(float64(size)/float64(total), "filebytes/row")
	b.ReportMetric(0, "ns/op")
}
