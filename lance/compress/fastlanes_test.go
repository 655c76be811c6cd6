package compress

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
)

// The reference packer and unpacker below follow the FastLanes definition literally, one
// bit at a time: value (row r, lane l) is element flOrder[r/8]*16 + (r%8)*128 + l, and
// lane l's rows form a bit stream of w-bit fields whose t-bit word k is stored at word
// position lanes*k + l. The fast kernel must agree with them for every width.

// flIndex is the element of (row, lane) in a chunk. It spells the transposition order out
// again rather than sharing flOrder, so that a wrong order in the decoder fails the tests.
func flIndex(row, lane int) int {
	order := [8]int{0, 4, 2, 6, 1, 5, 3, 7}
	return order[row/8]*16 + (row%8)*128 + lane
}

// refPack packs 1024 values (their low w bits) into 128*w bytes of t-bit words.
func refPack(t, w int, vals []uint64) []byte {
	lanes := 1024 / t
	words := make([]uint64, lanes*w)
	for lane := 0; lane < lanes; lane++ {
		for row := 0; row < t; row++ {
			v := vals[flIndex(row, lane)]
			for b := 0; b < w; b++ {
				if v>>b&1 == 1 {
					pos := row*w + b
					words[lanes*(pos/t)+lane] |= 1 << (pos % t)
				}
			}
		}
	}
	out := make([]byte, len(words)*t/8)
	for i, x := range words {
		putUint(out[i*t/8:], t/8, x)
	}
	return out
}

// refUnpack is the bit-at-a-time inverse of refPack.
func refUnpack(t, w int, packed []byte) []uint64 {
	lanes := 1024 / t
	vals := make([]uint64, 1024)
	for lane := 0; lane < lanes; lane++ {
		for row := 0; row < t; row++ {
			var v uint64
			for b := 0; b < w; b++ {
				pos := row*w + b
				word := readUint(packed[(lanes*(pos/t)+lane)*t/8:], t/8)
				if word>>(pos%t)&1 == 1 {
					v |= 1 << b
				}
			}
			vals[flIndex(row, lane)] = v
		}
	}
	return vals
}

// randValues returns 1024 random values of at most w bits.
func randValues(r *rand.Rand, w int) []uint64 {
	vals := make([]uint64, 1024)
	for i := range vals {
		v := r.Uint64()
		if w < 64 {
			v &= 1<<w - 1
		}
		vals[i] = v
	}
	return vals
}

// valuesBytes lays out values as t-bit little-endian integers.
func valuesBytes(t int, vals []uint64) []byte {
	out := make([]byte, len(vals)*t/8)
	for i, v := range vals {
		putUint(out[i*t/8:], t/8, v)
	}
	return out
}

func TestUnpackChunkMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, tb := range []int{8, 16, 32, 64} {
		for w := 0; w <= tb; w++ {
			t.Run(fmt.Sprintf("u%d/w%d", tb, w), func(t *testing.T) {
				vals := randValues(r, w)
				packed := refPack(tb, w, vals)
				if len(packed) != 128*w {
					t.Fatalf("reference packed to %d bytes, want %d", len(packed), 128*w)
				}
				if got := refUnpack(tb, w, packed); fmt.Sprint(got) != fmt.Sprint(vals) {
					t.Fatal("reference unpack does not invert reference pack")
				}
				out := make([]byte, 128*tb)
				for i := range out {
					out[i] = 0xAA // unpack must overwrite everything
				}
				unpackChunk(tb, w, packed, out)
				want := valuesBytes(tb, vals)
				for i := range vals {
					got := readUint(out[i*tb/8:], tb/8)
					if got != vals[i] {
						t.Fatalf("value %d: got %#x, want %#x", i, got, vals[i])
					}
				}
				if string(out) != string(want) {
					t.Fatal("output bytes differ")
				}
			})
		}
	}
}

// TestFastLanesKnownLayout pins the layout with a hand-checked case: u8 values packed to 1
// bit. Row r of lane l is element r*128 + l (flOrder[0] = 0), so packed byte l holds bit r
// = value r*128+l.
func TestFastLanesKnownLayout(t *testing.T) {
	vals := make([]uint64, 1024)
	vals[0] = 1       // row 0, lane 0 -> byte 0 bit 0
	vals[128*3+5] = 1 // row 3, lane 5 -> byte 5 bit 3
	vals[1023] = 1    // row 7, lane 127 -> byte 127 bit 7
	packed := make([]byte, 128)
	packed[0] = 1
	packed[5] = 1 << 3
	packed[127] = 1 << 7
	if got := refPack(8, 1, vals); string(got) != string(packed) {
		t.Fatalf("reference packer disagrees with the hand-made layout")
	}
	out := make([]byte, 1024)
	unpackChunk(8, 1, packed, out)
	for i, v := range vals {
		if uint64(out[i]) != v {
			t.Fatalf("value %d = %d, want %d", i, out[i], v)
		}
	}
	// u32 packed to 3 bits: row 10 (group 1 -> flOrder 4 -> 64, (10%8)*128 = 256), lane 7
	// is element 327; its bits are 30..32 of lane 7's stream: bits 30,31 of word 0 and
	// bit 0 of word 1.
	vals = make([]uint64, 1024)
	vals[327] = 0b101
	packed = make([]byte, 128*3)
	binary.LittleEndian.PutUint32(packed[7*4:], 1<<30)     // bit 0 of the value
	binary.LittleEndian.PutUint32(packed[(32+7)*4:], 1<<0) // bit 2 of the value
	if got := refPack(32, 3, vals); string(got) != string(packed) {
		t.Fatalf("reference packer disagrees with the hand-made u32 layout")
	}
	out = make([]byte, 4096)
	unpackChunk(32, 3, packed, out)
	if got := binary.LittleEndian.Uint32(out[327*4:]); got != 0b101 {
		t.Fatalf("element 327 = %#b, want 0b101", got)
	}
}
