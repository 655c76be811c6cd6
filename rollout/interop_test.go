package rollout

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lancectx/lancectx/internal/arrowjson"
	"github.com/lancectx/lancectx/internal/oracle"
	"github.com/lancectx/lancectx/lance"
)

// TestLanceDBReadsRolloutDatasets: a dataset of the exact rollout schema, written by
// lancectx from decoded appends, reads back identically in LanceDB, and the list
// filters select the same rows there.
func TestLanceDBReadsRolloutDatasets(t *testing.T) {
	ctx := context.Background()
	o := oracle.New(t)
	recs, err := ParseAppendJSON([]byte(roundTripInput), DecodeOptions{Now: fixedClock})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := ToBatch(recs, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer batch.Release()
	want, err := arrowjson.Rows(batch)
	if err != nil {
		t.Fatal(err)
	}
	rdr, err := array.NewRecordReader(Schema(), []arrow.RecordBatch{batch})
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	path := filepath.Join(t.TempDir(), "exp.rollout.lance")
	if _, err := lance.Write(ctx, path, rdr, lance.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := o.Read(path, oracle.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("LanceDB read %d rows, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("row %d differs\n LanceDB %s\n lancectx %s", i, got[i], want[i])
		}
	}
	filter, err := ParseFilters(`{"rollout_id":"traj-1","role":"assistant","dataset":""}`)
	if err != nil {
		t.Fatal(err)
	}
	n, err := o.Count(path, filter, 0)
	if err != nil {
		t.Fatalf("LanceDB refuses %q: %v", filter, err)
	}
	if n != 2 {
		t.Fatalf("LanceDB counts %d rows for %q, want 2", n, filter)
	}
}
