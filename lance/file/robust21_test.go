package file

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	pb21 "github.com/lancectx/lancectx/lance/format/encodings21pb"
	"github.com/lancectx/lancectx/lance/format/filepb"
	"github.com/lancectx/lancectx/lance/schema"
)

// The checked-in LanceDB 2.1/2.2 files (testdata/lancedb21, regenerate with
// `node tests/interop/filecheck21.mjs seeds DIR`; rows.json holds LanceDB's rows) seed
// the fuzz targets and the corruption tests, and are read without node here.

type seed21 struct {
	name string
	data []byte
}

func seeds21(tb testing.TB) []seed21 {
	tb.Helper()
	files, _ := filepath.Glob(filepath.Join("testdata", "lancedb21", "*.lance"))
	var out []seed21
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, seed21{strings.TrimSuffix(filepath.Base(f), ".lance"), b})
	}
	if len(out) == 0 {
		tb.Fatal("no LanceDB seed files in testdata/lancedb21")
	}
	return out
}

func TestRead21SeedFiles(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "lancedb21", "rows.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rows map[string][]map[string]any
	if err := json.Unmarshal(b, &rows); err != nil {
		t.Fatal(err)
	}
	for _, s := range seeds21(t) {
		t.Run(s.name, func(t *testing.T) {
			want := rows[s.name]
			r := openBytes(t, s.data)
			if maj, min := r.Version(); maj != 2 || min != uint16(s.name[len(s.name)-1]-'0') {
				t.Fatalf("footer version %d.%d", maj, min)
			}
			tb := &table21{readers: []*Reader{r}}
			n := r.NumRows()
			if int(n) != len(want) {
				t.Fatalf("%d rows, LanceDB read %d", n, len(want))
			}
			compareRows(t, "whole file", tb.read(t, 0, n), want)
			compareRows(t, "range", tb.read(t, 1, n-1), want[1:n-1])
			idx := []uint64{0, 0, 2, 3, n / 2, n - 1}
			var wt []map[string]any
			for _, i := range idx {
				wt = append(wt, want[i])
			}
			compareRows(t, "take", tb.take(t, idx), wt)
		})
	}
}

// readEverything reads a whole file, a range and a take; errors are returned, the
// arrays of successful reads must be valid.
func readEverything(t testing.TB, data []byte) error {
	r, err := Open(context.Background(), BytesSource(data), int64(len(data)))
	if err != nil {
		return err
	}
	r.maxDecode = 64 << 20
	ids := topIDs(r.Schema())
	n := r.NumRows()
	var first error
	if rec, err := r.Read(context.Background(), ids, 0, n); err == nil {
		if verr := validateRecord(rec); verr != nil {
			t.Fatalf("Read produced invalid arrays: %v", verr)
		}
		rec.Release()
	} else {
		first = err
	}
	if n > 2 {
		if rec, err := r.Take(context.Background(), ids, []uint64{0, n / 2, n / 2, n - 1}); err == nil {
			if verr := validateRecord(rec); verr != nil {
				t.Fatalf("Take produced invalid arrays: %v", verr)
			}
			rec.Release()
		} else if first == nil {
			first = err
		}
	}
	return first
}

func TestRead21CorruptFilesAreErrors(t *testing.T) {
	for _, s := range seeds21(t) {
		t.Run(s.name, func(t *testing.T) {
			base := s.data
			for n := 0; n < len(base); n += 1 + n/40 {
				if _, err := Open(context.Background(), BytesSource(base[:n]), int64(n)); err == nil {
					t.Fatalf("truncated to %d bytes: Open succeeded", n)
				}
			}
			// Random damage anywhere: an error or a valid read, never a panic.
			rng := rand.New(rand.NewPCG(21, uint64(len(base))))
			for range 400 {
				c := bytes.Clone(base)
				for range 1 + rng.IntN(4) {
					c[rng.IntN(len(c))] ^= byte(1 + rng.IntN(255))
				}
				_ = readEverything(t, c)
			}
		})
	}
}

// pageOf returns the first page of the column of the named leaf path.
func pageOf(t testing.TB, r *Reader, path ...string) *pageInfo {
	t.Helper()
	f := r.Schema().Field(path[0])
	for _, p := range path[1:] {
		for _, c := range f.Children {
			if c.Name == p {
				f = c
			}
		}
	}
	c, ok := r.colOf[f.ID]
	if !ok {
		t.Fatalf("no column for %v", path)
	}
	return &r.cols[c].pages[0]
}

