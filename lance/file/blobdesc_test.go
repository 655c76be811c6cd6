package file

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lancectx/lancectx/lance/format/filepb"
	"github.com/lancectx/lancectx/lance/schema"
)

// TestBlobDescriptionsLocateTheValues: LanceDB's legacy blob column (fullzip21's
// blobcol) read as descriptions says, for every row, where the value the default read
// returns is in the file: same nulls, and the bytes at [position, position+size) are
// the value.
func TestBlobDescriptionsLocateTheValues(t *testing.T) {
	var data []byte
	for _, s := range seeds21(t) {
		if s.name == "fullzip21" {
			data = s.data
		}
	}
	if data == nil {
		t.Fatal("no fullzip21 seed")
	}
	r := openBytes(t, data)
	var blob *schema.Field
	for _, f := range r.Schema().Fields {
		if f.Name == "blobcol" {
			blob = f
		}
	}
	if blob == nil || !IsBlobV1(blob) {
		t.Fatalf("fullzip21 has no legacy blob column: %v", blob)
	}
	ctx := context.Background()
	n := r.NumRows()
	vals, err := r.Read(ctx, []int32{blob.ID}, 0, n)
	if err != nil {
		t.Fatal(err)
	}
	defer vals.Release()
	desc, err := r.ReadWith(ctx, []int32{blob.ID}, 0, n, ReadOptions{BlobDescriptions: true})
	if err != nil {
		t.Fatal(err)
	}
	defer desc.Release()
	if want := BlobDescriptionField(blob).Arrow(); !desc.Schema().Field(0).Equal(want) {
		t.Fatalf("description field %v, want %v", desc.Schema().Field(0), want)
	}
	v := vals.Column(0).(*array.LargeBinary)
	d := desc.Column(0).(*array.Struct)
	pos, size := d.Field(0).(*array.Uint64), d.Field(1).(*array.Uint64)
	nulls := 0
	for i := 0; i < int(n); i++ {
		if v.IsNull(i) != d.IsNull(i) {
			t.Fatalf("row %d: value null %v, description null %v", i, v.IsNull(i), d.IsNull(i))
		}
		if v.IsNull(i) {
			nulls++
			continue
		}
		p, s := pos.Value(i), size.Value(i)
		if s != uint64(len(v.Value(i))) || (s > 0 && !bytes.Equal(data[p:p+s], v.Value(i))) {
			t.Fatalf("row %d: description [%d,+%d) does not hold the %d-byte value", i, p, s, len(v.Value(i)))
		}
	}
	if nulls == 0 {
		t.Fatal("the seed has no null blob")
	}
	// A take describes the same rows.
	took, err := r.TakeWith(ctx, []int32{blob.ID}, []uint64{n - 1, n - 1}, ReadOptions{BlobDescriptions: true})
	if err != nil {
		t.Fatal(err)
	}
	defer took.Release()
	if got, want := took.Column(0).(*array.Struct).Field(0).(*array.Uint64).Value(1), pos.Value(int(n-1)); got != want {
		t.Fatalf("take of the last row: position %d, scan says %d", got, want)
	}
}

// TestBlobDescriptionsNeedTheBlobLayout: a blob field whose pages are plain binary (a
// writer that ignored lance-encoding:blob, as lancectx's own file writer does) still
// reads as its values, but has no descriptions: asking for them is ErrUnsupportedEncoding,
// not corruption.
func TestBlobDescriptionsNeedTheBlobLayout(t *testing.T) {
	sch, err := schema.FromArrow(arrow.NewSchema([]arrow.Field{{Name: "b", Type: arrow.BinaryTypes.LargeBinary, Nullable: true,
		Metadata: arrow.NewMetadata([]string{MetaBlob}, []string{"true"})}}, nil))
	if err != nil {
		t.Fatal(err)
	}
	bld := array.NewBinaryBuilder(memory.DefaultAllocator, arrow.BinaryTypes.LargeBinary)
	bld.AppendValues([][]byte{[]byte("abc"), nil, {}}, []bool{true, false, true})
	col := bld.NewArray()
	rec := array.NewRecordBatch(sch.Arrow(), []arrow.Array{col}, 3)
	var buf bytes.Buffer
	w, err := NewWriter(&buf, sch, WriterOptions{Version: V2_1})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r := openBytes(t, buf.Bytes())
	id := r.Schema().Fields[0].ID
	got, err := r.Read(context.Background(), []int32{id}, 0, 3)
	if err != nil {
		t.Fatal(err)
	}
	if v := got.Column(0).(*array.LargeBinary); string(v.Value(0)) != "abc" || !v.IsNull(1) {
		t.Fatalf("values: %v", v)
	}
	got.Release()
	_, err = r.ReadWith(context.Background(), []int32{id}, 0, 3, ReadOptions{BlobDescriptions: true})
	if !errors.Is(err, ErrUnsupportedEncoding) || errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "blob layout") {
		t.Fatalf("descriptions of plain pages: %v", err)
	}
}

