package lance

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lancectx/lancectx/lance/file"
	"github.com/lancectx/lancectx/lance/format/tablepb"
	"github.com/lancectx/lancectx/lance/schema"
	"github.com/lancectx/lancectx/objstore"
)

// Blob columns (see package file): legacy blobs (2.1, binary with lance-encoding:blob)
// and blob v2 (2.2, struct{data, uri} with the extension type lance.blob.v2). As Lance's
// scans do by default, a scan or take returns a blob column as descriptions of where
// each value is (file.BlobDescriptionField), not the bytes; ScanOptions.BlobBytes reads
// the bytes instead, and TakeBlobs locates the values of some rows for reading on demand
// (Lance's take_blobs).
//
// Where a blob v2 value is depends on its descriptor's kind: in the data file itself
// (inline), in a sidecar file next to it shared by several values (packed) or holding it
// alone (dedicated), or at an external URI. Sidecars live in a directory named after the
// data file without ".lance", one per blob_id, named by the 32 bits of the id written
// least significant first as binary digits, with the suffix ".blob" (what LanceDB 0.31
// writes: blob_id 1 is data/<file>/10000000000000000000000000000000.blob). lancectx
// reads no external URI (ErrUnsupported).

// scanField returns the field a scan outputs for table field f: f itself, or for a blob
// field its description, or with bytes its values as large_binary (legacy blobs keep
// their own type).
func scanField(f *schema.Field, bytes bool) *schema.Field {
	switch {
	case file.IsBlobV1(f):
		if bytes {
			return f
		}
		return file.BlobDescriptionField(f)
	case file.IsBlobV2(f):
		if bytes {
			return &schema.Field{ID: f.ID, Name: f.Name, Type: arrow.BinaryTypes.LargeBinary, Nullable: f.Nullable,
				Metadata: map[string]string{file.MetaBlob: "true"}}
		}
		return file.BlobDescriptionField(f)
	}
	return f
}

// checkNoBlobColumns refuses to write data files for a schema with blob columns:
// lancectx's writers would store their values as plain binary pages, which LanceDB 0.31
// does not read as a blob column (its scans fail: "there were more fields in the schema
// than provided column indices / infos") and lancectx cannot describe. Writing the blob
// layout is not implemented.
func checkNoBlobColumns(sch *schema.Schema) error {
	var blob *schema.Field
	sch.Walk(func(f *schema.Field) bool {
		if blob == nil && isBlobField(f) {
			blob = f
		}
		return blob == nil
	})
	if blob != nil {
		return fmt.Errorf("%w: writing blob column %q (lancectx does not write the blob layout)", ErrUnsupported, blob.Name)
	}
	return nil
}

// isBlobField reports whether f is a blob column of either generation.
func isBlobField(f *schema.Field) bool { return file.IsBlobV1(f) || file.IsBlobV2(f) }

// blobV2Column turns the descriptors of a blob v2 column read from data file df (of
// size bytes) into what want asks for: the descriptors as Lance's scans return them
// (every row valid, a null one all zeros), the values (a binary field), or the table's
// struct{data, uri}.
func blobV2Column(ctx context.Context, st objstore.Reader, df *tablepb.DataFile, size int64, col arrow.Array, want *schema.Field) (arrow.Array, error) {
	desc, ok := col.(*array.Struct)
	if !ok || desc.NumField() != 5 {
		return nil, corruptf(dataDir, "blob v2 column %q read as %s", want.Name, col.DataType())
	}
	switch {
	case want.Type.ID() == arrow.STRUCT && want.Metadata[file.MetaBlob] != "":
		// LanceDB 0.31 answers a null blob with a valid all-zero descriptor.
		d := desc.Data()
		if !arrow.TypeEqual(d.DataType(), want.ArrowType()) {
			return nil, fmt.Errorf("%w: blob v2 column %q has descriptors %s", ErrUnsupported, want.Name, d.DataType())
		}
		out := array.NewData(d.DataType(), d.Len(), []*memory.Buffer{nil}, d.Children(), 0, d.Offset())
		defer out.Release()
		return array.MakeFromData(out), nil
	case want.Type.ID() == arrow.BINARY || want.Type.ID() == arrow.LARGE_BINARY:
		refs, err := blobV2Refs(st, df, size, desc)
		if err != nil {
			return nil, fmt.Errorf("blob column %q: %w", want.Name, err)
		}
		return fetchBlobs(ctx, st, refs, want.Type)
	case file.IsBlobV2(want) && len(want.Children) == 2:
		refs, err := blobV2Refs(st, df, size, desc)
		if err != nil {
			return nil, fmt.Errorf("blob column %q: %w", want.Name, err)
		}
		// The value as it was written: bytes, or the external URI.
		uris := array.NewStringBuilder(memory.DefaultAllocator)
		defer uris.Release()
		for i := range refs {
			if refs[i].uri != "" {
				uris.Append(refs[i].uri)
				refs[i] = blobRef{}
			} else {
				uris.AppendNull()
			}
		}
		data, err := fetchBlobs(ctx, st, refs, want.Children[0].ArrowType())
		if err != nil {
			return nil, fmt.Errorf("blob column %q: %w", want.Name, err)
		}
		defer data.Release()
		u := uris.NewArray()
		defer u.Release()
		if !arrow.TypeEqual(u.DataType(), want.Children[1].ArrowType()) {
			return nil, fmt.Errorf("%w: blob v2 column %q with uri of type %s", ErrUnsupported, want.Name, want.Children[1].ArrowType())
		}
		d := desc.Data()
		out := array.NewData(want.ArrowType(), d.Len(), []*memory.Buffer{d.Buffers()[0]}, []arrow.ArrayData{data.Data(), u.Data()}, d.NullN(), d.Offset())
		defer out.Release()
		return array.MakeFromData(out), nil
	}
	return nil, fmt.Errorf("%w: blob v2 column %q read as %s", ErrUnsupported, want.Name, want.ArrowType())
}

