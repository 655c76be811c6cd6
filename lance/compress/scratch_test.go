package compress

import (
	"bytes"
	pb "github.com/lancectx/lancectx/lance/format/encodings21pb"
	"testing"
)

// TestMiniBlockScratch21: chunks of plain and FSST-compressed strings decoded one after
// another through one Scratch give the values MiniBlock gives, whatever the order of
// large and small chunks (the scratch grows and is reused), and a chunk's values stay
// right up to the next decode.
func TestMiniBlockScratch21(t *testing.T) {
	for _, tc := range []struct {
		n     int
		width int
		fsst  bool
	}{{100, 32, false}, {300, 64, false}, {20000, 32, true}, {20000, 64, true}} {
		offsets, data, vals := encTestStrings(tc.n, uint64(tc.n), false)
		mb, err := EncodeMiniBlockVariable(offsets, data, tc.width, true)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := mb.Encoding.Compression.(*pb.CompressiveEncoding_Fsst); ok != tc.fsst {
			t.Fatalf("n=%d: FSST %v, want %v", tc.n, ok, tc.fsst)
		}
		dec, err := NewDecoder(mb.Encoding)
		if err != nil {
			t.Fatal(err)
		}
		first := make([]int, len(mb.Chunks))
		for ci := 1; ci < len(mb.Chunks); ci++ {
			first[ci] = first[ci-1] + mb.Chunks[ci-1].N
		}
		// Forward, then the last (smallest) chunk first and the others backwards.
		order := make([]int, 0, 2*len(mb.Chunks))
		for ci := range mb.Chunks {
			order = append(order, ci)
		}
		for ci := len(mb.Chunks) - 1; ci >= 0; ci-- {
			order = append(order, ci)
		}
		var s Scratch
		for _, ci := range order {
			c := mb.Chunks[ci]
			got, err := dec.MiniBlockScratch(c.Buffers, uint64(c.N), &s)
			if err != nil {
				t.Fatalf("n=%d chunk %d: %v", tc.n, ci, err)
			}
			want, err := dec.MiniBlock(c.Buffers, uint64(c.N))
			if err != nil {
				t.Fatal(err)
			}
			if got.N != want.N || len(got.Offsets) != len(want.Offsets) {
				t.Fatalf("n=%d chunk %d: %d values (%d offsets), MiniBlock %d (%d)", tc.n, ci, got.N, len(got.Offsets), want.N, len(want.Offsets))
			}
			for i := 0; i < c.N; i++ {
				v := got.Data[got.Offsets[i]:got.Offsets[i+1]]
				if !bytes.Equal(v, vals[first[ci]+i]) {
					t.Fatalf("n=%d width %d chunk %d value %d = %q, want %q", tc.n, tc.width, ci, i, v, vals[first[ci]+i])
				}
			}
		}
	}
}
