package lance

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lancectx/lancectx/lance/file"
	"github.com/lancectx/lancectx/lance/format/tablepb"
	"github.com/lancectx/lancectx/lance/schema"
	"github.com/lancectx/lancectx/objstore"
)

// descriptors builds a blob v2 descriptor column; a nil entry is a null.
func descriptors(t *testing.T, rows []*[5]any) arrow.Array {
	t.Helper()
	f := &schema.Field{ID: 1, Name: "blob", Nullable: true, Metadata: map[string]string{"ARROW:extension:name": file.BlobV2Extension}}
	typ := file.BlobDescriptionField(f).ArrowType().(*arrow.StructType)
	b := array.NewStructBuilder(memory.DefaultAllocator, typ)
	defer b.Release()
	for _, r := range rows {
		if r == nil {
			b.AppendNull()
			continue
		}
		b.Append(true)
		b.FieldBuilder(0).(*array.Uint8Builder).Append(r[0].(uint8))
		b.FieldBuilder(1).(*array.Uint64Builder).Append(r[1].(uint64))
		b.FieldBuilder(2).(*array.Uint64Builder).Append(r[2].(uint64))
		b.FieldBuilder(3).(*array.Uint32Builder).Append(r[3].(uint32))
		b.FieldBuilder(4).(*array.StringBuilder).Append(r[4].(string))
	}
	return b.NewArray()
}

// TestBlobV2Descriptors resolves hand-made descriptors of every kind against a store
// holding a data file and a sidecar: the bytes of inline, packed and dedicated values,
// nulls as nulls; an external URI (which LanceDB 0.31 writes only for registered base
// paths, so no interop table has one) is returned as the URI of the table's struct
// {data, uri} but is ErrUnsupported when its bytes are asked for, as is an unknown
// kind; a value outside its file is corrupt.
func TestBlobV2Descriptors(t *testing.T) {
	ctx := context.Background()
	st := objstore.NewMem()
	df := &tablepb.DataFile{Path: "abc.lance"}
	data := []byte("0123456789inline-value")
	if err := objstore.PutBytes(ctx, st, "data/abc.lance", data); err != nil {
		t.Fatal(err)
	}
	// Sidecar 3 (32 bits, least significant first: 11000...).
	side := "data/abc/" + "11" + strings.Repeat("0", 30) + ".blob"
	if got := blobSidecarKey("abc.lance", 3); got != side {
		t.Fatalf("sidecar key %s, want %s", got, side)
	}
	if err := objstore.PutBytes(ctx, st, side, []byte("packed-one|packed-two")); err != nil {
		t.Fatal(err)
	}
	rows := []*[5]any{
		{uint8(file.BlobInline), uint64(10), uint64(12), uint32(0), ""},
		nil,
		{uint8(file.BlobPacked), uint64(11), uint64(10), uint32(3), ""},
		{uint8(file.BlobDedicated), uint64(0), uint64(21), uint32(3), ""},
		{uint8(file.BlobInline), uint64(0), uint64(0), uint32(0), ""},
	}
	bytesField := &schema.Field{ID: 1, Name: "blob", Type: arrow.BinaryTypes.LargeBinary, Nullable: true}
	col := descriptors(t, rows)
	defer col.Release()
	got, err := blobV2Column(ctx, st, df, int64(len(data)), col, bytesField)
	if err != nil {
		t.Fatal(err)
	}
	v := got.(*array.LargeBinary)
	want := []string{"inline-value", "", "packed-two", "packed-one|packed-two", ""}
	for i, w := range want {
		if v.IsNull(i) != (rows[i] == nil) || string(v.Value(i)) != w {
			t.Fatalf("row %d: %q (null %v), want %q", i, v.Value(i), v.IsNull(i), w)
		}
	}
	got.Release()

	// Descriptions: every row valid, LanceDB's zeros for the null.
	desc := file.BlobDescriptionField(&schema.Field{ID: 1, Name: "blob", Nullable: true, Metadata: map[string]string{"ARROW:extension:name": file.BlobV2Extension}})
	got, err = blobV2Column(ctx, st, df, int64(len(data)), col, desc)
	if err != nil {
		t.Fatal(err)
	}
	if got.NullN() != 0 || got.(*array.Struct).Field(2).(*array.Uint64).Value(1) != 0 {
		t.Fatalf("descriptions: %v", got)
	}
	got.Release()

	ext := descriptors(t, []*[5]any{{uint8(file.BlobExternal), uint64(0), uint64(0), uint32(0), "s3://bucket/x.mp4"}})
	defer ext.Release()
	if _, err := blobV2Column(ctx, st, df, int64(len(data)), ext, bytesField); !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "s3://bucket/x.mp4") {
		t.Fatalf("bytes of an external blob: %v", err)
	}
	logical := &schema.Field{ID: 1, Name: "blob", Type: arrow.StructOf(), Nullable: true,
		Metadata: map[string]string{"ARROW:extension:name": file.BlobV2Extension}, Children: []*schema.Field{
			{ID: 2, Name: "data", Type: arrow.BinaryTypes.LargeBinary, Nullable: true},
			{ID: 3, Name: "uri", Type: arrow.BinaryTypes.String, Nullable: true},
		}}
	got, err = blobV2Column(ctx, st, df, int64(len(data)), ext, logical)
	if err != nil {
		t.Fatal(err)
	}
	if s := got.(*array.Struct); !s.Field(0).IsNull(0) || s.Field(1).(*array.String).Value(0) != "s3://bucket/x.mp4" {
		t.Fatalf("external blob as {data, uri}: %v", got)
	}
	got.Release()
	locs, err := blobFiles(st, df, int64(len(data)), ext, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := locs[0].Read(ctx); !errors.Is(err, ErrUnsupported) || locs[0].URI != "s3://bucket/x.mp4" {
		t.Fatalf("BlobFile of an external blob: %v %q", err, locs[0].URI)
	}

	for name, r := range map[string]*[5]any{
		"unknown kind":         {uint8(9), uint64(0), uint64(1), uint32(0), ""},
		"inline past the file": {uint8(file.BlobInline), uint64(20), uint64(5), uint32(0), ""},
		"packed past the file": {uint8(file.BlobPacked), uint64(20), uint64(5), uint32(3), ""},
		"missing sidecar":      {uint8(file.BlobDedicated), uint64(0), uint64(5), uint32(4), ""},
		"size overflows":       {uint8(file.BlobPacked), uint64(1), ^uint64(0), uint32(3), ""},
	} {
		bad := descriptors(t, []*[5]any{r})
		_, err := blobV2Column(ctx, st, df, int64(len(data)), bad, bytesField)
		bad.Release()
		switch {
		case name == "unknown kind" && errors.Is(err, ErrUnsupported):
		case name == "missing sidecar" && errors.Is(err, objstore.ErrNotFound):
		case errors.Is(err, ErrCorrupt):
		default:
			t.Errorf("%s: %v", name, err)
		}
	}
}
