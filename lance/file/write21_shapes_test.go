package file_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lancectx/lancectx/internal/oracle"
	"github.com/lancectx/lancectx/lance/file"
	"github.com/lancectx/lancectx/lance/schema"
)

// sizeShape is one column shape of TestFileSize21Shapes: a name and a builder of n
// values into an Arrow array.
type sizeShape struct {
	name  string
	typ   arrow.DataType
	build func(b array.Builder, n int, r *shapeRand)
}

// shapeRand is a small deterministic generator (splitmix64), so both writers get the
// same values on every run.
type shapeRand struct{ s uint64 }

func (r *shapeRand) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

var shapeWords = strings.Fields("the quick brown fox jumps over lazy dog agent tool call reward step observation action user assistant system")

func sizeShapes() []sizeShape {
	return []sizeShape{
		{"int64 ascending", arrow.PrimitiveTypes.Int64, func(b array.Builder, n int, _ *shapeRand) {
			for i := range n {
				b.(*array.Int64Builder).Append(int64(i))
			}
		}},
		{"int32 long runs", arrow.PrimitiveTypes.Int32, func(b array.Builder, n int, _ *shapeRand) {
			for i := range n {
				b.(*array.Int32Builder).Append(int32(i / 1000))
			}
		}},
		{"int32 constant", arrow.PrimitiveTypes.Int32, func(b array.Builder, n int, _ *shapeRand) {
			for range n {
				b.(*array.Int32Builder).Append(7)
			}
		}},
		{"int64 random", arrow.PrimitiveTypes.Int64, func(b array.Builder, n int, r *shapeRand) {
			for range n {
				b.(*array.Int64Builder).Append(int64(r.next()))
			}
		}},
		{"uint16 small", arrow.PrimitiveTypes.Uint16, func(b array.Builder, n int, r *shapeRand) {
			for range n {
				b.(*array.Uint16Builder).Append(uint16(r.next() % 100))
			}
		}},
		{"int32 nullable 90% null", arrow.PrimitiveTypes.Int32, func(b array.Builder, n int, r *shapeRand) {
			for range n {
				if r.next()%10 != 0 {
					b.AppendNull()
				} else {
					b.(*array.Int32Builder).Append(int32(r.next() % 1_000_000))
				}
			}
		}},
		{"float64 random", arrow.PrimitiveTypes.Float64, func(b array.Builder, n int, r *shapeRand) {
			for range n {
				b.(*array.Float64Builder).Append(float64(r.next()>>11) / (1 << 53))
			}
		}},
		{"float32 smooth", arrow.PrimitiveTypes.Float32, func(b array.Builder, n int, _ *shapeRand) {
			for i := range n {
				b.(*array.Float32Builder).Append(float32(math.Sin(float64(i) / 100)))
			}
		}},
		{"bool mostly false", arrow.FixedWidthTypes.Boolean, func(b array.Builder, n int, r *shapeRand) {
			for range n {
				b.(*array.BooleanBuilder).Append(r.next()%50 == 0)
			}
		}},
		{"timestamp ms ascending", &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}, func(b array.Builder, n int, r *shapeRand) {
			t := int64(1_700_000_000_000)
			for range n {
				t += int64(r.next() % 2000)
				b.(*array.TimestampBuilder).Append(arrow.Timestamp(t))
			}
		}},
		{"utf8 low cardinality", arrow.BinaryTypes.String, func(b array.Builder, n int, r *shapeRand) {
			for range n {
				b.(*array.StringBuilder).Append(shapeWords[r.next()%8])
			}
		}},
		{"utf8 unique ids", arrow.BinaryTypes.String, func(b array.Builder, n int, r *shapeRand) {
			for i := range n {
				b.(*array.StringBuilder).Append(fmt.Sprintf("traj-%08x-%d", uint32(r.next()), i))
			}
		}},
		{"utf8 sentences", arrow.BinaryTypes.String, func(b array.Builder, n int, r *shapeRand) {
			var sb strings.Builder
			for range n {
				sb.Reset()
				for k := range 8 + r.next()%24 {
					if k > 0 {
						sb.WriteByte(' ')
					}
					sb.WriteString(shapeWords[r.next()%uint64(len(shapeWords))])
				}
				b.(*array.StringBuilder).Append(sb.String())
			}
		}},
		{"binary random 100 B", arrow.BinaryTypes.Binary, func(b array.Builder, n int, r *shapeRand) {
			v := make([]byte, 104)
			for range n {
				for k := 0; k < len(v); k += 8 {
					binary.LittleEndian.PutUint64(v[k:], r.next())
				}
				b.(*array.BinaryBuilder).Append(v[:100])
			}
		}},
		{"fsl float32 x 16", arrow.FixedSizeListOf(16, arrow.PrimitiveTypes.Float32), func(b array.Builder, n int, r *shapeRand) {
			lb := b.(*array.FixedSizeListBuilder)
			vb := lb.ValueBuilder().(*array.Float32Builder)
			for range n {
				lb.Append(true)
				for range 16 {
					vb.Append(float32(r.next()>>40) / (1 << 24))
				}
			}
		}},
		{"list int32 short", arrow.ListOf(arrow.PrimitiveTypes.Int32), func(b array.Builder, n int, r *shapeRand) {
			lb := b.(*array.ListBuilder)
			vb := lb.ValueBuilder().(*array.Int32Builder)
			for range n {
				lb.Append(true)
				for range r.next() % 6 {
					vb.Append(int32(r.next() % 50000))
				}
			}
		}},
	}
}

