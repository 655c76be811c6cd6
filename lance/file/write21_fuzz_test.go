package file

import (
	"bytes"
	"encoding/binary"
	mrand "math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lancectx/lancectx/lance/schema"
)

// FuzzWrite21 writes random batches of every type and nesting (the fuzz input picks
// the seed, the null rate, the batch sizes and the page limits) in format 2.1: the
// writer must never fail or panic on valid input, its levels must account for every
// value (computeLevels checks it), and the file must parse. The same batches of the
// null type and nested fixed-size lists (newTypesSchema) must also read back as written.
func FuzzWrite21(f *testing.F) {
	f.Add([]byte{1, 5, 30, 0, 7, 0, 0, 1})
	f.Add([]byte{2, 1, 200, 3, 1, 0, 5, 0})
	f.Add([]byte{3, 2, 1, 1, 1, 1, 0, 0})
	as := allTypesSchema()
	s, err := schema.FromArrow(as)
	if err != nil {
		f.Fatal(err)
	}
	nt := newTypesSchema()
	ns, err := schema.FromArrow(nt)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) >= 8 {
			fuzzWriteNewTypes21(t, nt, ns, in)
		}
		if len(in) < 8 {
			return
		}
		seed := binary.LittleEndian.Uint16(in)
		nulls := int(in[2]%8) + 1
		pageBytes := int(in[3]) * 64
		pageRows := int(in[4] % 16)
		g := &gen{rng: mrand.New(mrand.NewPCG(uint64(seed), 21)), mem: memory.DefaultAllocator, nulls: nulls}
		var recs []arrow.RecordBatch
		rows := 0
		for _, b := range in[5:min(len(in), 9)] {
			n := int(b % 64)
			rows += n
			recs = append(recs, g.record(as, n))
		}
		defer func() {
			for _, r := range recs {
				r.Release()
			}
		}()
		var buf bytes.Buffer
		w, err := NewWriter(&buf, s, WriterOptions{Version: V2_1, PageBytes: pageBytes, PageRows: pageRows})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if err := w.Write(r); err != nil {
				t.Fatalf("Write: %v", err)
			}
		}
		info, err := w.Close()
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
		if info.Rows != uint64(rows) || info.Size != uint64(buf.Len()) {
			t.Fatalf("FileInfo %+v for %d rows, %d bytes", info, rows, buf.Len())
		}
		w21Inspect(t, buf.Bytes())
	})
}

// fuzzWriteNewTypes21 is FuzzWrite21 for newTypesSchema, reading the file back.
func fuzzWriteNewTypes21(t *testing.T, as *arrow.Schema, s *schema.Schema, in []byte) {
	g := &gen{rng: mrand.New(mrand.NewPCG(uint64(binary.LittleEndian.Uint16(in)), 22)), mem: memory.DefaultAllocator, nulls: int(in[2]%8) + 1}
	var recs []arrow.RecordBatch
	var want []map[string]any
	for _, b := range in[5:min(len(in), 9)] {
		r := g.record(as, int(b%64))
		recs = append(recs, r)
		want = append(want, w21CanonRows(t, r)...)
	}
	opts := WriterOptions{Version: V2_1, PageBytes: int(in[3]) * 64, PageRows: int(in[4] % 16)}
	data, info := writeFile(t, s, opts, recs...)
	for _, r := range recs {
		r.Release()
	}
	w21Inspect(t, data)
	r := openBytes(t, data)
	rec, err := r.Read(t.Context(), topIDs(r.Schema()), 0, info.Rows)
	if err != nil {
		t.Fatalf("read back: %v", err)
	}
	defer rec.Release()
	if err := validateRecord(rec); err != nil {
		t.Fatal(err)
	}
	compareRows(t, "read back", w21CanonRows(t, rec), want)
}
