package lance

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// A deletion file in the Arrow form is an Arrow IPC file with one column `row_id:
// uint32 not null`. arrow-go's IPC reader trusts vector lengths in the flatbuffer
// metadata (a corrupt count makes it allocate gigabytes, which kills the process), so
// deletion files are decoded here by a small, bounds-checked reader of exactly that
// shape: the schema message, record batch messages, optional ZSTD or LZ4 body
// compression. Every length is checked against the input before it is used.

var arrowMagic = []byte("ARROW1")

// fb is a bounds-checked view of a flatbuffer.
type fb struct {
	b []byte
}

type fbTable struct {
	fb  *fb
	pos int // table start
}

func (f *fb) u32(off int) (uint32, bool) {
	if off < 0 || off+4 > len(f.b) {
		return 0, false
	}
	return binary.LittleEndian.Uint32(f.b[off:]), true
}

func (f *fb) i32(off int) (int32, bool) { v, ok := f.u32(off); return int32(v), ok }

func (f *fb) u16(off int) (uint16, bool) {
	if off < 0 || off+2 > len(f.b) {
		return 0, false
	}
	return binary.LittleEndian.Uint16(f.b[off:]), true
}

func (f *fb) i64(off int) (int64, bool) {
	if off < 0 || off+8 > len(f.b) {
		return 0, false
	}
	return int64(binary.LittleEndian.Uint64(f.b[off:])), true
}

// root returns the root table of the buffer.
func (f *fb) root() (fbTable, bool) {
	off, ok := f.u32(0)
	if !ok || int(off) >= len(f.b) {
		return fbTable{}, false
	}
	return fbTable{f, int(off)}, true
}

// field returns the absolute offset of field i of the table, 0 when absent.
func (t fbTable) field(i int) (int, bool) {
	soff, ok := t.fb.i32(t.pos)
	if !ok {
		return 0, false
	}
	vt := t.pos - int(soff)
	vlen, ok := t.fb.u16(vt)
	if !ok || vlen < 4 {
		return 0, false
	}
	slot := 4 + 2*i
	if slot+2 > int(vlen) {
		return 0, true // field beyond the vtable: absent
	}
	foff, ok := t.fb.u16(vt + slot)
	if !ok {
		return 0, false
	}
	if foff == 0 {
		return 0, true
	}
	return t.pos + int(foff), true
}

func (t fbTable) scalarI64(i int, def int64) (int64, bool) {
	at, ok := t.field(i)
	if !ok || at == 0 {
		return def, ok
	}
	return t.fb.i64(at)
}

func (t fbTable) scalarU8(i int, def uint8) (uint8, bool) {
	at, ok := t.field(i)
	if !ok || at == 0 {
		return def, ok
	}
	if at >= len(t.fb.b) {
		return 0, false
	}
	return t.fb.b[at], true
}

func (t fbTable) scalarI32(i int, def int32) (int32, bool) {
	at, ok := t.field(i)
	if !ok || at == 0 {
		return def, ok
	}
	return t.fb.i32(at)
}

// table follows the offset stored at field i to a sub-table.
func (t fbTable) table(i int) (fbTable, bool, bool) {
	at, ok := t.field(i)
	if !ok {
		return fbTable{}, false, false
	}
	if at == 0 {
		return fbTable{}, false, true
	}
	rel, ok := t.fb.u32(at)
	if !ok || at+int(rel) >= len(t.fb.b) {
		return fbTable{}, false, false
	}
	return fbTable{t.fb, at + int(rel)}, true, true
}

// vector returns the start and element count of the vector at field i; the caller
// checks count*elemSize against the buffer.
func (t fbTable) vector(i, elemSize int) (start, n int, present, ok bool) {
	at, ok := t.field(i)
	if !ok {
		return 0, 0, false, false
	}
	if at == 0 {
		return 0, 0, false, true
	}
	rel, ok := t.fb.u32(at)
	if !ok {
		return 0, 0, false, false
	}
	vec := at + int(rel)
	cnt, ok := t.fb.u32(vec)
	if !ok || uint64(vec)+4+uint64(cnt)*uint64(elemSize) > uint64(len(t.fb.b)) {
		return 0, 0, false, false
	}
	return vec + 4, int(cnt), true, true
}

