package fts

import (
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/lancectx/lancectx/ctxstore"
)

func TestSegmentBuildEncodeDecode(t *testing.T) {
	b := NewBuilder()
	b.AddFragment(Fragment{ID: 0, Rows: 3, DataFile: "a.lance"})
	b.AddFragment(Fragment{ID: 2, Rows: 1, DataFile: "b.lance"})
	exp := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, r := range []struct {
		addr       uint64
		id, text   string
		exp        *time.Time
		tomb, retd bool
	}{
		{0, "a", "The quick brown fox", nil, false, false},
		{2, "b", "quick QUICK quick", &exp, false, false},
		{2<<32 | 0, "c", "", nil, true, false},
		{2<<32 | 5, "d", "fox", nil, false, true},
	} {
		if err := b.Add(r.addr, r.id, r.text, r.exp, r.tomb, r.retd); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Add(1, "late", "x", nil, false, false); err == nil {
		t.Fatal("an address out of order was accepted")
	}
	seg := b.Segment()
	buf, err := seg.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeSegment(buf)
	if err != nil {
		t.Fatal(err)
	}
	docs, tf := got.Postings("quick")
	if !slices.Equal(docs, []uint32{0, 1}) || !slices.Equal(tf, []uint32{1, 3}) {
		t.Fatalf("quick: %v %v", docs, tf)
	}
	if d, _ := got.Postings("missing"); d != nil {
		t.Fatalf("missing: %v", d)
	}
	if !slices.Equal(got.Len, []uint32{4, 3, 0, 1}) || got.Expires[0] != math.MaxInt64 || got.Expires[1] != exp.UnixMicro() {
		t.Fatalf("lengths %v, expiries %v", got.Len, got.Expires)
	}
	if lo, hi := got.DocsOf(2); lo != 2 || hi != 4 {
		t.Fatalf("fragment 2 holds documents [%d, %d)", lo, hi)
	}
	f := ctxstore.Filter{}
	now := exp.UnixMicro()
	if !got.Live(0, f, now) || got.Live(1, f, now) || got.Live(2, f, now) || got.Live(3, f, now) {
		t.Fatal("Live without include flags")
	}
	f.IncludeExpired, f.IncludeRetired = true, true
	if !got.Live(1, f, now) || got.Live(2, f, now) || !got.Live(3, f, now) {
		t.Fatal("Live with include flags (a tombstone is never live)")
	}

	// Every flipped byte is caught: by the magic, the checksum or the decoder.
	for _, i := range []int{0, len(segmentMagic) + 3, len(buf) / 2, len(buf) - 1} {
		bad := slices.Clone(buf)
		bad[i] ^= 0x40
		if _, err := DecodeSegment(bad); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("byte %d flipped: %v", i, err)
		}
	}
	if _, err := DecodeSegment(buf[:len(buf)-5]); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("truncated: %v", err)
	}
}
