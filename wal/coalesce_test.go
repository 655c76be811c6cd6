package wal

import (
	"context"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// TestSmallBatchesShareOneEntryBatch appends several small batches in one group (one
// AppendBatches call): the WAL entry holds them joined as one batch, rows in order,
// and a key repeated in a later batch reads as its later row, before and after the
// seal and after a replay from the entry.
func TestSmallBatchesShareOneEntryBatch(t *testing.T) {
	st := memDataset(t)
	s := openShard(t, testOptions(st, "w0"))
	var recs []arrow.RecordBatch
	var ids []string
	for i := range 4 {
		// The repeated key sits at another place in each batch, so rows paired with
		// the wrong keys would read differently.
		rs := rowsOf(fmt.Sprintf("b%d-", i), 0, 3, int64(i))
		rs = append(rs[:i:i], append([]row{{id: "dup", n: int64(100 + i), payload: fmt.Sprint("p", i)}}, rs[i:]...)...)
		for _, r := range rs {
			ids = append(ids, r.id)
		}
		recs = append(recs, makeBatch(rs...))
	}
	res, err := s.AppendBatches(context.Background(), recs)
	if err != nil {
		t.Fatal(err)
	}
	e, err := readEntry(context.Background(), st, s.ID(), res.Seq, s.Schema())
	if err != nil {
		t.Fatal(err)
	}
	if len(e.recs) != 1 || e.rows != int64(len(ids)) {
		t.Fatalf("entry of %d batches, %d rows; want 1 batch of %d rows", len(e.recs), e.rows, len(ids))
	}
	col := e.recs[0].Column(0).(*array.String)
	for i, id := range ids {
		if col.Value(i) != id {
			t.Fatalf("entry row %d is %s, want %s", i, col.Value(i), id)
		}
	}
	e.release()
	want := map[string]int64{"dup": 103}
	for i := range 4 {
		for _, r := range rowsOf(fmt.Sprintf("b%d-", i), 0, 3, int64(i)) {
			want[r.id] = r.n
		}
	}
	expectKeys(t, readAll(t, st, s), want)
	// A second writer replays the entry (the first never sealed it).
	s.abandon()
	s2 := openShard(t, testOptions(st, "w0"))
	expectKeys(t, readAll(t, st, s2), want)
	flush(t, s2)
	expectKeys(t, readAll(t, st, nil), want)
}