// TestRead21StructuralDamageIsCorrupt damages the structures that locate values (chunk
// metadata, chunk headers, repetition indexes, control words, levels) and expects
// ErrCorrupt: without them a reader would return wrong values.
func TestRead21StructuralDamageIsCorrupt(t *testing.T) {
	files := map[string][]byte{}
	for _, s := range seeds21(t) {
		files[s.name] = s.data
	}
	type damage struct {
		name  string
		file  string
		field []string
		edit  func(data []byte, p *pageInfo)
	}
	buf := func(p *pageInfo, i int) (int, int) { return int(p.bufs[i].pos), int(p.bufs[i].size) }
	for _, tc := range []damage{
		{"chunk metadata word count", "prims21", []string{"id"}, func(d []byte, p *pageInfo) {
			o, _ := buf(p, 0)
			binary.LittleEndian.PutUint16(d[o:], binary.LittleEndian.Uint16(d[o:])+1) // one value more
		}},
		{"chunk metadata size", "prims22", []string{"id"}, func(d []byte, p *pageInfo) {
			o, _ := buf(p, 0)
			binary.LittleEndian.PutUint32(d[o:], binary.LittleEndian.Uint32(d[o:])+0x100000) // 64 KiB larger
		}},
		{"chunk value buffer size", "prims21", []string{"nn_f64"}, func(d []byte, p *pageInfo) {
			o, _ := buf(p, 1)
			binary.LittleEndian.PutUint16(d[o+2:], 0xFFF0)
		}},
		{"chunk level count", "nested21", []string{"li", "item"}, func(d []byte, p *pageInfo) {
			o, _ := buf(p, 1)
			binary.LittleEndian.PutUint16(d[o:], binary.LittleEndian.Uint16(d[o:])+3)
		}},
		{"repetition index rows", "nested21", []string{"ll", "item", "item"}, func(d []byte, p *pageInfo) {
			o, _ := buf(p, len(p.bufs)-1)
			binary.LittleEndian.PutUint64(d[o:], binary.LittleEndian.Uint64(d[o:])-1)
		}},
		{"full-zip repetition index", "fullzip21", []string{"long"}, func(d []byte, p *pageInfo) {
			o, sz := buf(p, 1)
			w := sz / 7 // 6 rows + 1
			d[o+2*w] ^= 0x01
		}},
		{"full-zip control word", "fullzip22", []string{"long"}, func(d []byte, p *pageInfo) {
			o, _ := buf(p, 0)
			d[o] = 0x7F // definition level beyond the layers'
		}},
		{"blob position", "fullzip21", []string{"blobcol"}, func(d []byte, p *pageInfo) {
			o, _ := buf(p, 1)
			// First chunk: 2-byte level count, 2-byte buffer size, padding to 8, then
			// row 0's {position, size}.
			binary.LittleEndian.PutUint64(d[o+8:], 1<<40)
		}},
		{"null blob levels", "fullzip21", []string{"blobcol"}, func(d []byte, p *pageInfo) {
			o, _ := buf(p, 1)
			binary.LittleEndian.PutUint64(d[o+8:], 7<<16) // definition level 7 of 1
			binary.LittleEndian.PutUint64(d[o+16:], 0)
		}},
		{"nested fixed-size list validity size", "types21", []string{"ff"}, func(d []byte, p *pageInfo) {
			o, _ := buf(p, 1)
			// First chunk: level count, definition size, then the value buffer sizes:
			// the outer level's validity, the inner level's, the items.
			binary.LittleEndian.PutUint16(d[o+4:], 0)
		}},
		{"nested fixed-size list items size", "types22", []string{"fb"}, func(d []byte, p *pageInfo) {
			o, _ := buf(p, 1)
			// 2.2 large chunks: u32 sizes.
			binary.LittleEndian.PutUint32(d[o+16:], binary.LittleEndian.Uint32(d[o+16:])+8)
		}},
		{"map level count", "types22", []string{"m", "entries", "key"}, func(d []byte, p *pageInfo) {
			o, _ := buf(p, 1)
			binary.LittleEndian.PutUint32(d[o:], binary.LittleEndian.Uint32(d[o:])+3)
		}},
		{"map repetition index", "types22", []string{"mn", "entries", "value"}, func(d []byte, p *pageInfo) {
			o, _ := buf(p, len(p.bufs)-1)
			binary.LittleEndian.PutUint64(d[o:], binary.LittleEndian.Uint64(d[o:])+1)
		}},
		{"constant page levels", "nested21", []string{"allnull_list", "item"}, func(d []byte, p *pageInfo) {
			o, _ := buf(p, 0)
			binary.LittleEndian.PutUint16(d[o:], 0) // the first level no longer starts a row
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := bytes.Clone(files[tc.file])
			r := openBytes(t, data)
			tc.edit(data, pageOf(t, r, tc.field...))
			err := readEverything(t, data)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("err = %v, want ErrCorrupt", err)
			}
		})
	}
}

