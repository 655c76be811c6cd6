package compress

import (
	"encoding/binary"

	pb "github.com/lancectx/lancectx/lance/format/encodings21pb"
)

// Run-length encoding (lance-encoding encodings/physical/rle.rs): a values buffer of
// 8/16/32/64-bit values and a run lengths buffer with one length per value, 8 bits wide in
// Lance 8 (16 and 32 in later writers). In a mini-block chunk these are the chunk's two
// buffers; as a block they are `[u64 values size][values][run lengths]`. A chunk's runs may
// add up to more than its value count (older writers split chunks inside a run); the
// excess is dropped, as Lance does. Later writers may wrap either child in general
// compression or out-of-line bitpacking; the child whose count is known from its size is
// decoded first and gives the run count to the other.

// rleValueBits is the width of an rle encoding's values (0 when it cannot be told).
func rleValueBits(r *pb.Rle) uint64 {
	bits, _ := rleChildBits(r.GetValues())
	return bits
}

// rleChildBits returns the decoded width of an rle child and whether decoding it needs the
// run count.
func rleChildBits(enc *pb.CompressiveEncoding) (uint64, bool) {
	switch c := enc.GetCompression().(type) {
	case *pb.CompressiveEncoding_Flat:
		return c.Flat.GetBitsPerValue(), false
	case *pb.CompressiveEncoding_OutOfLineBitpacking:
		return c.OutOfLineBitpacking.GetUncompressedBitsPerValue(), true
	case *pb.CompressiveEncoding_General:
		return rleChildBits(c.General.GetValues())
	}
	return 0, false
}

// rleChild decodes one child buffer of an rle encoding into plain values; runs is the run
// count when known.
func (d *Decoder) rleChild(enc *pb.CompressiveEncoding, buf []byte, runs uint64, known bool) ([]byte, error) {
	switch c := enc.GetCompression().(type) {
	case *pb.CompressiveEncoding_Flat:
		if c.Flat.GetData() != nil {
			return nil, unsupportedf("compressed flat rle child")
		}
		return buf, nil
	case *pb.CompressiveEncoding_OutOfLineBitpacking:
		if !known {
			return nil, corruptf("rle: both children need the run count")
		}
		b, err := outOfLineBitpacking(c.OutOfLineBitpacking, buf, runs)
		if err != nil {
			return nil, err
		}
		return b.Data, nil
	case *pb.CompressiveEncoding_General:
		raw, err := d.decompress(c.General.GetCompression(), buf)
		if err != nil {
			return nil, err
		}
		return d.rleChild(c.General.GetValues(), raw, runs, known)
	}
	return nil, unsupported(enc, "an rle child")
}

// rle decodes n values from the values and run lengths buffers of an rle encoding. clamp
// drops runs past n instead of failing (mini-block chunks).
func (d *Decoder) rle(r *pb.Rle, values, lengths []byte, n uint64, clamp bool) (*Block, error) {
	vbits, vNeeds := rleChildBits(r.GetValues())
	lbits, lNeeds := rleChildBits(r.GetRunLengths())
	vw, ok := byteWidth(vbits)
	if !ok {
		return nil, corruptf("rle of %d-bit values", vbits)
	}
	lw, ok := byteWidth(lbits)
	if !ok || lw == 8 {
		return nil, corruptf("rle with %d-bit run lengths", lbits)
	}
	if vNeeds && lNeeds {
		return nil, corruptf("rle: both children need the run count")
	}
	var err error
	if vNeeds {
		if lengths, err = d.rleChild(r.GetRunLengths(), lengths, 0, false); err != nil {
			return nil, err
		}
		if values, err = d.rleChild(r.GetValues(), values, uint64(len(lengths)/lw), true); err != nil {
			return nil, err
		}
	} else {
		if values, err = d.rleChild(r.GetValues(), values, 0, false); err != nil {
			return nil, err
		}
		if lengths, err = d.rleChild(r.GetRunLengths(), lengths, uint64(len(values)/vw), true); err != nil {
			return nil, err
		}
	}
	if n == 0 {
		return &Block{BitsPerValue: vbits}, nil
	}
	if len(values)%vw != 0 || len(lengths)%lw != 0 {
		return nil, corruptf("rle: %d value bytes of width %d, %d length bytes of width %d", len(values), vw, len(lengths), lw)
	}
	runs := len(values) / vw
	if runs != len(lengths)/lw {
		return nil, corruptf("rle: %d values but %d run lengths", runs, len(lengths)/lw)
	}
	// Size and check the runs before allocating: n comes from metadata.
	var total uint64
	for i := 0; i < runs && total < n; i++ {
		l := readUint(lengths[i*lw:], lw)
		if l == 0 {
			return nil, corruptf("rle: run %d has length 0", i)
		}
		total += l
	}
	if total < n {
		return nil, corruptf("rle: runs cover %d values, want %d", total, n)
	}
	if total > n && !clamp {
		return nil, corruptf("rle: runs cover %d values, want %d", total, n)
	}
	if n > maxSynthesizedBytes/uint64(vw) {
		return nil, corruptf("rle: %d values is too many", n)
	}
	out := make([]byte, n*uint64(vw))
	pos := uint64(0)
	for i := 0; pos < n; i++ {
		l := min(readUint(lengths[i*lw:], lw), n-pos)
		v := values[i*vw : (i+1)*vw]
		fillRun(out[pos*uint64(vw):(pos+l)*uint64(vw)], v)
		pos += l
	}
	return &Block{N: n, BitsPerValue: vbits, Data: out}, nil
}

// fillRun fills dst with copies of the value v.
func fillRun(dst, v []byte) {
	switch len(v) {
	case 1:
		b := v[0]
		for i := range dst {
			dst[i] = b
		}
	case 8:
		x := binary.LittleEndian.Uint64(v)
		for i := 0; i+8 <= len(dst); i += 8 {
			binary.LittleEndian.PutUint64(dst[i:], x)
		}
	default:
		for i := 0; i < len(dst); i += len(v) {
			copy(dst[i:], v)
		}
	}
}

// rleBlock decodes rle stored as one buffer: [u64 values size][values][run lengths].
func (d *Decoder) rleBlock(r *pb.Rle, buf []byte, n uint64) (*Block, error) {
	if len(buf) < 8 {
		return nil, corruptf("rle buffer of %d bytes", len(buf))
	}
	vsize := binary.LittleEndian.Uint64(buf)
	if vsize > uint64(len(buf)-8) {
		return nil, corruptf("rle buffer: %d value bytes in %d", vsize, len(buf)-8)
	}
	return d.rle(r, buf[8:8+vsize], buf[8+vsize:], n, true)
}
