package compress

import (
	"encoding/binary"

	pb "github.com/lancectx/lancectx/lance/format/encodings21pb"
)

// FSST (Fast Static Symbol Table) as Lance stores it (rust/compression/fsst): the symbol
// table is a fixed 2312-byte buffer,
//
//	u64 header  ("FSST" << 32) | encoder_switch << 24 | suffix_lim << 16 | terminator << 8 | n_symbols
//	n_symbols   u64 symbols (little endian, the symbol's bytes first)
//	n_symbols   u8 symbol lengths
//	zeros       up to 2312 bytes
//
// and a compressed value is a sequence of codes: code c < n_symbols stands for the first
// lens[c] bytes of symbols[c], code 255 is an escape whose next byte is a literal. When the
// encoder switch is off the values were stored uncompressed.

const (
	fsstTableSize = 8 + 256*8 + 256
	fsstMagic     = 0x46535354 // "FSST", the high half of the header
	fsstEscape    = 255
)

// fsstTable is a parsed symbol table.
type fsstTable struct {
	on   bool
	syms [256]uint64
	lens [256]uint8
	// valid[c] is 1 for the codes a value may contain (symbols and the escape).
	valid [256]uint8
}

// parseFSSTTable checks and parses a serialized symbol table.
func parseFSSTTable(st []byte) (*fsstTable, error) {
	if len(st) != fsstTableSize {
		return nil, corruptf("fsst symbol table of %d bytes, want %d", len(st), fsstTableSize)
	}
	h := binary.LittleEndian.Uint64(st)
	if (h>>32)&fsstMagic != fsstMagic {
		return nil, corruptf("fsst symbol table without its magic")
	}
	t := &fsstTable{on: h&(1<<24) != 0}
	n := int(h & 255)
	for i := 0; i < n; i++ {
		t.syms[i] = binary.LittleEndian.Uint64(st[8+8*i:])
		l := st[8+8*n+i]
		if l > 8 {
			return nil, corruptf("fsst symbol %d of length %d", i, l)
		}
		t.lens[i] = l
		t.valid[i] = 1
	}
	t.valid[fsstEscape] = 1
	return t, nil
}

// decodedLen returns the decoded size of the codes in src.
func (t *fsstTable) decodedLen(src []byte) (int, error) {
	size := 0
	for i := 0; i < len(src); {
		c := src[i]
		if t.valid[c] == 0 {
			return 0, corruptf("fsst code %d has no symbol", c)
		}
		if c == fsstEscape {
			if i+1 >= len(src) {
				return 0, corruptf("fsst value ends in an escape")
			}
			size++
			i += 2
			continue
		}
		size += int(t.lens[c])
		i++
	}
	return size, nil
}

// decodeInto decodes src into out[pos:] and returns the new position. out must have 8
// bytes of room beyond the decoded size (symbols are stored as whole words) and src must
// have passed decodedLen.
func (t *fsstTable) decodeInto(out []byte, pos int, src []byte) int {
	i := 0
	// Four codes at a time while none of them is an escape.
	for i+4 <= len(src) {
		w := binary.LittleEndian.Uint32(src[i:])
		if (w&0x80808080)&((^w&0x7F7F7F7F)+0x7F7F7F7F^0x80808080) != 0 {
			break
		}
		c0, c1, c2, c3 := w&0xFF, w>>8&0xFF, w>>16&0xFF, w>>24
		binary.LittleEndian.PutUint64(out[pos:], t.syms[c0])
		pos += int(t.lens[c0])
		binary.LittleEndian.PutUint64(out[pos:], t.syms[c1])
		pos += int(t.lens[c1])
		binary.LittleEndian.PutUint64(out[pos:], t.syms[c2])
		pos += int(t.lens[c2])
		binary.LittleEndian.PutUint64(out[pos:], t.syms[c3])
		pos += int(t.lens[c3])
		i += 4
	}
	for i < len(src) {
		c := src[i]
		if c == fsstEscape {
			out[pos] = src[i+1]
			pos++
			i += 2
			// Back to the word-at-a-time loop when enough codes remain.
			for i+4 <= len(src) {
				w := binary.LittleEndian.Uint32(src[i:])
				if (w&0x80808080)&((^w&0x7F7F7F7F)+0x7F7F7F7F^0x80808080) != 0 {
					break
				}
				c0, c1, c2, c3 := w&0xFF, w>>8&0xFF, w>>16&0xFF, w>>24
				binary.LittleEndian.PutUint64(out[pos:], t.syms[c0])
				pos += int(t.lens[c0])
				binary.LittleEndian.PutUint64(out[pos:], t.syms[c1])
				pos += int(t.lens[c1])
				binary.LittleEndian.PutUint64(out[pos:], t.syms[c2])
				pos += int(t.lens[c2])
				binary.LittleEndian.PutUint64(out[pos:], t.syms[c3])
				pos += int(t.lens[c3])
				i += 4
			}
			continue
		}
		binary.LittleEndian.PutUint64(out[pos:], t.syms[c])
		pos += int(t.lens[c])
		i++
	}
	return pos
}

// appendDecoded appends the decoded form of one value to dst.
func (t *fsstTable) appendDecoded(dst, src []byte) ([]byte, error) {
	if !t.on {
		return append(dst, src...), nil
	}
	size, err := t.decodedLen(src)
	if err != nil {
		return nil, err
	}
	start := len(dst)
	if cap(dst)-start < size+8 {
		grown := make([]byte, start, start+size+8+start/2)
		copy(grown, dst)
		dst = grown
	}
	out := dst[:cap(dst)]
	end := t.decodeInto(out, start, src)
	return dst[:end], nil
}

// fsstBlock decodes the values of a variable block of FSST codes.
func (d *Decoder) fsstBlock(f *pb.Fsst, in *Block) (*Block, error) {
	t := d.fsst[f]
	if in.Offsets == nil || uint64(len(in.Offsets)) != in.N+1 {
		return nil, corruptf("fsst over a block that is not variable width")
	}
	if !t.on {
		return in, nil
	}
	// Values are coded independently (an escape never straddles two values), so each is
	// checked and sized on its own before one allocation for all of them.
	size := 0
	for i := uint64(0); i < in.N; i++ {
		n, err := t.decodedLen(in.Data[in.Offsets[i]:in.Offsets[i+1]])
		if err != nil {
			return nil, err
		}
		size += n
	}
	out := make([]byte, size+8)
	offsets := make([]uint64, in.N+1)
	pos := 0
	for i := uint64(0); i < in.N; i++ {
		pos = t.decodeInto(out, pos, in.Data[in.Offsets[i]:in.Offsets[i+1]])
		offsets[i+1] = uint64(pos)
	}
	return &Block{N: in.N, Data: out[:pos:pos], Offsets: offsets}, nil
}
