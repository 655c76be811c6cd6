package lance

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"testing"

	"github.com/lancectx/lancectx/objstore"
)

// countingStore counts the bytes range reads ask for.
type countingStore struct {
	objstore.Store
	bytes atomic.Int64
}

func (c *countingStore) GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	c.bytes.Add(length)
	return c.Store.GetRange(ctx, key, off, length)
}

// TestFilteredScanReadsOtherColumnsOnlyForMatches: a scan whose filter reads fewer
// columns than it returns gives the same rows as filtering everything, and a point
// lookup reads the other columns of the matching batch only.
func TestFilteredScanReadsOtherColumnsOnlyForMatches(t *testing.T) {
	ctx := context.Background()
	cs := &countingStore{Store: objstore.NewMem()}
	ds, err := WriteStore(ctx, cs, reader(testRows(0, 10000)), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 10; i++ {
		if ds, err = ds.Append(ctx, reader(testRows(i*10000, 10000)), WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if ds, _, err = ds.Delete(ctx, "id = 43210 OR (id >= 70000 AND id < 70100)"); err != nil {
		t.Fatal(err)
	}
	cols := []string{"name", "id", "tags", "score", RowIDColumn}
	render := func(filter string) []string {
		t.Helper()
		recs, err := ds.Collect(ctx, ScanOptions{Columns: cols, Filter: filter, BatchSize: 3000})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range recs {
			for i := 0; i < int(r.NumRows()); i++ {
				out = append(out, fmt.Sprintf("%v|%v|%v|%v|%v", r.Column(0).ValueStr(i), r.Column(1).ValueStr(i),
					r.Column(2).ValueStr(i), r.Column(3).ValueStr(i), r.Column(4).ValueStr(i)))
			}
			r.Release()
		}
		return out
	}
	all := render("")
	// The same rows, filtered in Go from the unfiltered scan: score = id/4, and every
	// seventh name is null.
	var want []string
	for _, row := range all {
		var id int
		if _, err := fmt.Sscanf(splitField(row, 1), "%d", &id); err != nil {
			t.Fatal(err)
		}
		if id > 25000 && id%7 == 0 {
			want = append(want, row)
		}
	}
	got := render("score > 6250 AND name IS NULL")
	if len(want) < 100 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("late materialized scan: %d rows, want %d\n got %.300v\nwant %.300v", len(got), len(want), got, want)
	}

	cs.bytes.Store(0)
	if rows := render(""); len(rows) != 99899 {
		t.Fatalf("full scan: %d rows", len(rows))
	}
	full := cs.bytes.Load()
	cs.bytes.Store(0)
	if rows := render("id = 55555"); len(rows) != 1 {
		t.Fatalf("point lookup: %v", rows)
	}
	point := cs.bytes.Load()
	if point*2 > full {
		t.Fatalf("a point lookup read %d bytes, a full scan %d: the other columns were read for every batch", point, full)
	}
	t.Logf("bytes read: full scan %d, point lookup %d", full, point)
}

// splitField returns the i-th '|'-separated field of s.
func splitField(s string, i int) string {
	start := 0
	for n := 0; ; n++ {
		end := start
		for end < len(s) && s[end] != '|' {
			end++
		}
		if n == i {
			return s[start:end]
		}
		if end == len(s) {
			return ""
		}
		start = end + 1
	}
}
