package file

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestW21DictionaryEncodePaths checks the one-pass dictionary encoder (hash-numbered)
// against the exact one it falls back to on a hash collision: the same decision, the
// same indices, the same dictionary in first-seen order, whatever the cardinality,
// offset width and value lengths (empty values included).
func TestW21DictionaryEncodePaths(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, distinct := range []int{1, 2, 5, 40, 300, 5000} {
		for _, w := range []int{4, 8} {
			for _, n := range []int{99, 100, 1000, 4096} {
				vals := make([][]byte, distinct)
				for i := range vals {
					vals[i] = fmt.Appendf(nil, "v%0*d", rng.IntN(12), i)
					if i == 0 {
						vals[i] = nil // an empty value
					}
				}
				offsets := []uint64{0}
				var data []byte
				for range n {
					data = append(data, vals[rng.IntN(distinct)]...)
					offsets = append(offsets, uint64(len(data)))
				}
				limit := w21DictMaxRatio * float64(offsets[n]+uint64(w*(n+1)))
				idx, items, ok := w21DictionaryEncode(offsets, data, w)
				if n < w21DictMinValues {
					if ok {
						t.Fatalf("n=%d: dictionary-encoded below %d values", n, w21DictMinValues)
					}
					continue
				}
				xidx, xitems, xok := w21DictionaryEncodeExact(offsets, data, w, limit)
				name := fmt.Sprintf("distinct=%d w=%d n=%d", distinct, w, n)
				if ok != xok {
					t.Fatalf("%s: one-pass says %v, exact says %v", name, ok, xok)
				}
				if !ok {
					continue
				}
				if !bytes.Equal(idx, xidx) || !bytes.Equal(items.data, xitems.data) || fmt.Sprint(items.offsets) != fmt.Sprint(xitems.offsets) {
					t.Fatalf("%s: one-pass and exact encodings differ", name)
				}
				// And the encoding decodes to the page.
				for i := range n {
					k := w21ReadUint(idx[i*w:], w)
					got := items.data[items.offsets[k]:items.offsets[k+1]]
					if !bytes.Equal(got, data[offsets[i]:offsets[i+1]]) {
						t.Fatalf("%s: value %d decodes to %q, want %q", name, i, got, data[offsets[i]:offsets[i+1]])
					}
				}
			}
		}
	}
}

func w21ReadUint(b []byte, w int) uint64 {
	var v uint64
	for i := w - 1; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}
