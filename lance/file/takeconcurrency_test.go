package file

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lancectx/lancectx/internal/gate"
	"github.com/lancectx/lancectx/lance/schema"
)

// gateSource holds the reads of a take until a number of them are in flight at once
// (internal/gate): a take whose reads go out one after another fails with its
// context's error instead.
type gateSource struct {
	src  Source
	gate gate.Gate
}

func (g *gateSource) ReadRange(ctx context.Context, off, length int64) ([]byte, error) {
	leave, err := g.gate.Enter(ctx)
	if err != nil {
		return nil, err
	}
	defer leave()
	return g.src.ReadRange(ctx, off, length)
}

// TestTakeReadsGoOutTogether: a take of a few scattered rows issues the reads of its
// pages, its columns and a struct's leaves at once rather than one after another: on
// an object store each read is a round trip, and a search's record fetch was about 60
// of them deep.
func TestTakeReadsGoOutTogether(t *testing.T) {
	var fields []arrow.Field
	for i := range 8 {
		fields = append(fields, arrow.Field{Name: fmt.Sprintf("c%d", i), Type: arrow.PrimitiveTypes.Int64, Nullable: true})
	}
	var leaves []arrow.Field
	for i := range 8 {
		leaves = append(leaves, arrow.Field{Name: fmt.Sprintf("l%d", i), Type: arrow.PrimitiveTypes.Int32, Nullable: true})
	}
	fields = append(fields, arrow.Field{Name: "st", Type: arrow.StructOf(leaves...), Nullable: true},
		arrow.Field{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true})
	as := arrow.NewSchema(fields, nil)
	s, err := schema.FromArrow(as)
	if err != nil {
		t.Fatal(err)
	}
	g := &gen{rng: rand.New(rand.NewPCG(9, 9)), mem: memory.DefaultAllocator}
	rec := g.record(as, 1000)
	defer rec.Release()
	ids := func(names ...string) []int32 {
		var out []int32
		for _, n := range names {
			out = append(out, s.Field(n).ID)
		}
		return out
	}
	var all []string
	for _, f := range fields {
		all = append(all, f.Name)
	}
	for _, v := range []FormatVersion{V2_0, V2_1} {
		// Pages of 100 rows: rows 100 apart are in pages of their own.
		data, _ := writeFile(t, s, WriterOptions{Version: v, PageRows: 100}, rec)
		for _, c := range []struct {
			name   string
			fields []int32
			rows   []uint64
			want   int
		}{
			{"8 pages of one column", ids("c0"), []uint64{5, 105, 205, 305, 405, 505, 605, 705}, 8},
			{"8 pages of a string column (2.0: read whole)", ids("s"), []uint64{5, 105, 205, 305, 405, 505, 605, 705}, 8},
			{"one row of 10 columns", ids(all...), []uint64{5}, 8},
			{"one row of a struct's 8 leaves", ids("st"), []uint64{5}, decodeFieldsAtOnce},
		} {
			if v == V2_0 && c.fields[0] == s.Field("st").ID {
				continue // 2.0 stores a struct's leaves as columns of its children: the case above covers them
			}
			t.Run(v.String()+"/"+c.name, func(t *testing.T) {
				gs := &gateSource{src: BytesSource(data)}
				r, err := OpenWith(context.Background(), gs, int64(len(data)), ReaderOptions{PageCacheBytes: -1})
				if err != nil {
					t.Fatal(err)
				}
				gs.gate.Arm(c.want)
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				got, err := r.Take(ctx, c.fields, c.rows)
				if err != nil {
					t.Fatalf("take: %v", err)
				}
				defer got.Release()
				whole, err := OpenWith(context.Background(), BytesSource(data), int64(len(data)), ReaderOptions{PageCacheBytes: -1})
				if err != nil {
					t.Fatal(err)
				}
				want, err := whole.TakeWith(context.Background(), c.fields, c.rows, ReadOptions{NoRandomAccess: true})
				if err != nil {
					t.Fatal(err)
				}
				defer want.Release()
				for i := range int(want.NumCols()) {
					if !array.Equal(got.Column(i), want.Column(i)) {
						t.Fatalf("column %s differs from the whole-page take", want.ColumnName(i))
					}
				}
			})
		}
	}
}
