package rollout

import (
	"encoding/binary"
	"fmt"

	flatbuffers "github.com/google/flatbuffers/go"
)

// checkIPCVectors walks the messages of an Arrow IPC stream and checks that every
// flatbuffer vector the IPC reader sizes a Go slice by (schema fields and their
// children, key-value metadata, record batch nodes and buffers) fits inside its
// message. The reader trusts those lengths: a 40-byte body claiming 2^31 fields makes
// it allocate gigabytes before any check, a fatal out-of-memory that no recover
// catches (found by FuzzParseAppendArrow). Framing errors are left to the reader,
// which reports them; this only refuses what it can prove is a lie.
func checkIPCVectors(body []byte) error {
	for pos := 0; pos+8 <= len(body); {
		n := binary.LittleEndian.Uint32(body[pos:])
		pos += 4
		if n == 0xFFFFFFFF {
			n = binary.LittleEndian.Uint32(body[pos:])
			pos += 4
		}
		if n == 0 {
			return nil // end of stream
		}
		if int64(n) > int64(len(body)-pos) {
			return ipcErr(fmt.Errorf("a message of %d bytes in %d remaining", n, len(body)-pos))
		}
		meta := body[pos : pos+int(n)]
		pos += int(n)
		bodyLen, err := checkMessage(meta)
		if err != nil {
			return err
		}
		if bodyLen < 0 || bodyLen > int64(len(body)-pos) {
			return ipcErr(fmt.Errorf("a message body of %d bytes in %d remaining", bodyLen, len(body)-pos))
		}
		pos += int(bodyLen)
	}
	return nil
}

// fbTable is a flatbuffer table with bounds-checked field access.
type fbTable struct {
	t   flatbuffers.Table
	buf []byte
}

func fbRoot(buf []byte) (fbTable, bool) {
	if len(buf) < 4 {
		return fbTable{}, false
	}
	off := flatbuffers.GetUOffsetT(buf)
	return fbAt(buf, off)
}

func fbAt(buf []byte, pos flatbuffers.UOffsetT) (fbTable, bool) {
	if int64(pos)+4 > int64(len(buf)) {
		return fbTable{}, false
	}
	vt := int64(pos) - int64(flatbuffers.GetSOffsetT(buf[pos:]))
	if vt < 0 || vt+4 > int64(len(buf)) {
		return fbTable{}, false
	}
	if vlen := int64(flatbuffers.GetVOffsetT(buf[vt:])); vt+vlen > int64(len(buf)) {
		return fbTable{}, false
	}
	return fbTable{t: flatbuffers.Table{Bytes: buf, Pos: pos}, buf: buf}, true
}

// field returns the absolute position of field i (0: absent).
func (f fbTable) field(i int) flatbuffers.UOffsetT {
	o := flatbuffers.UOffsetT(f.t.Offset(flatbuffers.VOffsetT(4 + 2*i)))
	if o == 0 {
		return 0
	}
	return o + f.t.Pos
}

// vector checks vector field i of elements of size elem and returns its start and
// length (0, 0 when absent).
func (f fbTable) vector(i, elem int) (flatbuffers.UOffsetT, int, error) {
	p := f.field(i)
	if p == 0 {
		return 0, 0, nil
	}
	if int64(p)+4 > int64(len(f.buf)) {
		return 0, 0, fmt.Errorf("vector offset out of bounds")
	}
	start := int64(p) + int64(flatbuffers.GetUOffsetT(f.buf[p:]))
	if start+4 > int64(len(f.buf)) {
		return 0, 0, fmt.Errorf("vector out of bounds")
	}
	n := int64(flatbuffers.GetUOffsetT(f.buf[start:]))
	if start+4+n*int64(elem) > int64(len(f.buf)) {
		return 0, 0, fmt.Errorf("vector of %d elements does not fit its %d-byte message", n, len(f.buf))
	}
	return flatbuffers.UOffsetT(start + 4), int(n), nil
}

// tables returns the tables of vector field i.
func (f fbTable) tables(i int) ([]fbTable, error) {
	start, n, err := f.vector(i, 4)
	if err != nil {
		return nil, err
	}
	out := make([]fbTable, 0, n)
	for k := 0; k < n; k++ {
		p := start + flatbuffers.UOffsetT(4*k)
		t, ok := fbAt(f.buf, p+flatbuffers.GetUOffsetT(f.buf[p:]))
		if !ok {
			return nil, fmt.Errorf("table out of bounds")
		}
		out = append(out, t)
	}
	return out, nil
}

