package file

import (
	"encoding/binary"
	"fmt"
	"maps"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lancectx/lancectx/lance/format/filepb"
	"github.com/lancectx/lancectx/lance/schema"
)

// Blob columns come in two generations, and Lance's scans return neither one's bytes by
// default but where the bytes are, a description per value:
//
//   - Legacy blobs (2.1, a binary field with lance-encoding:blob): the page is a blob
//     layout whose descriptions {position, size} locate each value in the data file.
//     Read with ReadOptions.BlobDescriptions they come out as that struct, otherwise as
//     the values (the field's own type).
//   - Blob v2 (2.2, a struct{data, uri} field with the extension type lance.blob.v2 in
//     the table schema): the data file stores only the descriptor struct {kind,
//     position, size, blob_id, blob_uri}, a packed struct whose members the file schema
//     lists with id -1. The reader gives those members ids and reads the descriptors;
//     where the bytes are (this data file, a sidecar file next to it, an external URI)
//     is for the dataset layer to resolve.

// Field metadata keys and values of blob columns.
const (
	// MetaBlob marks a blob field (lance-encoding:blob).
	MetaBlob = "lance-encoding:blob"
	// metaExtension is Arrow's extension type name key.
	metaExtension = "ARROW:extension:name"
	// BlobV2Extension is the extension type name of blob v2 fields.
	BlobV2Extension = "lance.blob.v2"
)

// Blob v2 descriptor kinds (the kind member): where a value's bytes are.
const (
	// BlobInline: in the data file, at position, size bytes.
	BlobInline = 0
	// BlobPacked: in the sidecar file blob_id shared with other values, at position.
	BlobPacked = 1
	// BlobDedicated: the whole sidecar file blob_id.
	BlobDedicated = 2
	// BlobExternal: at blob_uri (a byte range of it when size is non-zero).
	BlobExternal = 3
)

// IsBlobV1 reports whether f is a legacy blob field: a binary field carrying
// lance-encoding:blob (whose value Lance does not look at).
func IsBlobV1(f *schema.Field) bool {
	if _, ok := f.Metadata[MetaBlob]; !ok {
		return false
	}
	switch f.Type.ID() {
	case arrow.BINARY, arrow.LARGE_BINARY:
		return true
	}
	return false
}

// IsBlobV2 reports whether f is a blob v2 field as a table schema declares it (extension
// type lance.blob.v2).
func IsBlobV2(f *schema.Field) bool { return f.Metadata[metaExtension] == BlobV2Extension }

// BlobDescriptionField returns the field a Lance scan returns for blob field f unless
// asked for the bytes (Lance's default blob handling), with f's id, name and
// nullability, or nil when f is no blob field:
//
//	legacy:  struct<position: uint64, size: uint64> with f's metadata
//	blob v2: struct<kind: uint8 not null, position: uint64 not null, size: uint64 not null,
//	         blob_id: uint32 not null, blob_uri: utf8 not null> with lance-encoding:blob
//	         and lance-encoding:packed
//
// (exactly what LanceDB 0.31's queries answer, metadata included). The members have id -1.
func BlobDescriptionField(f *schema.Field) *schema.Field {
	member := func(name string, t arrow.DataType, nullable bool) *schema.Field {
		return &schema.Field{ID: -1, Name: name, Type: t, Nullable: nullable}
	}
	switch {
	case IsBlobV1(f):
		return &schema.Field{ID: f.ID, Name: f.Name, Type: arrow.StructOf(), Nullable: f.Nullable,
			Metadata: maps.Clone(f.Metadata), Children: []*schema.Field{
				member("position", arrow.PrimitiveTypes.Uint64, true),
				member("size", arrow.PrimitiveTypes.Uint64, true),
			}}
	case IsBlobV2(f):
		return &schema.Field{ID: f.ID, Name: f.Name, Type: arrow.StructOf(), Nullable: f.Nullable,
			Metadata: map[string]string{MetaBlob: "true", metaPacked: "true"}, Children: []*schema.Field{
				member("kind", arrow.PrimitiveTypes.Uint8, false),
				member("position", arrow.PrimitiveTypes.Uint64, false),
				member("size", arrow.PrimitiveTypes.Uint64, false),
				member("blob_id", arrow.PrimitiveTypes.Uint32, false),
				member("blob_uri", arrow.BinaryTypes.String, false),
			}}
	}
	return nil
}

