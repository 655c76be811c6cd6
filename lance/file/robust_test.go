package file

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/protobuf/proto"

	pb "github.com/lancectx/lancectx/lance/format/encodingspb"
	"github.com/lancectx/lancectx/lance/format/file2pb"
	"github.com/lancectx/lancectx/lance/format/filepb"

	"github.com/lancectx/lancectx/lance/schema"
)

// smallFile is a valid file with every supported type, used as the base for mutations.
func smallFile(t testing.TB, rows int, pageBytes int) []byte {
	t.Helper()
	as := allTypesSchema()
	s, err := schema.FromArrow(as)
	if err != nil {
		t.Fatal(err)
	}
	g := &gen{rng: rand.New(rand.NewPCG(9, 9)), mem: memory.DefaultAllocator, nulls: 4}
	rec := g.record(as, rows)
	defer rec.Release()
	data, _ := writeFile(t, s, WriterOptions{PageBytes: pageBytes}, rec)
	return data
}

func setVersion(b []byte, major, minor uint16) []byte {
	c := bytes.Clone(b)
	binary.LittleEndian.PutUint16(c[len(c)-8:], major)
	binary.LittleEndian.PutUint16(c[len(c)-6:], minor)
	return c
}

func TestVersionHandling(t *testing.T) {
	base := smallFile(t, 20, 0)
	ctx := context.Background()
	for _, v := range [][2]uint16{{0, 3}, {2, 0}} {
		if _, err := Open(ctx, BytesSource(setVersion(base, v[0], v[1])), int64(len(base))); err != nil {
			t.Errorf("version %d.%d: %v", v[0], v[1], err)
		}
	}
	for _, tc := range []struct {
		v    [2]uint16
		want string
	}{
		{[2]uint16{2, 3}, "lance file: format version 2.3 is not supported (lancectx reads 2.0, 2.1 and 2.2)"},
		{[2]uint16{3, 0}, "lance file: format version 3.0 is not supported (lancectx reads 2.0, 2.1 and 2.2)"},
		{[2]uint16{0, 2}, "lance file: legacy format version 0.2 is not supported (lancectx reads 2.0, 2.1 and 2.2)"},
		{[2]uint16{0, 1}, "lance file: legacy format version 0.1 is not supported (lancectx reads 2.0, 2.1 and 2.2)"},
	} {
		_, err := Open(ctx, BytesSource(setVersion(base, tc.v[0], tc.v[1])), int64(len(base)))
		if !errors.Is(err, ErrUnsupportedVersion) {
			t.Errorf("version %v: err = %v, want ErrUnsupportedVersion", tc.v, err)
			continue
		}
		if err.Error() != tc.want {
			t.Errorf("version %v: message %q, want %q", tc.v, err, tc.want)
		}
	}
}

func TestCorruptInputIsAnError(t *testing.T) {
	base := smallFile(t, 50, 300)
	ctx := context.Background()
	// Every truncation.
	for n := 0; n < len(base); n += 1 + n/50 {
		if _, err := Open(ctx, BytesSource(base[:n]), int64(n)); err == nil {
			t.Fatalf("truncated to %d bytes: Open succeeded", n)
		}
	}
	// A lie about the size.
	if _, err := Open(ctx, BytesSource(base), int64(len(base))+10); err == nil {
		t.Fatal("wrong size accepted")
	}
	// Bad magic.
	bad := bytes.Clone(base)
	copy(bad[len(bad)-4:], "LANX")
	if _, err := Open(ctx, BytesSource(bad), int64(len(bad))); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("bad magic: %v", err)
	}
	var ce *CorruptionError
	if !errors.As(err0(Open(ctx, BytesSource(bad), int64(len(bad)))), &ce) || ce.Offset != int64(len(bad)-4) {
		t.Fatalf("corruption error does not locate the magic: %v", ce)
	}
	// Random single-byte and multi-byte damage: errors or (when the damage hits padding
	// or values) successful reads, never panics.
	rng := rand.New(rand.NewPCG(1, 1))
	for range 1000 {
		c := bytes.Clone(base)
		for range 1 + rng.IntN(4) {
			c[rng.IntN(len(c))] ^= byte(1 + rng.IntN(255))
		}
		r, err := Open(ctx, BytesSource(c), int64(len(c)))
		if err != nil {
			continue
		}
		r.maxDecode = 64 << 20
		_, _ = r.Read(ctx, topIDs(r.Schema()), 0, r.NumRows())
		_, _ = r.Take(ctx, topIDs(r.Schema()), []uint64{0, r.NumRows() / 2, r.NumRows() - 1})
	}
}