// Arrow's Message.fbs: the header union's types and the tables' field numbers.
const (
	msgHeaderType, msgHeader, msgBodyLength, msgCustomMetadata = 1, 2, 3, 4
	headerSchema, headerDictionaryBatch, headerRecordBatch     = 1, 2, 3
)

// checkMessage checks one message's vectors and returns its body length.
func checkMessage(meta []byte) (int64, error) {
	// A message this walk cannot read is refused, not handed to the IPC reader: the
	// reader checks less (a vtable past its buffer, say) and may still size slices by
	// lengths that were never checked here.
	m, ok := fbRoot(meta)
	if !ok {
		return 0, ipcErr(fmt.Errorf("a message whose flatbuffer root is out of bounds"))
	}
	if _, _, err := m.vector(msgCustomMetadata, 4); err != nil {
		return 0, ipcErr(err)
	}
	var bodyLen int64
	if p := m.field(msgBodyLength); p != 0 && int64(p)+8 <= int64(len(meta)) {
		bodyLen = int64(binary.LittleEndian.Uint64(meta[p:]))
	}
	var htype byte
	if p := m.field(msgHeaderType); p != 0 && int(p) < len(meta) {
		htype = meta[p]
	}
	hp := m.field(msgHeader)
	if hp == 0 {
		return bodyLen, nil // no header: the reader refuses the message
	}
	if int64(hp)+4 > int64(len(meta)) {
		return 0, ipcErr(fmt.Errorf("a message header out of bounds"))
	}
	h, ok := fbAt(meta, hp+flatbuffers.GetUOffsetT(meta[hp:]))
	if !ok {
		return 0, ipcErr(fmt.Errorf("a message header out of bounds"))
	}
	switch htype {
	case headerSchema:
		// Schema: 1 fields, 2 custom_metadata, 3 features (longs).
		if _, _, err := h.vector(3, 8); err != nil {
			return 0, ipcErr(err)
		}
		if _, _, err := h.vector(2, 4); err != nil {
			return 0, ipcErr(err)
		}
		fields, err := h.tables(1)
		if err != nil {
			return 0, ipcErr(err)
		}
		visits := len(meta) / 4 // each field table takes at least 4 bytes
		for _, f := range fields {
			if err := checkField(f, 0, &visits); err != nil {
				return 0, ipcErr(err)
			}
		}
	case headerDictionaryBatch:
		// DictionaryBatch: 1 data (a RecordBatch).
		if p := h.field(1); p != 0 && int64(p)+4 <= int64(len(meta)) {
			if rb, ok := fbAt(meta, p+flatbuffers.GetUOffsetT(meta[p:])); ok {
				if err := checkRecordBatch(rb); err != nil {
					return 0, ipcErr(err)
				}
			}
		}
	case headerRecordBatch:
		if err := checkRecordBatch(h); err != nil {
			return 0, ipcErr(err)
		}
	}
	return bodyLen, nil
}

// checkRecordBatch: 1 nodes (16-byte structs), 2 buffers (16-byte structs), 4
// variadicBufferCounts (longs).
func checkRecordBatch(rb fbTable) error {
	for _, v := range [...]struct{ i, elem int }{{1, 16}, {2, 16}, {4, 8}} {
		if _, _, err := rb.vector(v.i, v.elem); err != nil {
			return err
		}
	}
	return nil
}

// maxFieldDepth bounds nesting: offsets may point back at a parent, and no rollout
// column nests deeper than a few levels.
const maxFieldDepth = 32

// checkField: Field 5 children, 6 custom_metadata.
// visits bounds the fields walked (a children vector may list one table many times).
func checkField(f fbTable, depth int, visits *int) error {
	if depth > maxFieldDepth {
		return fmt.Errorf("fields nest deeper than %d levels", maxFieldDepth)
	}
	if *visits--; *visits < 0 {
		return fmt.Errorf("more fields than the schema message can hold")
	}
	if _, _, err := f.vector(6, 4); err != nil {
		return err
	}
	kids, err := f.tables(5)
	if err != nil {
		return err
	}
	for _, k := range kids {
		if err := checkField(k, depth+1, visits); err != nil {
			return err
		}
	}
	return nil
}

func ipcErr(err error) error {
	return fmt.Errorf("malformed Arrow IPC stream: %w", err)
}