// blobRef locates one blob value: size bytes at off in object key, or an external uri.
// The zero value is a null.
type blobRef struct {
	valid bool
	key   string
	uri   string
	off   uint64
	size  uint64
}

// blobV2Refs locates the values a blob v2 column's descriptors describe.
func blobV2Refs(st objstore.Reader, df *tablepb.DataFile, size int64, desc *array.Struct) ([]blobRef, error) {
	kind, ok1 := desc.Field(0).(*array.Uint8)
	pos, ok2 := desc.Field(1).(*array.Uint64)
	sz, ok3 := desc.Field(2).(*array.Uint64)
	id, ok4 := desc.Field(3).(*array.Uint32)
	uri, ok5 := desc.Field(4).(*array.String)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 {
		return nil, corruptf(dataDir, "blob v2 descriptors of type %s", desc.DataType())
	}
	refs := make([]blobRef, desc.Len())
	for i := range refs {
		if desc.IsNull(i) {
			continue
		}
		r := blobRef{valid: true, off: pos.Value(i), size: sz.Value(i)}
		if r.size > math.MaxUint64-r.off {
			return nil, corruptf(dataDir+df.GetPath(), "blob [%d,+%d) overflows", r.off, r.size)
		}
		switch k := kind.Value(i); k {
		case file.BlobInline:
			r.key = dataDir + df.GetPath()
			if r.off > uint64(size) || r.size > uint64(size)-r.off {
				return nil, corruptf(dataDir+df.GetPath(), "inline blob [%d,+%d) outside the %d-byte data file", r.off, r.size, size)
			}
		case file.BlobPacked, file.BlobDedicated:
			r.key = blobSidecarKey(df.GetPath(), id.Value(i))
		case file.BlobExternal:
			r.uri = uri.Value(i)
			if r.uri == "" {
				return nil, corruptf(dataDir+df.GetPath(), "external blob without a URI")
			}
		default:
			return nil, fmt.Errorf("%w: blob kind %d", ErrUnsupported, k)
		}
		refs[i] = r
	}
	return refs, nil
}

// blobSidecarKey is the key of sidecar file blobID of data file path (relative to data/).
func blobSidecarKey(path string, blobID uint32) string {
	return fmt.Sprintf("%s%s/%032b.blob", dataDir, strings.TrimSuffix(path, ".lance"), bits.Reverse32(blobID))
}

// maxBlobGap is the largest gap between two values of one object read with one request.
const maxBlobGap = 4096