func err0(_ *Reader, err error) error { return err }

func TestUnsupportedEncodingsAreNamed(t *testing.T) {
	base := smallFile(t, 10, 0)
	for _, tc := range []struct {
		field string
		enc   *pb.ArrayEncoding
		name  string
	}{
		{"i32", encNoNulls(&pb.ArrayEncoding{ArrayEncoding: &pb.ArrayEncoding_Bitpacked{Bitpacked: &pb.Bitpacked{CompressedBitsPerValue: 3, UncompressedBitsPerValue: 32}}}), "bitpacked"},
		{"s", &pb.ArrayEncoding{ArrayEncoding: &pb.ArrayEncoding_Fsst{Fsst: &pb.Fsst{}}}, "fsst"},
		{"i64", encNoNulls(&pb.ArrayEncoding{ArrayEncoding: &pb.ArrayEncoding_Flat{Flat: &pb.Flat{BitsPerValue: 64, Buffer: &pb.Buffer{}, Compression: &pb.Compression{Scheme: "zstd"}}}}), "zstd"},
		{"f32", encNoNulls(&pb.ArrayEncoding{ArrayEncoding: &pb.ArrayEncoding_Rle{Rle: &pb.Rle{BitsPerValue: 32}}}), "rle"},
	} {
		r := openBytes(t, base)
		id := r.Schema().Field(tc.field).ID
		r.cols[r.colOf[id]].pages[0].enc.Store(tc.enc)
		_, err := r.Read(context.Background(), []int32{id}, 0, 10)
		if !errors.Is(err, ErrUnsupportedEncoding) || !strings.Contains(err.Error(), tc.name) {
			t.Errorf("%s page: %v", tc.name, err)
		}
	}
}

// rewriteDescriptor replaces the FileDescriptor of a file written by Writer, keeping
// its pages and column metadata: a way to build files our writer never produces.
func rewriteDescriptor(t testing.TB, file []byte, fd *filepb.FileDescriptor, editColumns ...func(i int, cm *file2pb.ColumnMetadata)) []byte {
	t.Helper()
	ft, err := parseFooter(file[len(file)-footerSize:], 0)
	if err != nil {
		t.Fatal(err)
	}
	gb0 := binary.LittleEndian.Uint64(file[ft.gboTableStart:])
	var metas [][]byte
	for i := 0; i < int(ft.numColumns); i++ {
		p := binary.LittleEndian.Uint64(file[ft.cmoTableStart+16*uint64(i):])
		l := binary.LittleEndian.Uint64(file[ft.cmoTableStart+16*uint64(i)+8:])
		m := file[p : p+l]
		if len(editColumns) > 0 {
			var cm file2pb.ColumnMetadata
			if err := proto.Unmarshal(m, &cm); err != nil {
				t.Fatal(err)
			}
			for _, e := range editColumns {
				e(i, &cm)
			}
			if m, err = proto.Marshal(&cm); err != nil {
				t.Fatal(err)
			}
		}
		metas = append(metas, m)
	}
	out := bytes.Clone(file[:gb0])
	fdb, err := proto.Marshal(fd)
	if err != nil {
		t.Fatal(err)
	}
	gbo := [][2]uint64{{uint64(len(out)), uint64(len(fdb))}}
	out = append(out, fdb...)
	metaStart := uint64(len(out))
	var cmo [][2]uint64
	for _, m := range metas {
		cmo = append(cmo, [2]uint64{uint64(len(out)), uint64(len(m))})
		out = append(out, m...)
	}
	cmoStart := uint64(len(out))
	out = append(out, offsetTable(cmo)...)
	gboStart := uint64(len(out))
	out = append(out, offsetTable(gbo)...)
	f2 := footer{columnMetaStart: metaStart, cmoTableStart: cmoStart, gboTableStart: gboStart,
		numGlobalBuffers: 1, numColumns: ft.numColumns, major: ft.major, minor: ft.minor}
	return append(out, f2.marshal()...)
}