func TestRead21UnsupportedLayoutsAreNamed(t *testing.T) {
	data := seeds21(t)[0].data
	for _, tc := range []struct {
		layout *pb21.PageLayout
		name   string
	}{
		{&pb21.PageLayout{Layout: &pb21.PageLayout_SparseLayout{SparseLayout: &pb21.SparseLayout{}}}, "sparse layout"},
		{&pb21.PageLayout{Layout: &pb21.PageLayout_BlobLayout{BlobLayout: &pb21.BlobLayout{
			InnerLayout: &pb21.PageLayout{Layout: &pb21.PageLayout_SparseLayout{SparseLayout: &pb21.SparseLayout{}}},
			Layers:      []pb21.RepDefLayer{pb21.RepDefLayer_REPDEF_ALL_VALID_ITEM}}}}, "sparse layout"},
		{&pb21.PageLayout{Layout: &pb21.PageLayout_MiniBlockLayout{MiniBlockLayout: &pb21.MiniBlockLayout{
			ValueCompression: &pb21.CompressiveEncoding{Compression: &pb21.CompressiveEncoding_InlineBitpacking{
				InlineBitpacking: &pb21.InlineBitpacking{UncompressedBitsPerValue: 128}}},
			Layers: []pb21.RepDefLayer{pb21.RepDefLayer_REPDEF_ALL_VALID_ITEM}, NumBuffers: 1,
		}}}, "inline_bitpacking"},
	} {
		r := openBytes(t, data)
		id := r.Schema().Fields[0].ID
		p := &r.cols[r.colOf[id]].pages[0]
		if mb := tc.layout.GetMiniBlockLayout(); mb != nil {
			mb.NumItems = p.rows
		}
		p.lay.Store(tc.layout)
		_, err := r.Read(context.Background(), []int32{id}, 0, 1)
		if !errors.Is(err, ErrUnsupportedEncoding) || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// FuzzOpen21 feeds arbitrary bytes, starting from LanceDB's 2.1/2.2 files, to Open and
// to the page layout parsing of every column.
func FuzzOpen21(f *testing.F) {
	for _, s := range seeds21(f) {
		f.Add(s.data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Open(context.Background(), BytesSource(data), int64(len(data)))
		if err != nil {
			return
		}
		_ = r.Schema().Arrow()
		for c := range r.cols {
			for p := range r.cols[c].pages {
				_, _ = r.cols[c].pages[p].layout21()
			}
		}
	})
}

// FuzzRead21 patches bytes into a LanceDB 2.1/2.2 file (anywhere: page data, layouts,
// metadata) and decodes a row range and a take. Any outcome but a panic, a hang or an
// invalid Arrow array is fine.
func FuzzRead21(f *testing.F) {
	bases := seeds21(f)
	for i := range bases {
		n := len(bases[i].data)
		f.Add(uint8(i), uint32(0), []byte{}, uint16(0), uint16(1000))
		f.Add(uint8(i), uint32(n/3), []byte{0xff, 0xff, 0xff, 0x7f}, uint16(3), uint16(7))
		f.Add(uint8(i), uint32(n/2), []byte{0, 0, 0, 0, 0, 0, 0, 0}, uint16(1), uint16(100))
		f.Add(uint8(i), uint32(n/5), []byte{0x01}, uint16(2), uint16(3))
	}
	f.Fuzz(func(t *testing.T, which uint8, at uint32, patch []byte, start, n uint16) {
		base := bases[int(which)%len(bases)].data
		data := bytes.Clone(base)
		copy(data[int(at)%len(data):], patch)
		r, err := Open(context.Background(), BytesSource(data), int64(len(data)))
		if err != nil {
			return
		}
		r.maxDecode = 16 << 20
		ids := topIDs(r.Schema())
		rows := r.NumRows()
		s := min(uint64(start), rows)
		e := min(rows, s+uint64(n))
		if rec, err := r.Read(context.Background(), ids, s, e); err == nil {
			if err := validateRecord(rec); err != nil {
				t.Fatalf("Read produced an invalid array: %v", err)
			}
			rec.Release()
		}
		if rows > 0 {
			take := []uint64{s % rows, s % rows, (s + 1) % rows, rows - 1}
			if take[2] < take[1] {
				take = []uint64{take[0], take[1], rows - 1}
			}
			if rec, err := r.Take(context.Background(), ids, take); err == nil {
				if err := validateRecord(rec); err != nil {
					t.Fatalf("Take produced an invalid array: %v", err)
				}
				rec.Release()
			}
		}
	})
}

// TestRead21UnsupportedSchemasAreNamed: valid files whose schema lancectx does not model
// fail with ErrUnsupportedEncoding, not as corrupt.
func TestRead21UnsupportedSchemasAreNamed(t *testing.T) {
	base := seeds21(t)[0].data
	for _, tc := range []struct {
		name   string
		fields []*filepb.Field
		want   string
	}{
		{"blob v2", []*filepb.Field{
			{Name: "blob", Id: 0, ParentId: -1, LogicalType: "struct", Nullable: true, Metadata: map[string][]byte{"lance-encoding:blob": []byte("true")}},
			{Name: "kind", Id: -1, ParentId: -1, LogicalType: "uint8"},
		}, "blob v2 column"},
		{"map", []*filepb.Field{{Name: "m", Id: 0, ParentId: -1, LogicalType: "map"}}, "map"},
	} {
		data := rewriteDescriptor(t, base, &filepb.FileDescriptor{Schema: &filepb.Schema{Fields: tc.fields}, Length: 1})
		_, err := Open(context.Background(), BytesSource(data), int64(len(data)))
		if !errors.Is(err, ErrUnsupportedEncoding) || errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// TestRead21NullMapKeysAreCorrupt: a map whose levels say some keys or entries are null
// is corruption, not a panic: Arrow maps cannot hold them (arrow-go panics building
// one). The file is a list<struct<key, value>> with null keys and null entries written
// by the 2.1 writer, then relabelled a map in its schema.
func TestRead21NullMapKeysAreCorrupt(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		nullKeys, nullEntries bool
	}{
		{"null keys", true, false},
		{"null entries", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			entry := arrow.StructOf(
				arrow.Field{Name: "key", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
				arrow.Field{Name: "value", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
			)
			as := arrow.NewSchema([]arrow.Field{{Name: "m", Type: arrow.ListOfField(arrow.Field{Name: "entries", Type: entry, Nullable: tc.nullEntries}), Nullable: true}}, nil)
			s, err := schema.FromArrow(as)
			if err != nil {
				t.Fatal(err)
			}
			b := array.NewRecordBuilder(memory.DefaultAllocator, as)
			defer b.Release()
			lb := b.Field(0).(*array.ListBuilder)
			sb := lb.ValueBuilder().(*array.StructBuilder)
			for i := range 20 {
				lb.Append(true)
				for k := range 3 {
					if tc.nullEntries && (i+k)%5 == 0 {
						sb.AppendNull() // its members too
						continue
					}
					sb.Append(true)
					if tc.nullKeys && (i+k)%4 == 0 {
						sb.FieldBuilder(0).AppendNull()
					} else {
						sb.FieldBuilder(0).(*array.Int32Builder).Append(int32(k))
					}
					sb.FieldBuilder(1).(*array.Int32Builder).Append(int32(i))
				}
			}
			rec := b.NewRecordBatch()
			defer rec.Release()
			data, _ := writeFile(t, s, WriterOptions{Version: V2_1}, rec)
			fields, _ := s.ToProto()
			fields[0].LogicalType = "map"
			fields[1].Nullable, fields[2].Nullable = false, false
			data = rewriteDescriptor(t, data, &filepb.FileDescriptor{Schema: &filepb.Schema{Fields: fields}, Length: 20})
			r := openBytes(t, data)
			if _, ok := r.Schema().Fields[0].ArrowType().(*arrow.MapType); !ok {
				t.Fatalf("relabelled field reads as %s", r.Schema().Fields[0].ArrowType())
			}
			_, err = r.Read(context.Background(), topIDs(r.Schema()), 0, 20)
			if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "null") {
				t.Fatalf("err = %v, want ErrCorrupt naming the nulls", err)
			}
		})
	}
}
