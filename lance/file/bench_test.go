package file

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lancectx/lancectx/lance/schema"
)

// rolloutSchema is the shape of a rollout row: one message of a trajectory.
func rolloutSchema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.BinaryTypes.String},
		{Name: "role", Type: arrow.BinaryTypes.String},
		{Name: "content", Type: arrow.BinaryTypes.LargeString, Nullable: true},
		{Name: "reward", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
		{Name: "tokens", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32), Nullable: true},
	}, nil)
}

// rolloutBatch builds n rollout rows (~1 KiB content, 64 tokens) and returns them with
// their raw size in bytes (values only).
func rolloutBatch(n int, seed uint64) (arrow.RecordBatch, int64) {
	mem := memory.DefaultAllocator
	rng := rand.New(rand.NewPCG(seed, 0))
	as := rolloutSchema()
	b := array.NewRecordBuilder(mem, as)
	defer b.Release()
	ids := b.Field(0).(*array.StringBuilder)
	roles := b.Field(1).(*array.StringBuilder)
	content := b.Field(2).(*array.LargeStringBuilder)
	reward := b.Field(3).(*array.Float32Builder)
	tokens := b.Field(4).(*array.ListBuilder)
	tv := tokens.ValueBuilder().(*array.Int32Builder)
	words := strings.Fields("the model reasons about the tool output and then answers the user with a short plan")
	var raw int64
	var sb strings.Builder
	toks := make([]int32, 64)
	for i := range n {
		id := fmt.Sprintf("exp-%04d-traj-%08d-step-%03d", seed%1000, i/16, i%16)
		ids.Append(id)
		role := [...]string{"system", "user", "assistant", "tool"}[i%4]
		roles.Append(role)
		sb.Reset()
		for sb.Len() < 1000 {
			sb.WriteString(words[rng.IntN(len(words))])
			sb.WriteByte(' ')
		}
		content.Append(sb.String())
		reward.Append(rng.Float32())
		for k := range toks {
			toks[k] = rng.Int32N(150000)
		}
		tokens.Append(true)
		tv.AppendValues(toks, nil)
		raw += int64(len(id) + len(role) + sb.Len() + 4 + 4*len(toks))
	}
	return b.NewRecordBatch(), raw
}

func BenchmarkWrite(b *testing.B) {
	const batchRows, batches = 4096, 8
	rec, raw := rolloutBatch(batchRows, 1)
	defer rec.Release()
	s, err := schema.FromArrow(rec.Schema())
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(raw * batches)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		var out countingDiscard
		w, err := NewWriter(&out, s, WriterOptions{})
		if err != nil {
			b.Fatal(err)
		}
		for range batches {
			if err := w.Write(rec); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := w.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(batchRows*batches)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

func benchFile(b *testing.B) (*Reader, int64, int) {
	const batchRows, batches = 4096, 8
	rec, raw := rolloutBatch(batchRows, 2)
	defer rec.Release()
	s, _ := schema.FromArrow(rec.Schema())
	recs := make([]arrow.RecordBatch, batches)
	for i := range recs {
		recs[i] = rec
	}
	data, _ := writeFile(b, s, WriterOptions{}, recs...)
	r, err := Open(context.Background(), BytesSource(data), int64(len(data)))
	if err != nil {
		b.Fatal(err)
	}
	return r, raw * batches, batchRows * batches
}

func BenchmarkRead(b *testing.B) {
	r, raw, rows := benchFile(b)
	ids := topIDs(r.Schema())
	b.SetBytes(raw)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		rec, err := r.Read(context.Background(), ids, 0, uint64(rows))
		if err != nil {
			b.Fatal(err)
		}
		rec.Release()
	}
	b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

func BenchmarkTake(b *testing.B) {
	r, _, rows := benchFile(b)
	ids := topIDs(r.Schema())
	var take []uint64
	for i := 0; i < rows; i += 37 {
		take = append(take, uint64(i))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		rec, err := r.Take(context.Background(), ids, take)
		if err != nil {
			b.Fatal(err)
		}
		rec.Release()
	}
	b.ReportMetric(float64(len(take))*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
}

// rollout21 opens the data file of a LanceDB-written 2.1 table of rollout rows: the
// table in $LANCECTX_BENCH21_DIR (made by `node tests/interop/filecheck21.mjs rollout DIR
// 2.1 ROWS`) or, unset, a 50,000-row one generated now.
func rollout21(b *testing.B) *Reader {
	b.Helper()
	dir := os.Getenv("LANCECTX_BENCH21_DIR")
	if dir == "" {
		dir = b.TempDir()
		runFilecheck21(b, "rollout", dir, "2.1", "50000")
	}
	tb := openTable21(b, filepath.Join(dir, "rollout.lance"), "2.1")
	return tb.readers[0]
}

// BenchmarkRead21Rollout scans a LanceDB-written 2.1 file in 8,192-row batches (as a
// dataset scan does): every column, then two. The LanceDB side of the comparison:
// `node tests/interop/bench-peer.mjs scan --uri DIR/rollout.lance [--columns reward,id]`.
func BenchmarkRead21Rollout(b *testing.B) {
	r := rollout21(b)
	s := r.Schema()
	for _, tc := range []struct {
		name string
		ids  []int32
	}{
		{"all", topIDs(s)},
		{"reward_id", []int32{s.Field("reward").ID, s.Field("id").ID}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			rows := r.NumRows()
			b.ReportAllocs()
			for b.Loop() {
				for a := uint64(0); a < rows; a += 8192 {
					rec, err := r.Read(context.Background(), tc.ids, a, min(rows, a+8192))
					if err != nil {
						b.Fatal(err)
					}
					rec.Release()
				}
			}
			b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
