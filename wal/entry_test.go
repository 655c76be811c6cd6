package wal

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
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