// fetchBlobs reads the values refs locate into a binary array of type t (nulls for
// invalid refs), one request per run of nearby values of an object. Ranges are checked
// against the objects' sizes (one Stat per object not known to be big enough) so that a
// corrupt descriptor cannot make it allocate more than the object holds.
func fetchBlobs(ctx context.Context, st objstore.Reader, refs []blobRef, t arrow.DataType) (arrow.Array, error) {
	vals := make([][]byte, len(refs))
	byKey := map[string][]int{}
	var keys []string
	for i, r := range refs {
		if r.uri != "" {
			return nil, fmt.Errorf("%w: blob at the external URI %q", ErrUnsupported, r.uri)
		}
		if !r.valid || r.size == 0 {
			continue
		}
		if _, ok := byKey[r.key]; !ok {
			keys = append(keys, r.key)
		}
		byKey[r.key] = append(byKey[r.key], i)
	}
	for _, key := range keys {
		idx := byKey[key]
		slices.SortFunc(idx, func(a, b int) int {
			if refs[a].off != refs[b].off {
				return cmpU64(refs[a].off, refs[b].off)
			}
			return cmpU64(refs[a].size, refs[b].size)
		})
		var end uint64
		for _, i := range idx {
			end = max(end, refs[i].off+refs[i].size)
		}
		info, err := st.Stat(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("blob file %s: %w", key, err)
		}
		if end > uint64(info.Size) {
			return nil, corruptf(key, "blob values reach byte %d of a %d-byte file", end, info.Size)
		}
		for a := 0; a < len(idx); {
			lo, hi := refs[idx[a]].off, refs[idx[a]].off+refs[idx[a]].size
			b := a + 1
			for b < len(idx) && refs[idx[b]].off <= hi+maxBlobGap && max(hi, refs[idx[b]].off+refs[idx[b]].size)-lo <= 64<<20 {
				hi = max(hi, refs[idx[b]].off+refs[idx[b]].size)
				b++
			}
			buf, err := readRange(ctx, st, key, lo, hi-lo)
			if err != nil {
				return nil, err
			}
			for _, i := range idx[a:b] {
				o := refs[i].off - lo
				vals[i] = buf[o : o+refs[i].size : o+refs[i].size]
			}
			a = b
		}
	}
	var bld array.Builder
	switch t.ID() {
	case arrow.LARGE_BINARY:
		bld = array.NewBinaryBuilder(memory.DefaultAllocator, arrow.BinaryTypes.LargeBinary)
	case arrow.BINARY:
		bld = array.NewBinaryBuilder(memory.DefaultAllocator, arrow.BinaryTypes.Binary)
	default:
		return nil, fmt.Errorf("%w: blob values as %s", ErrUnsupported, t)
	}
	defer bld.Release()
	b := bld.(*array.BinaryBuilder)
	for i, r := range refs {
		if !r.valid {
			b.AppendNull()
			continue
		}
		b.Append(vals[i])
	}
	return b.NewArray(), nil
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// readRange reads n bytes at off of object key.
func readRange(ctx context.Context, st objstore.Reader, key string, off, n uint64) ([]byte, error) {
	if n == 0 {
		return nil, nil
	}
	rc, err := st.GetRange(ctx, key, int64(off), int64(n))
	if err != nil {
		return nil, fmt.Errorf("read blob file %s: %w", key, err)
	}
	defer rc.Close()
	buf := make([]byte, n)
	if _, err := io.ReadFull(rc, buf); err != nil {
		return nil, fmt.Errorf("read blob file %s [%d,+%d): %w", key, off, n, err)
	}
	return buf, nil
}

// BlobFile is one value of a blob column located by TakeBlobs: its bytes are read on
// demand, whole or by range (Lance's BlobFile).
type BlobFile struct {
	// RowID is the row the value belongs to (as TakeBlobs was given it).
	RowID uint64
	// RowAddr is the row's address (fragment id << 32 | offset).
	RowAddr uint64
	// Size is the value's length in bytes.
	Size uint64
	// URI is set for a value stored outside the dataset (a blob v2 external blob),
	// which lancectx does not read: Read and ReadRange fail with ErrUnsupported.
	URI string

	st  objstore.Reader
	key string
	off uint64
}

// Read reads the whole value.
func (b *BlobFile) Read(ctx context.Context) ([]byte, error) { return b.ReadRange(ctx, 0, b.Size) }

// ReadRange reads n bytes of the value from offset off, fewer (none) where the value
// ends before.
func (b *BlobFile) ReadRange(ctx context.Context, off, n uint64) ([]byte, error) {
	if b.URI != "" {
		return nil, fmt.Errorf("%w: blob at the external URI %q", ErrUnsupported, b.URI)
	}
	off = min(off, b.Size)
	n = min(n, b.Size-off)
	buf, err := readRange(ctx, b.st, b.key, b.off+off, n)
	if buf == nil && err == nil {
		buf = []byte{}
	}
	return buf, err
}

// TakeBlobs locates the values of blob column column (either generation) in the rows
// with the given row ids (see RowIDColumn), in the order given, for reading on demand:
// rows that do not exist (or are deleted) and null values are left out, as Lance's
// take_blobs does. Every value's extent is checked against the file holding it.
func (d *Dataset) TakeBlobs(ctx context.Context, column string, rowIDs []uint64) ([]*BlobFile, error) {
	f := d.schema.Field(column)
	if f == nil {
		return nil, fmt.Errorf("lance: no column %q in the table", column)
	}
	if !isBlobField(f) {
		return nil, fmt.Errorf("lance: the column %q is not a blob column", column)
	}
	rows, err := d.locateRows(ctx, rowIDs)
	if err != nil {
		return nil, err
	}
	desc := file.BlobDescriptionField(f)
	var out []*BlobFile
	for _, g := range groupRows(rows) {
		fr, err := openFragment(g.frag)
		if err != nil {
			return nil, err
		}
		df, ok := fr.fileOf(f)
		if !ok {
			continue // added after this fragment was written: null in all its rows
		}
		r, _, err := fr.reader(ctx, d.store, df)
		if err != nil {
			return nil, err
		}
		offs := g.offsets()
		rec, err := fr.readRaw(ctx, d.store, desc, offs)
		if err != nil {
			return nil, err
		}
		locs, err := blobFiles(d.store, df, r.Size(), rec, file.IsBlobV2(f))
		rec.Release()
		if err != nil {
			return nil, fmt.Errorf("lance: blob column %q: %w", column, err)
		}
		if err := checkBlobExtents(ctx, d.store, locs); err != nil {
			return nil, err
		}
		for _, w := range g.rows {
			if b := locs[slices.Index(offs, w.off)]; b != nil {
				c := *b
				c.RowID, c.RowAddr = w.id, g.frag.GetId()<<32|w.off
				out = append(out, &c)
			}
		}
	}
	// Back into the order asked for.
	order := make(map[uint64]int, len(rowIDs))
	for i, id := range rowIDs {
		if _, ok := order[id]; !ok {
			order[id] = i
		}
	}
	slices.SortStableFunc(out, func(a, b *BlobFile) int { return order[a.RowID] - order[b.RowID] })
	return out, nil
}

// readRaw reads one column of the fragment's rows offs as the file stores it (blob v2:
// the descriptors with their nulls).
func (fr *fragmentReader) readRaw(ctx context.Context, st objstore.Reader, f *schema.Field, offs []uint64) (arrow.Array, error) {
	df, _ := fr.fileOf(f)
	r, v, err := fr.reader(ctx, st, df)
	if err != nil {
		return nil, err
	}
	top, match, err := v.locate(f)
	if err != nil {
		return nil, err
	}
	if top == nil {
		return array.MakeArrayOfNull(memory.DefaultAllocator, f.ArrowType(), len(offs)), nil
	}
	rec, err := r.TakeWith(ctx, []int32{top.ID}, offs, file.ReadOptions{BlobDescriptions: true})
	if err != nil {
		return nil, fmt.Errorf("read fragment %d: %w", fr.frag.GetId(), err)
	}
	defer rec.Release()
	if r.IsBlobV2(top.ID) {
		c := rec.Column(0)
		c.Retain()
		return c, nil
	}
	return conformColumn(rec.Column(0), top, f, match)
}

// blobFiles locates the values of descriptions (one per row, null for none).
func blobFiles(st objstore.Reader, df *tablepb.DataFile, size int64, col arrow.Array, v2 bool) ([]*BlobFile, error) {
	desc, ok := col.(*array.Struct)
	if !ok {
		return nil, corruptf(dataDir, "blob descriptions of type %s", col.DataType())
	}
	out := make([]*BlobFile, desc.Len())
	if v2 {
		refs, err := blobV2Refs(st, df, size, desc)
		if err != nil {
			return nil, err
		}
		for i, r := range refs {
			if r.valid {
				out[i] = &BlobFile{Size: r.size, URI: r.uri, st: st, key: r.key, off: r.off}
			}
		}
		return out, nil
	}
	pos, ok1 := desc.Field(0).(*array.Uint64)
	sz, ok2 := desc.Field(1).(*array.Uint64)
	if !ok1 || !ok2 || desc.NumField() != 2 {
		return nil, corruptf(dataDir, "blob descriptions of type %s", col.DataType())
	}
	key := dataDir + df.GetPath()
	for i := range out {
		if desc.IsNull(i) || pos.IsNull(i) || sz.IsNull(i) {
			continue
		}
		p, s := pos.Value(i), sz.Value(i)
		if p > uint64(size) || s > uint64(size)-p {
			return nil, corruptf(key, "blob [%d,+%d) outside the %d-byte data file", p, s, size)
		}
		out[i] = &BlobFile{Size: s, st: st, key: key, off: p}
	}
	return out, nil
}

// checkBlobExtents checks the values in sidecar files against the files' sizes (values
// in data files are checked against the data file's size when located).
func checkBlobExtents(ctx context.Context, st objstore.Reader, locs []*BlobFile) error {
	ends := map[string]uint64{}
	for _, b := range locs {
		if b != nil && b.URI == "" && strings.HasSuffix(b.key, ".blob") {
			ends[b.key] = max(ends[b.key], b.off+b.Size)
		}
	}
	for key, end := range ends {
		info, err := st.Stat(ctx, key)
		if err != nil {
			return fmt.Errorf("blob file %s: %w", key, err)
		}
		if end > uint64(info.Size) {
			return corruptf(key, "blob values reach byte %d of a %d-byte file", end, info.Size)
		}
	}
	return nil
}