func TestEarlyBinaryAsListLayout(t *testing.T) {
	// Early 2.0 writers stored strings as list<u8>: an offsets column and a bytes column.
	lt := arrow.ListOfField(arrow.Field{Name: "item", Type: arrow.PrimitiveTypes.Uint8})
	as := arrow.NewSchema([]arrow.Field{{Name: "s", Type: lt, Nullable: true}}, nil)
	s, _ := schema.FromArrow(as)
	lb := array.NewListBuilderWithField(memory.DefaultAllocator, arrow.Field{Name: "item", Type: arrow.PrimitiveTypes.Uint8})
	vb := lb.ValueBuilder().(*array.Uint8Builder)
	vals := []*string{ptr("héllo"), nil, ptr(""), ptr("world"), nil, ptr("ß")}
	for _, v := range vals {
		if v == nil {
			lb.AppendNull()
			continue
		}
		lb.Append(true)
		vb.AppendValues([]byte(*v), nil)
	}
	arr := lb.NewArray()
	rec := array.NewRecordBatch(as, []arrow.Array{arr}, int64(arr.Len()))
	file, _ := writeFile(t, s, WriterOptions{}, rec)
	for _, lt := range []string{"string", "large_string", "binary"} {
		patched := rewriteDescriptor(t, file, &filepb.FileDescriptor{
			Schema: &filepb.Schema{Fields: []*filepb.Field{{Name: "s", Id: 0, ParentId: -1, LogicalType: lt, Nullable: true}}},
			Length: uint64(len(vals)),
		})
		r := openBytes(t, patched)
		got, err := r.Read(context.Background(), []int32{0}, 0, uint64(len(vals)))
		if err != nil {
			t.Fatalf("%s: %v", lt, err)
		}
		for i, v := range vals {
			c := canonValue(got.Column(0), i)
			switch {
			case v == nil && c != nil:
				t.Errorf("%s row %d: %v, want null", lt, i, c)
			case v != nil && lt != "binary" && c != *v:
				t.Errorf("%s row %d: %v, want %q", lt, i, c, *v)
			case v != nil && lt == "binary" && c != base64.StdEncoding.EncodeToString([]byte(*v)):
				t.Errorf("%s row %d: %v, want %q", lt, i, c, *v)
			}
		}
		got.Release()
	}
}

func ptr[T any](v T) *T { return &v }

func TestHugeRowCountsNeedNoMemory(t *testing.T) {
	// A corrupt (or absurd) file claims 2^36 rows in one all-null page: a full read is
	// refused by the decode budget instead of allocating half a terabyte.
	as := arrow.NewSchema([]arrow.Field{
		{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
	s, _ := schema.FromArrow(as)
	arr := array.MakeArrayOfNull(memory.DefaultAllocator, arrow.PrimitiveTypes.Int64, 10)
	rec := array.NewRecordBatch(as, []arrow.Array{arr}, 10)
	file, _ := writeFile(t, s, WriterOptions{}, rec)
	const huge = 1 << 36
	fields, md := s.ToProto()
	patched := rewriteDescriptor(t, file, &filepb.FileDescriptor{Schema: &filepb.Schema{Fields: fields, Metadata: md}, Length: huge},
		func(_ int, cm *file2pb.ColumnMetadata) { cm.Pages[0].Length = huge })
	r := openBytes(t, patched)
	if r.NumRows() != huge {
		t.Fatalf("%d rows", r.NumRows())
	}
	if _, err := r.Read(context.Background(), []int32{0}, 0, huge); !errors.Is(err, ErrReadTooLarge) {
		t.Fatalf("huge read: %v", err)
	}
	rec2, err := r.Read(context.Background(), []int32{0}, huge-10, huge)
	if err != nil || rec2.NumRows() != 10 || rec2.Column(0).NullN() != 10 {
		t.Fatalf("small read of a huge file: %v", err)
	}
	rec2.Release()
}
