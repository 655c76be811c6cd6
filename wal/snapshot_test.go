package wal

import (
	"context"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lancectx/lancectx/lance"
)

// layeredDataset builds a dataset with rows in every source: base, two generations
// of two shards, and the local memtable, with keys overridden across layers.
func layeredDataset(t *testing.T) (*Shard, map[string]int64, func() *Snapshot) {
	baseIn := rowsOf("k", 0, 30, 0)
	st := memDataset(t, baseIn...)
	want := wantRows(baseIn)
	s := openShard(t, testOptions(st, "w0"))
	other := openShard(t, testOptions(st, "w1"))
	g1 := append(rowsOf("k", 5, 10, 1), rowsOf("s", 0, 10, 1)...)
	appendRows(t, s, g1...)
	flush(t, s)
	g2 := append(rowsOf("k", 8, 12, 2), rowsOf("o", 0, 10, 2)...)
	appendRows(t, other, g2...)
	flush(t, other)
	m := append(rowsOf("k", 11, 14, 3), rowsOf("m", 0, 5, 3)...)
	appendRows(t, s, m...)
	for _, rs := range [][]row{g1, g2, m} {
		for _, r := range rs {
			want[r.id] = r.n
		}
	}
	return s, want, func() *Snapshot {
		sn, err := ReadSnapshot(context.Background(), st, s, ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return sn
	}
}

func TestSnapshotNewestWins(t *testing.T) {
	_, want, snap := layeredDataset(t)
	sn := snap()
	if sn.PendingGenerations() != 2 || sn.MemtableRows() != 8 {
		t.Fatalf("snapshot: %d generations, %d memtable rows", sn.PendingGenerations(), sn.MemtableRows())
	}
	expectKeys(t, scanAll(t, sn, ScanOptions{}), want)
	for _, k := range []string{"k000000", "k000006", "k000009", "k000012", "s000003", "o000004", "m000001"} {
		rec, ok, err := sn.Get(context.Background(), k, []string{"n", "id"})
		if err != nil || !ok {
			t.Fatalf("get %s: %v %v", k, ok, err)
		}
		if rec.NumRows() != 1 || rec.Column(1).(*array.String).Value(0) != k || rec.Column(0).(*array.Int64).Value(0) != want[k] {
			t.Fatalf("get %s: %v", k, rec)
		}
		rec.Release()
	}
	if _, ok, err := sn.Get(context.Background(), "nope", nil); err != nil || ok {
		t.Fatalf("get of a missing key: %v %v", ok, err)
	}
	if _, _, err := sn.Get(context.Background(), "k000001", []string{"nope"}); err == nil {
		t.Fatal("unknown column accepted")
	}
}

// TestSnapshotGetWithKeyCache: Get answers the same with a key cache as by scanning
// the base, before and after the generations are merged into the base (the merge
// deletes the base rows it replaces).
func TestSnapshotGetWithKeyCache(t *testing.T) {
	ctx := context.Background()
	s, want, _ := layeredDataset(t)
	kc := lance.NewKeyCache(1 << 20)
	get := func(sn *Snapshot, k string) string {
		t.Helper()
		rec, ok, err := sn.Get(ctx, k, []string{"id", "n"})
		if err != nil {
			t.Fatalf("get %s: %v", k, err)
		}
		if !ok {
			return "<none>"
		}
		defer rec.Release()
		return fmt.Sprintf("%s=%d", rec.Column(0).(*array.String).Value(0), rec.Column(1).(*array.Int64).Value(0))
	}
	for round, merge := range []bool{false, true} {
		if merge {
			flush(t, s)
			if _, err := s.Merge(ctx, MergeOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		scan, err := ReadSnapshot(ctx, s.opts.Store, s, ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cached, err := ReadSnapshot(ctx, s.opts.Store, s, ReadOptions{KeyCache: kc, KeyCacheScope: "layered"})
		if err != nil {
			t.Fatal(err)
		}
		keys := []string{"nope", "k999999", ""}
		for k := range want {
			keys = append(keys, k)
		}
		for _, k := range keys {
			w := "<none>"
			if n, ok := want[k]; ok {
				w = fmt.Sprintf("%s=%d", k, n)
			}
			// After the merge the other shard's older generation is still pending
			// and shadows the merged row; the scanning Get is the reference then.
			if got := get(scan, k); merge {
				w = got
			} else if got != w {
				t.Errorf("round %d: scanning get %q = %s, want %s", round, k, got, w)
			}
			if got := get(cached, k); got != w {
				t.Errorf("round %d: cached get %q = %s, want %s", round, k, got, w)
			}
		}
	}
	if st := kc.Stats(); st.Hits == 0 || st.Misses == 0 {
		t.Errorf("key cache unused: %+v", st)
	}
}

func TestSnapshotPagingAndFilters(t *testing.T) {
	_, want, snap := layeredDataset(t)
	sn := snap()
	for _, filter := range []string{"", "n >= 1", "id LIKE 'k%' AND n < 3", "n = 99"} {
		full := collectOrder(t, sn, ScanOptions{Filter: filter})
		wantN := 0
		for k, v := range want {
			if filterMatch(filter, k, v) {
				wantN++
			}
		}
		if len(full) != wantN {
			t.Fatalf("filter %q: %d rows, want %d", filter, len(full), wantN)
		}
		for _, size := range []int64{1, 7, 16} {
			var paged []string
			for off := int64(0); ; off += size {
				page := collectOrder(t, sn, ScanOptions{Filter: filter, Offset: off, Limit: size, Columns: []string{"id", "n"}})
				paged = append(paged, page...)
				if int64(len(page)) < size {
					break
				}
			}
			if fmt.Sprint(paged) != fmt.Sprint(full) {
				t.Fatalf("filter %q page size %d: pages %v\nfull %v", filter, size, paged, full)
			}
		}
	}
	// Projection without the key column.
	rdr, err := sn.Scan(context.Background(), ScanOptions{Columns: []string{"n"}, Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	n := 0
	for rdr.Next() {
		if rdr.RecordBatch().NumCols() != 1 {
			t.Fatal("projection not applied")
		}
		n += int(rdr.RecordBatch().NumRows())
	}
	if n != 3 || rdr.Err() != nil {
		t.Fatalf("limit 3 gave %d rows, %v", n, rdr.Err())
	}
	if _, err := sn.Scan(context.Background(), ScanOptions{Filter: "nope = 1"}); err == nil {
		t.Fatal("filter on an unknown column accepted")
	}
}

func filterMatch(filter, k string, v int64) bool {
	switch filter {
	case "n >= 1":
		return v >= 1
	case "id LIKE 'k%' AND n < 3":
		return k[0] == 'k' && v < 3
	case "n = 99":
		return false
	}
	return true
}

// collectOrder returns "id=n" in scan order.
func collectOrder(t *testing.T, sn *Snapshot, opts ScanOptions) []string {
	t.Helper()
	rdr, err := sn.Scan(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	var out []string
	for rdr.Next() {
		rec := rdr.RecordBatch()
		ids := rec.Column(rec.Schema().FieldIndices("id")[0]).(*array.String)
		ns := rec.Column(rec.Schema().FieldIndices("n")[0]).(*array.Int64)
		for i := 0; i < int(rec.NumRows()); i++ {
			out = append(out, fmt.Sprintf("%s=%d", ids.Value(i), ns.Value(i)))
		}
	}
	if err := rdr.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestSnapshotIsolation: a snapshot does not see appends made after it was taken, and
// a seal that lands after it does not make a row appear twice.
func TestSnapshotIsolation(t *testing.T) {
	s, want, snap := layeredDataset(t)
	sn := snap()
	appendRows(t, s, row{id: "late", n: 1}, row{id: "k000000", n: 50})
	flush(t, s) // the memtable the snapshot holds is now a generation too
	expectKeys(t, scanAll(t, sn, ScanOptions{}), want)
	if _, ok, _ := sn.Get(context.Background(), "late", nil); ok {
		t.Fatal("snapshot sees a later append")
	}
	want["late"], want["k000000"] = 1, 50
	expectKeys(t, scanAll(t, snap(), ScanOptions{}), want)
	ps, err := PendingGenerations(context.Background(), s.Store())
	if err != nil || ps.Generations != 3 || ps.PerShard[s.ID()] != 2 || ps.Shards != 2 {
		t.Fatalf("pending %+v %v", ps, err)
	}
}

// TestGenCacheRetainDropsMergedGenerations: a snapshot keeps the key indexes of the
// generations still pending only, so merged generations do not hold memory.
func TestGenCacheRetainDropsMergedGenerations(t *testing.T) {
	c := newGenCache(1 << 20)
	c.put("a", &genIndex{keys: []string{"1", "2"}})
	c.put("b", &genIndex{keys: []string{"3"}})
	c.retain(map[string]bool{"b": true})
	if c.get("a") != nil || c.get("b") == nil || c.n != 1 {
		t.Fatalf("after retain: a=%v b=%v n=%d", c.get("a"), c.get("b"), c.n)
	}
}

// TestScanMatchSkipsGenerations: a scan with Match returns what the equivalent filter
// returns, and once a Reader knows each generation's values it reads only the
// generations that hold the matched value.
func TestScanMatchSkipsGenerations(t *testing.T) {
	ctx := t.Context()
	st := &hookStore{Store: memDataset(t)}
	s := openShard(t, testOptions(st, "w0"))
	for _, id := range []string{"a", "b", "c"} {
		appendRows(t, s, row{id: id, n: 1}, row{id: id + "2", n: 2})
		flush(t, s)
	}
	rd := NewReader(st, ReaderOptions{KeyColumn: "id"})
	defer rd.Close()
	sn, err := rd.Snapshot(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if sn.PendingGenerations() != 3 {
		t.Fatalf("%d pending generations, want 3", sn.PendingGenerations())
	}
	expectKeys(t, scanAll(t, sn, ScanOptions{Match: &Match{Column: "id", Value: "b"}}), map[string]int64{"b": 1})
	expectKeys(t, scanAll(t, sn, ScanOptions{Filter: "n = 2", Match: &Match{Column: "id", Value: "c2"}}), map[string]int64{"c2": 2})
	expectKeys(t, scanAll(t, sn, ScanOptions{Filter: "n = 1", Match: &Match{Column: "id", Value: "c2"}}), map[string]int64{})
	expectKeys(t, scanAll(t, sn, ScanOptions{Match: &Match{Column: "id", Value: "it's absent"}}), map[string]int64{})

	sn, err = rd.Snapshot(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	expectKeys(t, scanAll(t, sn, ScanOptions{Match: &Match{Column: "id", Value: "a2"}}), map[string]int64{"a2": 2})
	if n := sn.gensScanned.Load(); n != 1 {
		t.Fatalf("the scan read rows of %d generations, want only the one holding the value", n)
	}
	expectKeys(t, scanAll(t, sn, ScanOptions{Filter: "id = 'a2'"}), map[string]int64{"a2": 2})
	if n := sn.gensScanned.Load(); n != 4 {
		t.Fatalf("a filter scan read rows of %d generations, want all 3 more", n-1)
	}
	if _, err := sn.Scan(ctx, ScanOptions{Match: &Match{Column: "nope", Value: "x"}}); err == nil {
		t.Fatal("a match on a missing column was accepted")
	}

	// Match applies to the base table too, once the generations are merged.
	if _, err := s.Merge(ctx, MergeOptions{}); err != nil {
		t.Fatal(err)
	}
	sn, err = rd.Snapshot(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	expectKeys(t, scanAll(t, sn, ScanOptions{Match: &Match{Column: "id", Value: "b2"}}), map[string]int64{"b2": 2})
	expectKeys(t, scanAll(t, sn, ScanOptions{Filter: "n = 1", Match: &Match{Column: "id", Value: "c"}}), map[string]int64{"c": 1})

	// A newer row of the key shadows the older ones, in a later generation and in the
	// memtable, as in a scan without Match.
	appendRows(t, s, row{id: "b", n: 5})
	flush(t, s)
	sn, err = rd.Snapshot(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	expectKeys(t, scanAll(t, sn, ScanOptions{Match: &Match{Column: "id", Value: "b"}}), map[string]int64{"b": 5})
	appendRows(t, s, row{id: "b", n: 6})
	sn, err = rd.Snapshot(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	expectKeys(t, scanAll(t, sn, ScanOptions{Match: &Match{Column: "id", Value: "b"}}), map[string]int64{"b": 6})
	expectKeys(t, scanAll(t, sn, ScanOptions{Filter: "id = 'b'"}), map[string]int64{"b": 6})
}

// TestScanBaseOnly: BaseOnly reads the base table as committed, the newer rows of the
// pending generations neither read nor shadowing it; SkipBase reads only those.
func TestScanBaseOnly(t *testing.T) {
	ctx := t.Context()
	st := memDataset(t, row{id: "a", n: 1}, row{id: "b", n: 1})
	s := openShard(t, testOptions(st, "w0"))
	appendRows(t, s, row{id: "a", n: 2}, row{id: "c", n: 2})
	flush(t, s)
	sn, err := ReadSnapshot(ctx, st, nil, ReadOptions{KeyColumn: "id"})
	if err != nil {
		t.Fatal(err)
	}
	expectKeys(t, scanAll(t, sn, ScanOptions{BaseOnly: true}), map[string]int64{"a": 1, "b": 1})
	expectKeys(t, scanAll(t, sn, ScanOptions{SkipBase: true}), map[string]int64{"a": 2, "c": 2})
	expectKeys(t, scanAll(t, sn, ScanOptions{}), map[string]int64{"a": 2, "b": 1, "c": 2})
	if _, err := sn.Scan(ctx, ScanOptions{BaseOnly: true, SkipBase: true}); err == nil {
		t.Fatal("BaseOnly with SkipBase was accepted")
	}
}
