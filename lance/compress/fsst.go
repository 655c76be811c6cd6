package compress

import (
	"encoding/binary"
	"fmt"

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
	// fsstWindow is the room decodeInto needs after its position to write four symbols
	// with one bounds check: three lengths masked to 15 plus an 8-byte word.
	fsstWindow    = 3*15 + 8
	fsstTableSize = 8 + 256*8 + 256
	fsstMagic     = 0x46535354 // "FSST", the high half of the header
	fsstEscape    = 255
)

// fsstTable is a parsed symbol table.
type fsstTable struct {
	on   bool
	syms [256]uint64
	lens [256]uint8
	// bad[c] is 1 for the codes no value may contain (no symbol, not the escape).
	bad [256]uint8
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
	for c := n; c < fsstEscape; c++ {
		t.bad[c] = 1
	}
	for i := 0; i < n; i++ {
		t.syms[i] = binary.LittleEndian.Uint64(st[8+8*i:])
		l := st[8+8*n+i]
		if l > 8 {
			return nil, corruptf("fsst symbol %d of length %d", i, l)
		}
		t.lens[i] = l
	}
	return t, nil
}

// hasEscape reports whether any of the four bytes of w is the escape code 255.
func hasEscape(w uint32) bool {
	return (w&0x80808080)&((^w&0x7F7F7F7F)+0x7F7F7F7F^0x80808080) != 0
}

// decodeInto decodes the codes of one value into out[pos:] and returns the new position.
// Symbols are written as whole words, so out needs fsstWindow bytes of slack after the
// decoded bytes (fsstRoom(len(src)) bytes of room always suffice). It fails on a code
// without a symbol, on a value ending in an escape and when out is too short.
func (t *fsstTable) decodeInto(out []byte, pos int, src []byte) (int, error) {
	var bad uint8
	i := 0
	for {
		// Four codes at a time while none of them is an escape.
		for i+4 <= len(src) {
			w := binary.LittleEndian.Uint32(src[i:])
			if hasEscape(w) {
				break
			}
			c0, c1, c2, c3 := w&0xFF, w>>8&0xFF, w>>16&0xFF, w>>24
			bad |= t.bad[c0] | t.bad[c1] | t.bad[c2] | t.bad[c3]
			if len(out)-pos < fsstWindow {
				return 0, errFSSTRoom
			}
			// One bounds check for the four symbols: lengths are at most 8 (masking
			// with 15 lets the compiler prove every write falls inside the window).
			win := (*[fsstWindow]byte)(out[pos:])
			p1 := int(t.lens[c0]) & 15
			p2 := p1 + int(t.lens[c1])&15
			p3 := p2 + int(t.lens[c2])&15
			binary.LittleEndian.PutUint64(win[0:8], t.syms[c0])
			binary.LittleEndian.PutUint64(win[p1:p1+8], t.syms[c1])
			binary.LittleEndian.PutUint64(win[p2:p2+8], t.syms[c2])
			binary.LittleEndian.PutUint64(win[p3:p3+8], t.syms[c3])
			pos += p3 + int(t.lens[c3])
			i += 4
		}
		if i >= len(src) {
			break
		}
		c := src[i]
		if c == fsstEscape {
			if i+1 >= len(src) {
				return 0, corruptf("fsst value ends in an escape")
			}
			if pos >= len(out) {
				return 0, errFSSTRoom
			}
			out[pos] = src[i+1]
			pos++
			i += 2
			continue
		}
		bad |= t.bad[c]
		if len(out)-pos < 8 {
			return 0, errFSSTRoom
		}
		binary.LittleEndian.PutUint64(out[pos:], t.syms[c])
		pos += int(t.lens[c])
		i++
	}
	if bad != 0 {
		return 0, corruptf("fsst code without a symbol")
	}
	return pos, nil
}

// errFSSTRoom reports codes decoding to more bytes than they were sized for, which only
// corrupt input (an escape straddling two values) can do.
var errFSSTRoom = corruptf("fsst codes decode past their size")

// fsstRoom is the output room decodeInto needs for a value of n codes.
func fsstRoom(n int) int { return 8*n + fsstWindow }

// appendDecoded appends the decoded form of one value to dst.
func (t *fsstTable) appendDecoded(dst, src []byte) ([]byte, error) {
	if !t.on {
		return append(dst, src...), nil
	}
	start := len(dst)
	dst = grow(dst, fsstRoom(len(src)))
	end, err := t.decodeInto(dst[:cap(dst)], start, src)
	if err != nil {
		return nil, err
	}
	return dst[:end], nil
}

// grow returns b with room for at least extra bytes after len(b).
func grow(b []byte, extra int) []byte {
	if cap(b)-len(b) >= extra {
		return b
	}
	g := make([]byte, len(b), max(2*cap(b), len(b)+extra))
	copy(g, b)
	return g
}

// fsstBlock decodes the values of a variable block of FSST codes.
func (d *Decoder) fsstBlock(f *pb.Fsst, in *Block) (*Block, error) {
	return d.fsstBlockInto(f, in, nil)
}

// fsstBlockInto is fsstBlock decoding into s's buffers when s is not nil.
func (d *Decoder) fsstBlockInto(f *pb.Fsst, in *Block, s *Scratch) (*Block, error) {
	t := d.fsst[f]
	if in.Offsets == nil || uint64(len(in.Offsets)) != in.N+1 {
		return nil, corruptf("fsst over a block that is not variable width")
	}
	if !t.on {
		return in, nil
	}
	// FSST usually compresses text 2-4x: start there and grow when a value might not fit
	// (cheaper than sizing the output exactly with a pass over the codes).
	codes := in.Offsets[in.N] - in.Offsets[0]
	var out []byte
	var offsets []uint64
	if s != nil {
		out = grow(s.data[:0], int(3*codes+fsstWindow))
		offsets = reuseOffsets(&s.offs[1], in.N+1)
		defer func() { s.data = out[:0] }()
	} else {
		out = make([]byte, 0, 3*codes+fsstWindow)
		offsets = make([]uint64, in.N+1)
	}
	pos := 0
	for i := uint64(0); i < in.N; i++ {
		v := in.Data[in.Offsets[i]:in.Offsets[i+1]]
		out = grow(out[:pos], fsstRoom(len(v)))
		var err error
		if pos, err = t.decodeInto(out[:cap(out)], pos, v); err != nil {
			return nil, fmt.Errorf("value %d: %w", i, err)
		}
		offsets[i+1] = uint64(pos)
	}
	return &Block{N: in.N, Data: out[:pos:pos], Offsets: offsets}, nil
}