// vectorTable returns element j of a vector of tables.
func (t fbTable) vectorTable(start, j int) (fbTable, bool) {
	at := start + 4*j
	rel, ok := t.fb.u32(at)
	if !ok || at+int(rel) >= len(t.fb.b) {
		return fbTable{}, false
	}
	return fbTable{t.fb, at + int(rel)}, true
}

func (t fbTable) str(i int) (string, bool) {
	start, n, present, ok := t.vector(i, 1)
	if !ok || !present {
		return "", ok
	}
	return string(t.fb.b[start : start+n]), true
}

// Arrow flatbuffer enum values used here.
const (
	ipcHeaderRecordBatch = 3
	ipcTypeInt           = 2
	ipcCodecLZ4Frame     = 0
	ipcCodecZSTD         = 1
)

// decodeArrowDeletions parses an Arrow IPC file holding one `row_id: uint32` column. It
// follows the footer (schema and record batch blocks), as Arrow readers do: writers pad
// and align messages differently (arrow-rs starts the stream at byte 64).
func decodeArrowDeletions(path string, buf []byte) (*roaring.Bitmap, error) {
	bad := func(format string, args ...any) error { return corruptf(path, "arrow deletion file: "+format, args...) }
	if len(buf) < 18 || !bytes.Equal(buf[:6], arrowMagic) || !bytes.HasSuffix(buf, arrowMagic) {
		return nil, bad("missing ARROW1 magic")
	}
	flen := int64(int32(binary.LittleEndian.Uint32(buf[len(buf)-10:])))
	fend := int64(len(buf) - 10)
	if flen <= 0 || flen > fend-8 {
		return nil, bad("footer length %d", flen)
	}
	footer := &fb{b: buf[fend-flen : fend]}
	root, ok := footer.root()
	if !ok {
		return nil, bad("bad footer")
	}
	schema, present, ok := root.table(1)
	if !ok || !present {
		return nil, bad("footer without schema")
	}
	if err := checkDeletionSchema(schema, bad); err != nil {
		return nil, err
	}
	// Block structs: {offset int64, metaDataLength int32, pad, bodyLength int64}.
	bstart, nb, present, ok := root.vector(3, 24)
	if !ok {
		return nil, bad("bad record batch blocks")
	}
	bm := roaring.New()
	for k := 0; present && k < nb; k++ {
		off, _ := footer.i64(bstart + 24*k)
		metaLen, _ := footer.i32(bstart + 24*k + 8)
		bodyLen, _ := footer.i64(bstart + 24*k + 16)
		if off < 8 || metaLen < 8 || bodyLen < 0 || off > fend || int64(metaLen) > fend-off || bodyLen > fend-off-int64(metaLen) {
			return nil, bad("record batch block %d [%d,+%d,+%d) outside the file", k, off, metaLen, bodyLen)
		}
		meta := buf[off : off+int64(metaLen)]
		if binary.LittleEndian.Uint32(meta) == 0xFFFFFFFF {
			meta = meta[8:]
		} else {
			meta = meta[4:]
		}
		msg := &fb{b: meta}
		mroot, ok := msg.root()
		if !ok {
			return nil, bad("bad message flatbuffer")
		}
		htype, ok := mroot.scalarU8(1, 0)
		if !ok || htype != ipcHeaderRecordBatch {
			return nil, bad("block %d is not a record batch (type %d)", k, htype)
		}
		header, present, ok := mroot.table(2)
		if !ok || !present {
			return nil, bad("message without header")
		}
		body := buf[off+int64(metaLen) : off+int64(metaLen)+bodyLen]
		if err := readDeletionBatch(header, body, bm, bad); err != nil {
			return nil, err
		}
	}
	return bm, nil
}

