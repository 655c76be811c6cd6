package wal

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

func validEntry(t testing.TB) []byte {
	t.Helper()
	buf, err := encodeEntry(testSchema, "shard-a", 3, 7, []arrow.RecordBatch{makeBatch(row{id: "a", n: 1}, row{id: "b", n: 2})})
	if err != nil {
		t.Fatal(err)
	}
	return buf
}

// TestEntryChecksum: an entry reads back as written, and any flipped byte, torn tail
// or missing trailer is ErrCorruptEntry before the IPC decoder sees the bytes.
func TestEntryChecksum(t *testing.T) {
	buf := validEntry(t)
	e, err := decodeEntry("k", buf, testSchema)
	if err != nil {
		t.Fatal(err)
	}
	if e.seq != 7 || e.epoch != 3 || e.rows != 2 {
		t.Fatalf("decoded seq %d epoch %d rows %d", e.seq, e.epoch, e.rows)
	}
	e.release()
	for _, i := range []int{0, len(buf) / 3, len(buf) / 2, len(buf) - trailerLen - 1, len(buf) - 6, len(buf) - 1} {
		bad := append([]byte(nil), buf...)
		bad[i] ^= 0x40
		if _, err := decodeEntry("k", bad, testSchema); !errors.Is(err, ErrCorruptEntry) {
			t.Errorf("byte %d of %d flipped: %v", i, len(buf), err)
		}
	}
	for _, n := range []int{0, 3, trailerLen, len(buf) / 2, len(buf) - 1} {
		if _, err := decodeEntry("k", buf[:n], testSchema); !errors.Is(err, ErrCorruptEntry) {
			t.Errorf("entry cut to %d bytes: %v", n, err)
		}
	}
}

// FuzzDecodeEntry: whatever the bytes of an entry object, decoding is an entry or
// ErrCorruptEntry, never a panic or a runaway allocation.
func FuzzDecodeEntry(f *testing.F) {
	buf := validEntry(f)
	f.Add(buf)
	f.Add(buf[:len(buf)-trailerLen])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := decodeEntry("k", b, testSchema)
		if err != nil {
			if !errors.Is(err, ErrCorruptEntry) {
				t.Fatalf("not ErrCorruptEntry: %v", err)
			}
			return
		}
		e.release()
	})
}

// TestEntryEncoderHeader: the encoder's cached schema message with patched sequence
// digits gives the very bytes ipc.Writer writes for that entry, for every sequence
// number, and the entries decode with their own number.
func TestEntryEncoderHeader(t *testing.T) {
	enc, err := newEntryEncoder(testSchema, "shard-a", 3)
	if err != nil {
		t.Fatal(err)
	}
	if enc.header == nil {
		t.Fatal("the encoder found no sequence digits in its schema message: every entry takes the slow path")
	}
	recs := []arrow.RecordBatch{makeBatch(row{id: "a", n: 1}, row{id: "b", n: 2}), makeBatch(row{id: "c", n: 3})}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	for _, seq := range []uint64{0, 1, 7, 10, 99999, 1 << 40, math.MaxUint64} {
		got, err := enc.encode(seq, recs)
		if err != nil {
			t.Fatal(err)
		}
		want, err := enc.encodeWriter(seq, recs, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("seq %d: the cached header gives %d bytes that differ from ipc.Writer's %d", seq, len(got), len(want))
		}
		e, err := decodeEntry("k", got, testSchema)
		if err != nil {
			t.Fatal(err)
		}
		if e.seq != seq || e.epoch != 3 || e.rows != 3 {
			t.Errorf("seq %d decoded as seq %d epoch %d rows %d", seq, e.seq, e.epoch, e.rows)
		}
		e.release()
	}
}

// TestEntryEncoderDictionary: with a dictionary column (as the rollout role), the
// encoder reuses the dictionary messages of the last entry ipc.Writer wrote while the
// dictionaries stay equal, with the same bytes as ipc.Writer, and goes back to
// ipc.Writer (and learns again) when a dictionary changes.
func TestEntryEncoderDictionary(t *testing.T) {
	dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.BinaryTypes.String},
		{Name: "role", Type: dt, Nullable: true},
	}, nil)
	batch := func(dict []string, ids ...string) arrow.RecordBatch {
		b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		defer b.Release()
		db := b.Field(1).(*array.BinaryDictionaryBuilder)
		sb := array.NewStringBuilder(memory.DefaultAllocator) // the dictionary in this order, as buildRole makes it
		defer sb.Release()
		sb.AppendValues(dict, nil)
		values := sb.NewStringArray()
		defer values.Release()
		if err := db.InsertStringDictValues(values); err != nil {
			t.Fatal(err)
		}
		for i, id := range ids {
			b.Field(0).(*array.StringBuilder).Append(id)
			if err := db.AppendString(dict[i%len(dict)]); err != nil {
				t.Fatal(err)
			}
		}
		return b.NewRecordBatch()
	}
	enc, err := newEntryEncoder(schema, "shard-d", 2)
	if err != nil || enc.header == nil {
		t.Fatalf("encoder: %v (header cached: %v)", err, enc != nil && enc.header != nil)
	}
	roles := []string{"system", "user", "assistant"}
	entries := [][]arrow.RecordBatch{
		{batch(roles, "a", "b", "c")},
		{batch(roles, "d", "e"), batch(roles, "f")},
		{batch([]string{"user", "tool"}, "g", "h")}, // another dictionary
		{batch([]string{"user", "tool"}, "i")},
		{},
	}
	for seq, recs := range entries {
		learned := enc.dicts != nil
		got, err := enc.encode(uint64(seq), recs)
		if err != nil {
			t.Fatal(err)
		}
		want, err := enc.encodeWriter(uint64(seq), recs, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("entry %d (dictionaries known before: %v): %d bytes differ from ipc.Writer's %d", seq, learned, len(got), len(want))
		}
		e, err := decodeEntry("k", got, schema)
		if err != nil {
			t.Fatal(err)
		}
		var rows int64
		for _, r := range recs {
			rows += r.NumRows()
		}
		if e.seq != uint64(seq) || e.rows != rows {
			t.Errorf("entry %d decoded as seq %d with %d rows, want %d", seq, e.seq, e.rows, rows)
		}
		for i, r := range e.recs {
			if !array.RecordEqual(r, recs[i]) {
				t.Errorf("entry %d batch %d reads back as %v, want %v", seq, i, r, recs[i])
			}
		}
		e.release()
		if seq == 1 && !learned {
			t.Error("the second entry with the same dictionaries did not reuse the first one's messages")
		}
	}
	if enc.dicts == nil || enc.dicts[0].Len() != 2 {
		t.Errorf("after the dictionary changed the encoder keeps %v, want the new dictionary", enc.dicts)
	}
	for _, recs := range entries {
		for _, r := range recs {
			r.Release()
		}
	}
}
