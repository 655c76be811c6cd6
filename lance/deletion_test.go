package lance

import (
	"errors"
	"os"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/lancectx/lancectx/lance/format/tablepb"
)

func TestDeletionFileFormsRoundTrip(t *testing.T) {
	for _, n := range []int{1, 5000, 5001, 70000} {
		bm := roaring.New()
		for i := 0; i < n; i++ {
			bm.Add(uint32(i * 3))
		}
		typ, buf, err := encodeDeletionFile(bm)
		if err != nil {
			t.Fatal(err)
		}
		wantTyp := tablepb.DeletionFile_ARROW_ARRAY
		if n > deletionSetThreshold {
			wantTyp = tablepb.DeletionFile_BITMAP
		}
		if typ != wantTyp {
			t.Errorf("%d rows stored as %v, want %v", n, typ, wantTyp)
		}
		got, err := decodeDeletionFile("d", typ, buf)
		if err != nil {
			t.Fatal(err)
		}
		if !got.Equals(bm) {
			t.Fatalf("%d rows: round trip differs", n)
		}
	}
}

// TestDecodeLanceDBDeletionFile reads a deletion file written by LanceDB 0.31 (arrow-rs:
// stream aligned to 64 bytes, ZSTD body compression) for a delete of ids 0..9.
func TestDecodeLanceDBDeletionFile(t *testing.T) {
	buf, err := os.ReadFile("testdata/deletion/lancedb-0.31.arrow")
	if err != nil {
		t.Fatal(err)
	}
	bm, err := decodeDeletionFile("x", tablepb.DeletionFile_ARROW_ARRAY, buf)
	if err != nil {
		t.Fatal(err)
	}
	if got := bm.ToArray(); len(got) != 10 || got[0] != 0 || got[9] != 9 {
		t.Fatalf("deleted rows %v", got)
	}
}

func FuzzDecodeDeletionFile(f *testing.F) {
	if lancedb, err := os.ReadFile("testdata/deletion/lancedb-0.31.arrow"); err == nil {
		f.Add(uint8(0), lancedb)
	}
	small := roaring.BitmapOf(1, 5, 9)
	_, arrowBuf, _ := encodeDeletionFile(small)
	large := roaring.New()
	large.AddRange(0, 6000)
	_, binBuf, _ := encodeDeletionFile(large)
	f.Add(uint8(0), arrowBuf)
	f.Add(uint8(1), binBuf)
	f.Add(uint8(1), []byte{0x3a, 0x30, 0, 0})
	f.Add(uint8(0), []byte("ARROW1\x00\x00"))
	f.Fuzz(func(t *testing.T, typ uint8, b []byte) {
		bm, err := decodeDeletionFile("fuzz", tablepb.DeletionFile_DeletionFileType(typ%3), b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		_ = bm.GetCardinality()
	})
}
