package lance

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lancectx/lancectx/objstore"
)

// lookupByScan is the reference: the first row in table order with column = lit.
func lookupByScan(t *testing.T, ds *Dataset, filter string, cols []string) string {
	t.Helper()
	recs, err := ds.Collect(context.Background(), ScanOptions{Columns: cols, Filter: filter, Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	for _, r := range recs {
		if r.NumRows() > 0 {
			return recString(r.NewSlice(0, 1))
		}
	}
	return "<none>"
}

// recString renders the first row of r.
func recString(r arrow.RecordBatch) string {
	var sb strings.Builder
	for i := range int(r.NumCols()) {
		fmt.Fprintf(&sb, "%s=%s|", r.ColumnName(i), r.Column(i).ValueStr(0))
	}
	return sb.String()
}

// TestLookupKeyMatchesFilteredScan: over appended fragments, a compaction and deletes,
// LookupKey answers what a filtered scan answers, for integer and string keys,
// present, deleted and absent; the second round of lookups reads no key column.
func TestLookupKeyMatchesFilteredScan(t *testing.T) {
	ctx := context.Background()
	cs := &countingStore{Store: objstore.NewMem()}
	ds, err := WriteStore(ctx, cs, reader(testRows(0, 30000)), WriteOptions{MaxRowsPerFile: 12000})
	if err != nil {
		t.Fatal(err)
	}
	for i := 3; i < 6; i++ {
		if ds, err = ds.Append(ctx, reader(testRows(i*10000, 10000)), WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if ds, _, err = ds.Compact(ctx, CompactOptions{TargetRowsPerFragment: 25000}); err != nil {
		t.Fatal(err)
	}
	if ds, err = ds.Append(ctx, reader(testRows(60000, 5000)), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	if ds, _, err = ds.Delete(ctx, "id = 43210 OR (id >= 7000 AND id < 7100) OR id = 64999"); err != nil {
		t.Fatal(err)
	}
	cols := []string{"name", "id", "score", "tags"}
	cache := NewKeyCache(64 << 20)
	rng := rand.New(rand.NewPCG(1, 2))
	keys := []int{0, 1, 7000, 7050, 7100, 43210, 43211, 59999, 60000, 64998, 64999, 65000, 1 << 40}
	for range 60 {
		keys = append(keys, rng.IntN(70000))
	}
	check := func(round int) {
		t.Helper()
		for _, id := range keys {
			for _, k := range []struct{ col, key, filter string }{
				{"id", fmt.Sprint(id), fmt.Sprintf("id = %d", id)},
				{"name", fmt.Sprintf("name-%d", id), fmt.Sprintf("name = 'name-%d'", id)},
			} {
				want := lookupByScan(t, ds, k.filter, cols)
				rec, ok, err := ds.LookupKey(ctx, cache, "t", k.col, k.key, cols)
				if err != nil {
					t.Fatalf("LookupKey(%s = %s): %v", k.col, k.key, err)
				}
				got := "<none>"
				if ok {
					if rec.NumRows() != 1 || rec.NumCols() != int64(len(cols)) {
						t.Fatalf("LookupKey(%s = %s): %d rows, %d columns", k.col, k.key, rec.NumRows(), rec.NumCols())
					}
					got = recString(rec)
					rec.Release()
				}
				if got != want {
					t.Errorf("round %d: LookupKey(%s = %s) = %s, scan gives %s", round, k.col, k.key, got, want)
				}
			}
		}
	}
	check(1)
	st := cache.Stats()
	frags := int64(len(ds.Fragments()))
	if st.Indexes != 2*frags || st.Misses != 2*frags || st.Bytes <= 0 || st.Bytes > st.MaxBytes {
		t.Errorf("after round 1: %+v, want %d indexes built once each", st, 2*frags)
	}
	// Second round: the indexes are cached, so a lookup reads only its row. Compare
	// the bytes a lookup of the key column alone reads with what the filtered scan
	// reads: the whole key column, here 8 bytes x 65k rows.
	probe := keys[len(keys)-20:]
	cs.bytes.Store(0)
	for _, id := range probe {
		lookupByScan(t, ds, fmt.Sprintf("id = %d", id), []string{"id"})
	}
	scanBytes := cs.bytes.Load() / int64(len(probe))
	cs.bytes.Store(0)
	for _, id := range probe {
		rec, ok, err := ds.LookupKey(ctx, cache, "t", "id", fmt.Sprint(id), []string{"id"})
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			rec.Release()
		}
	}
	lookupBytes := cs.bytes.Load() / int64(len(probe))
	if got := cache.Stats(); got.Misses != st.Misses {
		t.Errorf("round 2 built %d more indexes", got.Misses-st.Misses)
	}
	t.Logf("per lookup of id: filtered scan reads %d bytes, cached LookupKey %d; index of %d rows x 2 columns: %d bytes",
		scanBytes, lookupBytes, ds.CountRows(), st.Bytes)
	// The scan reads the whole key column: 8 bytes a row in 2.0, bitpacked in 2.1 (about
	// 5.8 bytes a row for these ids), so at least 4 bytes a row either way.
	if scanBytes < 4*60000 || lookupBytes*3 > scanBytes {
		t.Errorf("a cached lookup read %d bytes, the scan %d: want under a third", lookupBytes, scanBytes)
	}
	check(2)

	// LookupKeys answers each key as LookupKey does, duplicates included.
	for _, col := range []string{"id", "name"} {
		var batch []string
		for _, id := range append(keys, keys[0]) {
			if col == "id" {
				batch = append(batch, fmt.Sprint(id))
			} else {
				batch = append(batch, fmt.Sprintf("name-%d", id))
			}
		}
		recs, err := ds.LookupKeys(ctx, cache, "t", col, batch, cols)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != len(batch) {
			t.Fatalf("LookupKeys: %d answers for %d keys", len(recs), len(batch))
		}
		for i, k := range batch {
			want := "<none>"
			if rec, ok, err := ds.LookupKey(ctx, cache, "t", col, k, cols); err != nil {
				t.Fatal(err)
			} else if ok {
				want = recString(rec)
				rec.Release()
			}
			got := "<none>"
			if recs[i] != nil {
				got = recString(recs[i])
				recs[i].Release()
			}
			if got != want {
				t.Errorf("LookupKeys(%s = %s) = %s, LookupKey gives %s", col, k, got, want)
			}
		}
	}
}

// TestKeyCacheBoundAndConcurrency: under a bound smaller than the indexes, lookups
// from many goroutines stay correct and the cache stays within its bound.
func TestKeyCacheBoundAndConcurrency(t *testing.T) {
	ctx := context.Background()
	ds, err := WriteStore(ctx, objstore.NewMem(), reader(testRows(0, 20000)), WriteOptions{MaxRowsPerFile: 2500})
	if err != nil {
		t.Fatal(err)
	}
	cache := NewKeyCache(60 << 10) // a few of the eight 2500-row indexes
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 9))
			for range 200 {
				id := rng.IntN(21000)
				rec, ok, err := ds.LookupKey(ctx, cache, "t", "id", fmt.Sprint(id), []string{"id", "score"})
				if err != nil {
					errs <- err
					return
				}
				if ok != (id < 20000) {
					errs <- fmt.Errorf("id %d: found %v", id, ok)
					return
				}
				if ok {
					if v := rec.Column(0).ValueStr(0); v != fmt.Sprint(id) {
						errs <- fmt.Errorf("id %d: got row %s", id, v)
					}
					rec.Release()
				}
				if st := cache.Stats(); st.Bytes > st.MaxBytes {
					errs <- fmt.Errorf("cache holds %d bytes over its bound %d", st.Bytes, st.MaxBytes)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	st := cache.Stats()
	if st.Evictions == 0 || st.Indexes == 0 || st.Indexes >= 8 {
		t.Errorf("stats %+v: want some indexes cached and some evicted", st)
	}
}

// TestKeyCachePrunesRewrittenFiles: a lookup on a newer version drops the scope's
// indexes of data files that version no longer has; DropScope drops the rest, and
// another scope's indexes stay.
func TestKeyCachePrunesRewrittenFiles(t *testing.T) {
	ctx := context.Background()
	ds, err := WriteStore(ctx, objstore.NewMem(), reader(testRows(0, 8000)), WriteOptions{MaxRowsPerFile: 1000})
	if err != nil {
		t.Fatal(err)
	}
	other, err := WriteStore(ctx, objstore.NewMem(), reader(testRows(0, 3000)), WriteOptions{MaxRowsPerFile: 1000})
	if err != nil {
		t.Fatal(err)
	}
	cache := NewKeyCache(64 << 20)
	lookup := func(d *Dataset, scope string, id int) {
		t.Helper()
		rec, ok, err := d.LookupKey(ctx, cache, scope, "id", fmt.Sprint(id), []string{"id"})
		if err != nil || !ok {
			t.Fatalf("lookup %d in %s: %v %v", id, scope, ok, err)
		}
		rec.Release()
	}
	lookup(ds, "a", 7999)
	lookup(other, "b", 2999)
	if st := cache.Stats(); st.Indexes != 8+3 {
		t.Fatalf("%d indexes, want 11", st.Indexes)
	}
	compacted, _, err := ds.Compact(ctx, CompactOptions{TargetRowsPerFragment: 4000})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(compacted.Fragments()); n != 2 {
		t.Fatalf("compaction left %d fragments, want 2", n)
	}
	lookup(compacted, "a", 7998) // in the last fragment: every index is built
	before := cache.Stats()
	if before.Indexes != 2+3 {
		t.Errorf("after the lookup on the compacted version: %d indexes, want 5 (2 new + 3 of scope b)", before.Indexes)
	}
	lookup(ds, "a", 7997) // an older snapshot still works, and does not prune the newer
	lookup(compacted, "a", 7996)
	if st := cache.Stats(); st.Indexes != 2+3+8 {
		t.Errorf("after a lookup on the old version: %d indexes, want 13", st.Indexes)
	}
	cache.DropScope("a")
	if st := cache.Stats(); st.Indexes != 3 || st.Bytes <= 0 {
		t.Errorf("after DropScope: %+v, want the 3 indexes of scope b", st)
	}
	cache.DropScope("b")
	if st := cache.Stats(); st.Indexes != 0 || st.Bytes != 0 {
		t.Errorf("after dropping every scope: %+v, want empty", st)
	}
}

// BenchmarkGetByKey compares a point read by a string key on a 1M-row table of 10
// fragments: a filtered scan (what LanceDB does without a scalar index) against
// LookupKey with a warm cache.
//
//	go test -run '^$' -bench BenchmarkGetByKey -benchmem ./lance
func BenchmarkGetByKey(b *testing.B) {
	ctx := context.Background()
	ds, err := WriteStore(ctx, objstore.NewMem(), reader(testRows(0, 100000)), WriteOptions{})
	if err != nil {
		b.Fatal(err)
	}
	for i := 1; i < 10; i++ {
		if ds, err = ds.Append(ctx, reader(testRows(i*100000, 100000)), WriteOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	cols := []string{"id", "name", "score"}
	key := func(i int) int { // an id whose name is not null (every 7th is)
		k := (i * 7919) % 1000000
		if k%7 == 0 {
			k++
		}
		return k
	}
	b.Run("scan", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			recs, err := ds.Collect(ctx, ScanOptions{Columns: cols, Filter: fmt.Sprintf("name = 'name-%d'", key(i)), Limit: 1})
			if err != nil || len(recs) == 0 {
				b.Fatal(err)
			}
			for _, r := range recs {
				r.Release()
			}
		}
	})
	b.Run("LookupKey", func(b *testing.B) {
		cache := NewKeyCache(256 << 20)
		if _, _, err := ds.LookupKey(ctx, cache, "t", "name", "warm-up", cols); err != nil {
			b.Fatal(err)
		}
		for i := 0; b.Loop(); i++ {
			rec, ok, err := ds.LookupKey(ctx, cache, "t", "name", fmt.Sprintf("name-%d", key(i)), cols)
			if err != nil || !ok {
				b.Fatal(ok, err)
			}
			rec.Release()
		}
		b.ReportMetric(float64(cache.Stats().Bytes), "index-bytes")
	})
}