func checkDeletionSchema(s fbTable, bad func(string, ...any) error) error {
	start, n, present, ok := s.vector(1, 4)
	if !ok || !present || n != 1 {
		return bad("schema must have exactly one field")
	}
	f, ok := s.vectorTable(start, 0)
	if !ok {
		return bad("bad schema field")
	}
	name, ok := f.str(0)
	if !ok || name != "row_id" {
		return bad("field is %q, want row_id", name)
	}
	tt, ok := f.scalarU8(2, 0)
	if !ok || tt != ipcTypeInt {
		return bad("row_id is not an integer")
	}
	it, present, ok := f.table(3)
	if !ok || !present {
		return bad("row_id has no type")
	}
	width, ok1 := it.scalarI32(0, 0)
	signed, ok2 := it.scalarU8(1, 0)
	if !ok1 || !ok2 || width != 32 || signed != 0 {
		return bad("row_id must be uint32")
	}
	return nil
}

func readDeletionBatch(rb fbTable, body []byte, bm *roaring.Bitmap, bad func(string, ...any) error) error {
	length, ok := rb.scalarI64(0, 0)
	if !ok || length < 0 || length > math.MaxUint32 {
		return bad("batch length %d", length)
	}
	// FieldNode structs: {length int64, null_count int64}.
	nstart, nn, present, ok := rb.vector(1, 16)
	if !ok || !present || nn != 1 {
		return bad("batch must have one field node")
	}
	nulls, _ := rb.fb.i64(nstart + 8)
	if nulls != 0 {
		return bad("row_id has %d nulls", nulls)
	}
	// Buffer structs: {offset int64, length int64}: validity, values.
	bstart, bn, present, ok := rb.vector(2, 16)
	if !ok || !present || bn != 2 {
		return bad("batch must have two buffers")
	}
	var codec int = -1
	if comp, present, ok := rb.table(3); !ok {
		return bad("bad compression")
	} else if present {
		c, ok := comp.scalarU8(0, 0)
		if !ok {
			return bad("bad compression codec")
		}
		codec = int(c)
	}
	off, _ := rb.fb.i64(bstart + 16)
	blen, _ := rb.fb.i64(bstart + 24)
	if off < 0 || blen < 0 || off > int64(len(body)) || blen > int64(len(body))-off {
		return bad("values buffer [%d,+%d) outside a body of %d bytes", off, blen, len(body))
	}
	values := body[off : off+blen]
	want := length * 4
	if codec >= 0 && len(values) > 0 {
		var err error
		if values, err = decompressIPCBuffer(codec, values, want); err != nil {
			return bad("%v", err)
		}
	}
	if int64(len(values)) < want {
		return bad("values buffer of %d bytes for %d rows", len(values), length)
	}
	ids := make([]uint32, length)
	for i := range ids {
		ids[i] = binary.LittleEndian.Uint32(values[4*i:])
	}
	bm.AddMany(ids)
	return nil
}

// decompressIPCBuffer undoes Arrow IPC body compression: an int64 uncompressed length
// (-1: stored uncompressed) followed by a ZSTD or LZ4 frame. The output is capped at want.
func decompressIPCBuffer(codec int, b []byte, want int64) ([]byte, error) {
	if len(b) < 8 {
		return nil, fmt.Errorf("compressed buffer of %d bytes", len(b))
	}
	n := int64(binary.LittleEndian.Uint64(b))
	b = b[8:]
	if n == -1 {
		return b, nil
	}
	if n < 0 || n > want {
		return nil, fmt.Errorf("uncompressed length %d, expected at most %d", n, want)
	}
	var r io.Reader
	switch codec {
	case ipcCodecZSTD:
		d, err := zstd.NewReader(bytes.NewReader(b), zstd.WithDecoderMaxMemory(uint64(want)+1<<20), zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, err
		}
		defer d.Close()
		r = d
	case ipcCodecLZ4Frame:
		r = lz4.NewReader(bytes.NewReader(b))
	default:
		return nil, fmt.Errorf("unknown compression codec %d", codec)
	}
	out := make([]byte, n)
	if _, err := io.ReadFull(r, out); err != nil {
		return nil, fmt.Errorf("decompress: %w", err)
	}
	return out, nil
}