// blobV1Leaf is the field a legacy blob leaf decodes as in description mode: its
// description struct, packed so that it stays one leaf over the blob's column.
func blobV1Leaf(f *schema.Field) *schema.Field {
	d := BlobDescriptionField(f)
	d.Metadata = map[string]string{metaPacked: "true"}
	return d
}

// blobDescriptions returns fields with every legacy blob field (at any depth) replaced by
// its description leaf (to decode), and the Arrow fields of the result (the leaves as
// BlobDescriptionField says). Fields without blobs are returned as they are.
func blobDescriptions(fields []*schema.Field) ([]*schema.Field, []arrow.Field) {
	var swap func(f *schema.Field, leaf func(*schema.Field) *schema.Field) *schema.Field
	swap = func(f *schema.Field, leaf func(*schema.Field) *schema.Field) *schema.Field {
		if IsBlobV1(f) {
			return leaf(f)
		}
		var kids []*schema.Field
		for i, c := range f.Children {
			if s := swap(c, leaf); s != c {
				if kids == nil {
					kids = append([]*schema.Field(nil), f.Children...)
				}
				kids[i] = s
			}
		}
		if kids == nil {
			return f
		}
		g := *f
		g.Children = kids
		return &g
	}
	dec := make([]*schema.Field, len(fields))
	out := make([]arrow.Field, len(fields))
	for i, f := range fields {
		dec[i] = swap(f, blobV1Leaf)
		out[i] = swap(f, BlobDescriptionField).Arrow()
	}
	return dec, out
}

// checkBlobLayouts checks that the legacy blob fields in fields (at any depth) store
// every page in the blob layout: a value stored otherwise (by a writer that ignored the
// blob metadata) has no position to describe.
func (r *Reader) checkBlobLayouts(fields []*schema.Field) error {
	var err error
	for _, f := range fields {
		f.Walk(func(c *schema.Field) bool {
			if err != nil || !IsBlobV1(c) {
				return err == nil
			}
			col, ok := r.colOf[c.ID]
			if !ok {
				return true
			}
			for i := range r.cols[col].pages {
				lay, lerr := r.cols[col].pages[i].layout21()
				if lerr != nil {
					err = lerr
					return false
				}
				if lay.GetBlobLayout() == nil {
					err = fmt.Errorf("%w: blob field %q has a page without the blob layout (written by a writer that ignored lance-encoding:blob): its values have no descriptions", ErrUnsupportedEncoding, c.Name)
					return false
				}
			}
			return true
		})
	}
	return err
}

// blobV2Members are the descriptor members of a blob v2 column as data files list them,
// in order, with their logical types.
var blobV2Members = [...]struct{ name, logical string }{
	{"kind", "uint8"}, {"position", "uint64"}, {"size", "uint64"}, {"blob_id", "uint32"}, {"blob_uri", "string"},
}

// adoptBlobV2Members rewrites a file schema whose blob v2 columns list their descriptor
// members as fields with id -1 (and parent -1) right after the blob field: the members
// become the blob field's children with ids past every id of the file, so the blob
// field reads as the packed descriptor struct it is. Anything else with a negative id,
// or a descriptor other than the five members Lance writes, is refused by name.
func adoptBlobV2Members(fields []*filepb.Field) ([]*filepb.Field, []int32, error) {
	next := int32(0)
	neg := false
	for _, f := range fields {
		next = max(next, f.GetId()+1)
		neg = neg || f.GetId() < 0
	}
	if !neg {
		return fields, nil, nil
	}
	var blobs []int32
	out := make([]*filepb.Field, 0, len(fields))
	for i := 0; i < len(fields); i++ {
		f := fields[i]
		if f.GetId() < 0 {
			return nil, nil, corruptf(-1, "file schema field %q has id %d", f.GetName(), f.GetId())
		}
		out = append(out, f)
		if i+1 >= len(fields) || fields[i+1].GetId() >= 0 {
			continue
		}
		if _, ok := f.GetMetadata()[MetaBlob]; !ok || f.GetLogicalType() != "struct" {
			return nil, nil, corruptf(-1, "file schema field %q is followed by fields without ids", f.GetName())
		}
		j := i + 1
		for j < len(fields) && fields[j].GetId() < 0 {
			j++
		}
		members := fields[i+1 : j]
		if len(members) != len(blobV2Members) {
			return nil, nil, fmt.Errorf("%w: blob v2 column %q with %d descriptor members (want %d)", ErrUnsupportedEncoding, f.GetName(), len(members), len(blobV2Members))
		}
		for k, m := range members {
			if want := blobV2Members[k]; m.GetName() != want.name || m.GetLogicalType() != want.logical || m.GetParentId() != -1 {
				return nil, nil, fmt.Errorf("%w: blob v2 column %q: descriptor member %d is %q %s (want %s %s)", ErrUnsupportedEncoding, f.GetName(), k, m.GetName(), m.GetLogicalType(), want.name, want.logical)
			}
			c := &filepb.Field{Name: m.GetName(), Id: next, ParentId: f.GetId(), LogicalType: m.GetLogicalType(), Nullable: m.GetNullable(), Metadata: m.GetMetadata()}
			next++
			out = append(out, c)
		}
		blobs = append(blobs, f.GetId())
		i = j - 1
	}
	return out, blobs, nil
}