// TestBlobV2MembersAreAdopted: a blob v2 column's descriptor members, listed by the file
// schema without ids, become the blob field's members; other field lists without ids
// are refused (corrupt, or unsupported when it is a descriptor lancectx does not know).
func TestBlobV2MembersAreAdopted(t *testing.T) {
	blob := func(members ...*filepb.Field) []*filepb.Field {
		return append([]*filepb.Field{
			{Name: "id", Id: 0, ParentId: -1, LogicalType: "int32"},
			{Name: "blob", Id: 1, ParentId: -1, LogicalType: "struct", Nullable: true,
				Metadata: map[string][]byte{MetaBlob: []byte("true"), metaPacked: []byte("true")}},
		}, members...)
	}
	m := func(name, logical string) *filepb.Field {
		return &filepb.Field{Name: name, Id: -1, ParentId: -1, LogicalType: logical}
	}
	good := blob(m("kind", "uint8"), m("position", "uint64"), m("size", "uint64"), m("blob_id", "uint32"), m("blob_uri", "string"))
	fields, ids, err := adoptBlobV2Members(good)
	if err != nil || len(ids) != 1 || ids[0] != 1 {
		t.Fatalf("adopt: %v %v", ids, err)
	}
	sch, err := schema.FromProto(fields, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := BlobDescriptionField(&schema.Field{ID: 1, Name: "blob", Nullable: true, Metadata: map[string]string{metaExtension: BlobV2Extension}})
	if got := sch.Fields[1].ArrowType(); !arrow.TypeEqual(got, want.ArrowType()) {
		t.Fatalf("adopted blob field is %s, want %s", got, want.ArrowType())
	}
	for _, tc := range []struct {
		name    string
		fields  []*filepb.Field
		corrupt bool
	}{
		{"four members", blob(m("kind", "uint8"), m("position", "uint64"), m("size", "uint64"), m("blob_id", "uint32")), false},
		{"renamed member", blob(m("kind", "uint8"), m("pos", "uint64"), m("size", "uint64"), m("blob_id", "uint32"), m("blob_uri", "string")), false},
		{"no blob before", append([]*filepb.Field{{Name: "x", Id: 0, ParentId: -1, LogicalType: "int32"}}, m("kind", "uint8")), true},
		{"first field", []*filepb.Field{m("kind", "uint8")}, true},
	} {
		_, _, err := adoptBlobV2Members(tc.fields)
		if tc.corrupt != errors.Is(err, ErrCorrupt) || !tc.corrupt && !errors.Is(err, ErrUnsupportedEncoding) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}

// FuzzBlobDescriptions patches bytes into LanceDB's 2.1/2.2 files and reads every field
// with ReadOptions.BlobDescriptions (a legacy blob column's pages then decode as
// descriptions). Any outcome but a panic or an invalid Arrow array is fine.
func FuzzBlobDescriptions(f *testing.F) {
	bases := seeds21(f)
	for i := range bases {
		n := len(bases[i].data)
		f.Add(uint8(i), uint32(0), []byte{})
		f.Add(uint8(i), uint32(n-200), []byte{0xff, 0xff, 0xff, 0x7f})
		f.Add(uint8(i), uint32(n/2), []byte{0, 0, 0, 0, 0, 0, 0, 0})
	}
	f.Fuzz(func(t *testing.T, which uint8, at uint32, patch []byte) {
		data := bytes.Clone(bases[int(which)%len(bases)].data)
		copy(data[int(at)%len(data):], patch)
		r, err := Open(context.Background(), BytesSource(data), int64(len(data)))
		if err != nil {
			return
		}
		r.maxDecode = 16 << 20
		ids := topIDs(r.Schema())
		n := r.NumRows()
		if rec, err := r.ReadWith(context.Background(), ids, 0, n, ReadOptions{BlobDescriptions: true}); err == nil {
			if err := validateRecord(rec); err != nil {
				t.Fatalf("ReadWith produced an invalid array: %v", err)
			}
			rec.Release()
		}
		if n > 1 {
			if rec, err := r.TakeWith(context.Background(), ids, []uint64{0, n - 1}, ReadOptions{BlobDescriptions: true}); err == nil {
				if err := validateRecord(rec); err != nil {
					t.Fatalf("TakeWith produced an invalid array: %v", err)
				}
				rec.Release()
			}
		}
	})
}