// TestFileSize21Shapes writes one column of each shape (100,000 rows, a single file)
// with lancectx and with LanceDB in format 2.1 and compares the file sizes: lancectx's
// encodings must not make a file more than 1.15 times LanceDB's for the same data. The
// rollout columns are compared in TestFileSize21VersusLanceDB; these are the shapes
// LanceDB's writer answers with other encodings (runs, constants, dictionaries, sparse
// nulls, vectors).
func TestFileSize21Shapes(t *testing.T) {
	const rows = 100_000
	o := oracle.New(t)
	o.Timeout = 5 * oracle.DefaultTimeout
	var report strings.Builder
	for i, sh := range sizeShapes() {
		t.Run(strings.ReplaceAll(sh.name, " ", "_"), func(t *testing.T) {
			b := array.NewBuilder(memory.DefaultAllocator, sh.typ)
			defer b.Release()
			sh.build(b, rows, &shapeRand{s: uint64(i + 1)})
			col := b.NewArray()
			defer col.Release()
			sch := arrow.NewSchema([]arrow.Field{{Name: "v", Type: sh.typ, Nullable: true}}, nil)
			rec := array.NewRecordBatch(sch, []arrow.Array{col}, rows)
			defer rec.Release()

			ours := writeRecord21(t, rec)
			path := filepath.Join(t.TempDir(), "ldb.lance")
			if _, err := o.CreateBatch(path, rec, oracle.CreateOptions{StorageVersion: "2.1"}); err != nil {
				t.Fatal(err)
			}
			ents, err := os.ReadDir(filepath.Join(path, "data"))
			if err != nil {
				t.Fatal(err)
			}
			var theirs int64
			for _, e := range ents {
				fi, err := e.Info()
				if err != nil {
					t.Fatal(err)
				}
				theirs += fi.Size()
			}
			ratio := float64(len(ours)) / float64(theirs)
			fmt.Fprintf(&report, "  %-26s lancectx %9d  LanceDB %9d  ratio %.3f\n", sh.name, len(ours), theirs, ratio)
			if ratio > 1.15 {
				t.Errorf("%s: lancectx's 2.1 file is %d bytes, %.3f times LanceDB's %d (want at most 1.15)", sh.name, len(ours), ratio, theirs)
			}
		})
	}
	t.Logf("one column of %d rows in format 2.1, file bytes:\n%s", rows, report.String())
}

// writeRecord21 writes rec into one 2.1 file with lancectx's writer.
func writeRecord21(t testing.TB, rec arrow.RecordBatch) []byte {
	t.Helper()
	s, err := schema.FromArrow(rec.Schema())
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, err := file.NewWriter(&buf, s, file.WriterOptions{Version: file.V2_1})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