// wrapBlobV2 prepares the decoding of the blob v2 fields ids. Lance encodes a blob v2
// value as the descriptor struct nested in the blob field: the column's pages carry two
// layers, the descriptor's (all valid) inside the blob's (nullable). The blob field
// decodes through a wrapper with that shape, the descriptor its one member over the
// same column, and unwrapBlobV2 turns the result back into the descriptors with the
// blob's validity.
func (r *Reader) wrapBlobV2(ids []int32) error {
	if len(ids) == 0 {
		return nil
	}
	next := r.schema.MaxID() + 1
	r.blobV2 = make(map[int32]*schema.Field, len(ids))
	for _, id := range ids {
		f, ok := r.top[id]
		if !ok {
			return fmt.Errorf("%w: blob v2 field %d inside another field", ErrUnsupportedEncoding, id)
		}
		desc := f.Clone()
		desc.ID, desc.Nullable = next, false
		next++
		r.colOf[desc.ID] = r.colOf[f.ID]
		r.blobV2[id] = &schema.Field{ID: f.ID, Name: f.Name, Type: arrow.StructOf(), Nullable: f.Nullable, Children: []*schema.Field{desc}}
	}
	return nil
}

// unwrapBlobV2 turns the decoded wrapper of a blob v2 field into its descriptors.
func unwrapBlobV2(d arrow.ArrayData) (arrow.ArrayData, error) {
	defer d.Release()
	if len(d.Children()) != 1 || d.Offset() != 0 {
		return nil, corruptf(-1, "blob v2 wrapper with %d members", len(d.Children()))
	}
	desc := d.Children()[0]
	if desc.Len() != d.Len() || desc.NullN() != 0 {
		return nil, corruptf(-1, "blob v2 column: %d descriptors (%d null) for %d values", desc.Len(), desc.NullN(), d.Len())
	}
	return array.NewData(desc.DataType(), d.Len(), []*memory.Buffer{d.Buffers()[0]}, desc.Children(), d.NullN(), desc.Offset()), nil
}

// readBlobDescriptions appends the descriptions of a legacy blob page's rows to the
// packed sink of a description leaf: no byte of the values is read.
func (l *leaf21) readBlobDescriptions(ps *packedSink, pos, size []byte, def []uint16, n int) error {
	if len(ps.kids) != 2 {
		return corruptf(-1, "blob descriptions into a struct of %d members", len(ps.kids))
	}
	var kids [2]*fixedSink
	for i, k := range ps.kids {
		fk, ok := k.(*fixedSink)
		if !ok || fk.width != 8 {
			return corruptf(-1, "blob descriptions into a %s member", ps.typ.Field(i).Type)
		}
		kids[i] = fk
	}
	for i, v := range [2][]byte{pos, size} {
		if err := kids[i].charge(n); err != nil {
			return err
		}
		for r := range n {
			x := binary.LittleEndian.Uint64(v[8*r:])
			if def[r] != 0 {
				x = 0 // a null's levels are smuggled in its position
			}
			kids[i].values = binary.LittleEndian.AppendUint64(kids[i].values, x)
		}
		kids[i].n += n
	}
	ps.n += n
	return nil
}
