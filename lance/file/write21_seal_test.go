package file

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lancectx/lancectx/lance/schema"
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

// TestW21DictionaryEncodeLookalikes gives the encoder long values that differ only
// where its fingerprint does not look (same length, first, middle and last spans):
// a few of them (chained, compared byte for byte) and many (past w21MaxChain, the
// exact fallback). Both must encode like the exact encoder and decode to the page.
func TestW21DictionaryEncodeLookalikes(t *testing.T) {
	for _, distinct := range []int{3, w21MaxChain + 5} {
		base := bytes.Repeat([]byte("abcdefgh"), 40) // 320 bytes
		vals := make([][]byte, distinct)
		for i := range vals {
			v := bytes.Clone(base)
			v[40] = byte('A' + i) // outside the sampled spans
			vals[i] = v
		}
		seed := maphash.MakeSeed()
		if w21Fingerprint(seed, vals[0]) != w21Fingerprint(seed, vals[1]) {
			t.Fatal("the lookalikes do not share a fingerprint; the test no longer tests chains")
		}
		offsets := []uint64{0}
		var data []byte
		for i := range 1000 {
			data = append(data, vals[(i*7)%distinct]...)
			offsets = append(offsets, uint64(len(data)))
		}
		n := len(offsets) - 1
		limit := w21DictMaxRatio * float64(offsets[n]+uint64(8*(n+1)))
		idx, items, ok := w21DictionaryEncode(offsets, data, 8)
		xidx, xitems, xok := w21DictionaryEncodeExact(offsets, data, 8, limit)
		if !ok || !xok {
			t.Fatalf("distinct=%d: dictionary not chosen (%v, exact %v)", distinct, ok, xok)
		}
		if got := len(items.offsets) - 1; got != distinct {
			t.Fatalf("distinct=%d: dictionary of %d values", distinct, got)
		}
		if !bytes.Equal(idx, xidx) || !bytes.Equal(items.data, xitems.data) {
			t.Fatalf("distinct=%d: encodings differ from the exact one", distinct)
		}
		for i := range n {
			k := w21ReadUint(idx[i*8:], 8)
			if !bytes.Equal(items.data[items.offsets[k]:items.offsets[k+1]], data[offsets[i]:offsets[i+1]]) {
				t.Fatalf("distinct=%d: value %d decodes wrong", distinct, i)
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

// TestWrite21PooledBuffers writes files one after another, as seals do, so that each
// writer may take the page buffers the previous one released: the same rows make the
// same bytes every time, and other rows written in between (another shape, other
// sizes) read back as written.
func TestWrite21PooledBuffers(t *testing.T) {
	recs := sealBatches(t, 30, 100)
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	s, err := schema.FromArrow(recs[0].Schema())
	if err != nil {
		t.Fatal(err)
	}
	opts := WriterOptions{Version: V2_1, PageRows: 1000}
	first, _ := writeFile(t, s, opts, recs...)
	other, _ := rolloutBatch(2000, 3)
	defer other.Release()
	os, err := schema.FromArrow(other.Schema())
	if err != nil {
		t.Fatal(err)
	}
	for round := range 3 {
		again, _ := writeFile(t, s, opts, recs...)
		if !bytes.Equal(first, again) {
			t.Fatalf("round %d: the same rows made a different file", round)
		}
		data, _ := writeFile(t, os, WriterOptions{Version: V2_1}, other)
		r, err := Open(context.Background(), BytesSource(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.Read(context.Background(), topIDs(r.Schema()), 0, uint64(other.NumRows()))
		if err != nil {
			t.Fatal(err)
		}
		if !array.RecordEqual(got, other) {
			t.Fatalf("round %d: rows read back differ from those written", round)
		}
		got.Release()
	}
	// Seals of several shards run at once: concurrent writers share the pool.
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Go(func() {
			for range 3 {
				var buf bytes.Buffer
				w, err := NewWriter(&buf, s, opts)
				if err != nil {
					errs <- err
					return
				}
				for _, r := range recs {
					if err := w.Write(r); err != nil {
						errs <- err
						return
					}
				}
				if _, err := w.Close(); err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(buf.Bytes(), first) {
					errs <- errors.New("a concurrent writer made a different file")
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
