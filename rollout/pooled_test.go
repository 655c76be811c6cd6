package rollout

import (
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestParseAppendJSONBorrowedMatchesCopy: decoding in place gives the records the
// copying decoder gives, escapes, payloads, metadata and every field included.
func TestParseAppendJSONBorrowedMatchesCopy(t *testing.T) {
	bodies := []string{
		roundTripInput,
		`{"records":[{"id":"a\"b","rollout_id":"t\u00e9","content":"line\nnext","metadata":{"k":[1, 2]},"binary_payload":"AAEC"}]}`,
		`{"records":[{"id":"a","rollout_id":"t","relationships":[],"input_tokens":[],"score":null,"include_in_training":false}]}`,
	}
	for _, b := range bodies {
		want, err := ParseAppendJSON([]byte(b), DecodeOptions{Now: fixedClock})
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseAppendJSONBorrowed([]byte(b), DecodeOptions{Now: fixedClock})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("borrowed decode of %.60s...:\n got %+v\nwant %+v", b, got, want)
		}
	}
}

// TestPooledWireRecordsStartEmpty decodes a body that sets every field, then bodies
// that set few: the wire records the decoder reuses must not carry a value over.
func TestPooledWireRecordsStartEmpty(t *testing.T) {
	for range 20 { // the pool may hand out any of the slices put back
		if _, err := ParseAppendJSON([]byte(roundTripInput), DecodeOptions{Now: fixedClock}); err != nil {
			t.Fatal(err)
		}
		got, err := ParseAppendJSONBorrowed([]byte(`{"records":[{"id":"x","rollout_id":"y"},{"id":"z","rollout_id":"y"}]}`),
			DecodeOptions{Now: fixedClock})
		if err != nil {
			t.Fatal(err)
		}
		want := AddRecord{ID: "x", RolloutID: "y", ProblemID: "y", Role: DefaultRole, ContentType: DefaultContentType,
			CreatedAt: fixedClock().UTC().Truncate(time.Microsecond)}
		if !reflect.DeepEqual(got[0], want) {
			t.Fatalf("after a full record, a bare one decodes as %+v", got[0])
		}
	}
}

// TestNullColumnsMatchArrow: the all-null columns ToBatch builds over the shared zero
// buffer equal Arrow's own arrays of nulls for every rollout column type, and batches
// of records that set no optional field equal the ones built column by column.
func TestNullColumnsMatchArrow(t *testing.T) {
	for _, f := range Schema().Fields() {
		for _, n := range []int{1, 7, 8, 100} {
			want := array.MakeArrayOfNull(memory.DefaultAllocator, f.Type, n)
			got := nullColumn(f.Type, n)
			if !array.Equal(got, want) || got.NullN() != n || got.Len() != n {
				t.Fatalf("%s (%s), %d rows: %v, want %v", f.Name, f.Type, n, got, want)
			}
			if got.Data().Buffers()[0] == nil && f.Type.ID() != arrow.DICTIONARY {
				t.Fatalf("%s: no validity bitmap", f.Name)
			}
			want.Release()
			got.Release()
		}
	}
	recs := []AddRecord{
		{ID: "a", RolloutID: "r", ProblemID: "r", Role: "user", ContentType: DefaultContentType, CreatedAt: fixedClock()},
		{ID: "b", RolloutID: "r", ProblemID: "r", Role: "user", ContentType: DefaultContentType, CreatedAt: fixedClock(),
			Relationships: []Relationship{}},
	}
	for range 2 { // the second time the null columns come from the cache
		b, err := ToBatch(recs, nil)
		if err != nil {
			t.Fatal(err)
		}
		checkBatch(t, b)
		for i, f := range b.Schema().Fields() {
			col := b.Column(i)
			switch f.Name {
			case ColID, ColRolloutID, ColProblemID, ColRole, ColContentType, ColCreatedAt, ColSequenceOrder:
				if col.NullN() != 0 {
					t.Fatalf("%s has nulls", f.Name)
				}
			case ColRelationships:
				// An empty list is not null: only the first record's relationships are.
				if !col.IsNull(0) || col.IsNull(1) || col.(*array.List).ListValues().Len() != 0 {
					t.Fatalf("relationships: %v", col)
				}
			default:
				if col.NullN() != 2 {
					t.Fatalf("%s: %d nulls of 2", f.Name, col.NullN())
				}
			}
		}
		b.Release()
	}
}

// TestPlansGoWithTheirSchema: the plan cached for a store's schema is dropped once the
// schema is unreachable (a closed store's), so opening and closing stores does not
// grow the cache.
func TestPlansGoWithTheirSchema(t *testing.T) {
	count := func() int {
		n := 0
		plans.Range(func(any, any) bool { n++; return true })
		return n
	}
	before := count()
	recs := []AddRecord{{ID: "a", RolloutID: "r", ProblemID: "r", Role: "user", ContentType: DefaultContentType, CreatedAt: fixedClock()}}
	func() {
		for range 10 {
			s := arrow.NewSchema(Schema().Fields(), nil) // a store's own schema value
			b, err := ToBatch(recs, s)
			if err != nil {
				t.Fatal(err)
			}
			b.Release()
		}
	}()
	if n := count(); n < before+1 {
		t.Fatalf("%d plans cached after building batches for 10 schemas, %d before", n, before)
	}
	// Cleanups run after a collection finds the schemas unreachable; a few cycles
	// (a count, not a time) let them run.
	for i := 0; i < 50 && count() > before; i++ {
		runtime.GC()
		runtime.Gosched()
	}
	if n := count(); n > before {
		t.Fatalf("%d plans still cached after the schemas became unreachable, %d before", n, before)
	}
}

// TestParseAppendJSONPooledMatchesCopyAcrossReuse decodes a body that sets every field
// and then one that sets few, again and again through the pooled decoder, releasing
// each time: every decode must equal the copying decoder's, so records, arenas and
// wire records handed back to the pool carry nothing into the next request.
func TestParseAppendJSONPooledMatchesCopyAcrossReuse(t *testing.T) {
	bodies := []string{
		roundTripInput,
		`{"records":[{"id":"x","rollout_id":"y"},{"id":"z","rollout_id":"y","reward":null}]}`,
		`{"records":[{"id":"a\"b","rollout_id":"t\u00e9","content":"line\nnext","metadata":{"k":[1, 2]},"binary_payload":"AAEC"}]}`,
	}
	want := make([][]AddRecord, len(bodies))
	for i, b := range bodies {
		recs, err := ParseAppendJSON([]byte(b), DecodeOptions{Now: fixedClock})
		if err != nil {
			t.Fatal(err)
		}
		want[i] = recs
	}
	for round := range 20 { // the pool may hand out any scratch put back
		for i, b := range bodies {
			got, release, err := ParseAppendJSONPooled([]byte(b), DecodeOptions{Now: fixedClock})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want[i]) {
				t.Fatalf("round %d, body %d: pooled decode\n got %+v\nwant %+v", round, i, got, want[i])
			}
			release()
		}
		// A refused body also hands its scratch back, half filled.
		_, release, err := ParseAppendJSONPooled([]byte(`{"records":[{"id":"ok","rollout_id":"r","content":"c"},{"id":"","rollout_id":"r"}]}`),
			DecodeOptions{Now: fixedClock})
		if err == nil {
			t.Fatal("an empty id was accepted")
		}
		release()
	}
}
