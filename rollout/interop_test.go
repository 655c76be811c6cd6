package rollout

import (
	"context"
	"path/filepath"
	"strings"
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

// TestLanceDBReadsBatchesWithSharedColumns: batches whose columns ToBatch shares (a
// problem_id column that is the rollout_id column, the cached content_type and role
// columns) next to a batch that sets its own values, written to one dataset, read back
// in LanceDB exactly as lancectx holds them.
func TestLanceDBReadsBatchesWithSharedColumns(t *testing.T) {
	ctx := context.Background()
	o := oracle.New(t)
	s := arrow.NewSchema(Schema().Fields(), nil) // its own plan and caches
	bodies := []string{
		`{"records":[{"id":"a","rollout_id":"r1","role":"assistant"},{"id":"b","rollout_id":"r2","role":"user","problem_id":"r2"}]}`,
		`{"records":[{"id":"c","rollout_id":"r3","role":"assistant"},{"id":"d","rollout_id":"r4","role":"user","content_type":"text/plain"}]}`,
		`{"records":[{"id":"e","rollout_id":"r5","problem_id":"p5","content_type":"application/json"},{"id":"f","rollout_id":"r6"}]}`,
	}
	var batches []arrow.RecordBatch
	var want []string
	for _, b := range bodies {
		recs, err := ParseAppendJSON([]byte(b), DecodeOptions{Now: fixedClock})
		if err != nil {
			t.Fatal(err)
		}
		batch, err := ToBatch(recs, s)
		if err != nil {
			t.Fatal(err)
		}
		defer batch.Release()
		checkBatch(t, batch)
		rows, err := arrowjson.Rows(batch)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, rows...)
		batches = append(batches, batch)
	}
	col := func(b arrow.RecordBatch, name string) arrow.ArrayData {
		return b.Column(s.FieldIndices(name)[0]).Data()
	}
	if col(batches[0], ColProblemID) != col(batches[0], ColRolloutID) || col(batches[2], ColProblemID) == col(batches[2], ColRolloutID) {
		t.Fatal("problem_id shares the rollout_id column other than exactly when every problem_id is the rollout_id")
	}
	if col(batches[0], ColContentType) != col(batches[1], ColContentType) || col(batches[2], ColContentType) == col(batches[1], ColContentType) {
		t.Fatal("content_type columns shared other than exactly when every value is the default")
	}
	rdr, err := array.NewRecordReader(s, batches)
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	path := filepath.Join(t.TempDir(), "shared.rollout.lance")
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
	for i, id := range []string{"a", "b", "c", "d", "e", "f"} {
		if !strings.Contains(got[i], `"id":"`+id+`"`) {
			t.Fatalf("row %d is %s, want id %q", i, got[i], id)
		}
	}
	if !strings.Contains(got[4], `"problem_id":"p5"`) || !strings.Contains(got[4], `"content_type":"application/json"`) || !strings.Contains(got[0], `"problem_id":"r1"`) {
		t.Fatalf("values lost: %s / %s", got[0], got[4])
	}
}
