package rollout

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/lancectx/lancectx/api"
)

func sampleRecords(t *testing.T) []AddRecord {
	t.Helper()
	recs, err := ParseAppendJSON([]byte(`{"records":[
		{"id":"a","rollout_id":"t1","sequence_order":1,"content":"hello","input_tokens":[1,2],"reward":0.5,
		 "relationships":[{"target_id":"b","relation":"next"}],"metadata":{"k":1},"binary_payload":"AAEC","policy_version":"v1"},
		{"id":"b","rollout_id":"t1","sequence_order":2,"role":"tool","include_in_training":true},
		{"id":"c","rollout_id":"t2","role":"tool","loss_mask":[0,1],"output_logprobs":[-1.5]}
	]}`), DecodeOptions{Now: fixedClock})
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func TestToBatchBuildsTheSchemaColumns(t *testing.T) {
	recs := sampleRecords(t)
	b, err := ToBatch(recs, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	checkBatch(t, b)
	if !b.Schema().Equal(Schema()) || b.NumRows() != 3 {
		t.Fatalf("schema %v rows %d", b.Schema(), b.NumRows())
	}
	col := func(name string) arrow.Array { return b.Column(b.Schema().FieldIndices(name)[0]) }
	if got := col(ColID).(*array.String).Value(2); got != "c" {
		t.Errorf("id[2] = %q", got)
	}
	role := col(ColRole).(*array.Dictionary)
	if role.Dictionary().Len() != 2 {
		t.Errorf("role dictionary has %d values, want 2 (assistant, tool)", role.Dictionary().Len())
	}
	if got := role.Dictionary().(*array.String).Value(role.GetValueIndex(1)); got != "tool" {
		t.Errorf("role[1] = %q", got)
	}
	if ts := col(ColCreatedAt).(*array.Timestamp).Value(0); int64(ts) != fixedNow.UnixMicro() {
		t.Errorf("created_at = %d, want %d", ts, fixedNow.UnixMicro())
	}
	if c := col(ColContent); c.IsNull(1) != true || c.(*array.LargeString).Value(0) != "hello" {
		t.Errorf("content = %v", c)
	}
	if l := col(ColInputTokens).(*array.List); !l.IsNull(1) || !l.IsValid(0) || l.IsValid(2) {
		t.Errorf("input_tokens validity wrong: %v", l)
	}
	if m := col(ColMetadata).(*array.LargeString); m.Value(0) != `{"k":1}` || m.IsValid(1) {
		t.Errorf("metadata = %v", m)
	}
	if p := col(ColBinaryPayload).(*array.LargeBinary); string(p.Value(0)) != "\x00\x01\x02" || p.IsValid(1) {
		t.Errorf("payload = %v", p)
	}
	if s := col(ColPayloadSize).(*array.Int64); s.Value(0) != 3 || s.IsValid(1) {
		t.Errorf("payload_size = %v", s)
	}
	if r := col(ColRelationships).(*array.List); r.IsNull(0) || r.IsValid(1) {
		t.Errorf("relationships = %v", r)
	}
}

func TestToBatchFollowsTheGivenColumnOrder(t *testing.T) {
	fields := Schema().Fields()
	rev := make([]arrow.Field, len(fields))
	for i, f := range fields {
		rev[len(fields)-1-i] = f
	}
	s := arrow.NewSchema(rev, nil)
	b, err := ToBatch(sampleRecords(t), s)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	if !b.Schema().Equal(s) || b.Schema().Field(0).Name != ColMetadata {
		t.Fatalf("schema %v", b.Schema())
	}
	if got := b.Column(len(rev) - 1).(*array.String).Value(0); got != "a" {
		t.Fatalf("last column (id) = %q", got)
	}
}

func subset(drop ...string) *arrow.Schema {
	var fs []arrow.Field
	for _, f := range Schema().Fields() {
		if !strings.Contains(","+strings.Join(drop, ",")+",", ","+f.Name+",") {
			fs = append(fs, f)
		}
	}
	return arrow.NewSchema(fs, nil)
}

func TestToBatchAgainstOtherDatasetSchemas(t *testing.T) {
	recs := sampleRecords(t)
	plain := []AddRecord{recs[1]} // sets neither relationships nor metadata
	extra := arrow.NewSchema(append(Schema().Fields(), arrow.Field{Name: "added_later", Type: arrow.PrimitiveTypes.Float64, Nullable: true}), nil)
	strictExtra := arrow.NewSchema(append(Schema().Fields(), arrow.Field{Name: "must_have", Type: arrow.PrimitiveTypes.Float64}), nil)
	retyped := subset(ColDataset)
	retyped = arrow.NewSchema(append(retyped.Fields(), arrow.Field{Name: ColDataset, Type: arrow.BinaryTypes.LargeString, Nullable: true}), nil)
	nonNullDataset := subset(ColDataset)
	nonNullDataset = arrow.NewSchema(append(nonNullDataset.Fields(), arrow.Field{Name: ColDataset, Type: arrow.BinaryTypes.String}), nil)
	cases := map[string]struct {
		recs   []AddRecord
		s      *arrow.Schema
		status int    // 400 for a request error; -1 for a schema error
		msg    string // substring of the error
	}{
		"an older schema without relationships and metadata takes records without them": {plain, subset(ColRelationships, ColMetadata), 0, ""},
		"a record with relationships is refused by a schema without the column": {
			recs, subset(ColRelationships, ColMetadata), 400, "records[0].relationships: this store's dataset has no relationships column"},
		"a record with metadata is refused by a schema without the column": {
			recs, subset(ColMetadata), 400, "records[0].metadata: this store's dataset has no metadata column"},
		"a newer nullable column is filled with nulls":    {recs, extra, 0, ""},
		"a newer required column is a schema error":       {recs, strictExtra, -1, `"must_have" is not nullable`},
		"a column of another type is a schema error":      {recs, retyped, -1, `"dataset" has type large_utf8`},
		"a schema without a required column is an error":  {recs, subset(ColRolloutID), -1, `lacks required column "rollout_id"`},
		"a non-nullable optional column needs a value":    {recs, nonNullDataset, 400, "records[0].dataset: required by this store's dataset"},
		"an empty batch is a valid zero-row batch":        {nil, nil, 0, ""},
		"a record without created_at is refused":          {[]AddRecord{{ID: "a", RolloutID: "t"}}, nil, 400, "records[0].created_at: not set"},
		"fixed defaults are filled for Go-built records":  {[]AddRecord{{ID: "a", RolloutID: "t", CreatedAt: fixedNow}}, nil, 0, ""},
		"an old schema missing payload columns is usable": {plain, subset(ColBinaryPayload, ColPayloadSize, ColPayloadChecksum), 0, ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b, err := ToBatch(tc.recs, tc.s)
			if tc.msg == "" {
				if err != nil {
					t.Fatal(err)
				}
				defer b.Release()
				want := tc.s
				if want == nil {
					want = Schema()
				}
				checkBatch(t, b)
				if !b.Schema().Equal(want) || int(b.NumRows()) != len(tc.recs) {
					t.Fatalf("schema %v rows %d", b.Schema(), b.NumRows())
				}
				return
			}
			if err == nil {
				b.Release()
				t.Fatalf("accepted, want %q", tc.msg)
			}
			e, isAPI := api.AsError(err)
			switch {
			case tc.status == -1 && isAPI:
				t.Fatalf("a schema problem is reported as a request error: %v", err)
			case tc.status > 0 && (!isAPI || e.Status != tc.status):
				t.Fatalf("got %v, want a %d", err, tc.status)
			}
			if !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %q does not contain %q", err, tc.msg)
			}
		})
	}
}

func TestToBatchFillsFixedDefaults(t *testing.T) {
	b, err := ToBatch([]AddRecord{{ID: "a", RolloutID: "t", CreatedAt: fixedNow}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	recs, err := FromBatch(b, false)
	if err != nil {
		t.Fatal(err)
	}
	if r := recs[0]; r.ProblemID != "t" || r.Role != DefaultRole || r.ContentType != DefaultContentType {
		t.Fatalf("defaults missing: %+v", r)
	}
}

func TestToBatchRefusesMoreRolesThanTheDictionaryHolds(t *testing.T) {
	recs := make([]AddRecord, MaxDistinctRoles+1)
	for i := range recs {
		recs[i] = AddRecord{ID: "a", RolloutID: "t", CreatedAt: fixedNow, Role: strings.Repeat("r", i+1)}
	}
	b, err := ToBatch(recs[:MaxDistinctRoles], nil)
	if err != nil {
		t.Fatalf("%d roles refused: %v", MaxDistinctRoles, err)
	}
	b.Release()
	if _, err := ToBatch(recs, nil); api.StatusOf(err) != 400 {
		t.Fatalf("%d roles: %v", len(recs), err)
	}
}

// checkBatch validates every column that can validate itself, and pushes the batch
// through an Arrow IPC stream (what the WAL writes) and back.
func checkBatch(t *testing.T, b arrow.RecordBatch) {
	t.Helper()
	for i, c := range b.Columns() {
		if v, ok := c.(interface{ ValidateFull() error }); ok {
			if err := v.ValidateFull(); err != nil {
				t.Fatalf("column %s: %v", b.Schema().Field(i).Name, err)
			}
		}
	}
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(b.Schema()))
	if err := w.Write(b); err != nil {
		t.Fatalf("IPC write: %v", err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := ipc.NewReader(&buf)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if !r.Next() {
		t.Fatalf("IPC read: %v", r.Err())
	}
	got := r.RecordBatch()
	if !array.RecordEqual(got, b) {
		t.Fatalf("IPC round trip changed the batch")
	}
	a, err := FromBatch(b, true)
	if err != nil {
		t.Fatal(err)
	}
	c, err := FromBatch(got, true)
	if err != nil {
		t.Fatal(err)
	}
	if mustJSON(a) != mustJSON(c) {
		t.Fatalf("IPC round trip changed the records")
	}
}

// TestRoleColumnsReadBackAcrossCachedDictionaries builds batches of one schema (so one
// cached role dictionary) one after another and from several goroutines at once, with
// role sets that repeat, change order, grow past the short list into the map, and
// hit the dictionary's limit: every row must read back its own role, and a batch with
// the same roles in the same order as the one before shares its dictionary.
func TestRoleColumnsReadBackAcrossCachedDictionaries(t *testing.T) {
	s := arrow.NewSchema(Schema().Fields(), nil) // a store's own schema: its own plan and cache
	many := make([]string, 20)
	for i := range many {
		many[i] = fmt.Sprintf("role-%d", i)
	}
	sets := [][]string{{"user", "assistant"}, {"user", "assistant"}, {"assistant", "user"}, {"tool"}, many, {"user", "assistant"}}
	build := func(roles []string, rows int) arrow.RecordBatch {
		t.Helper()
		recs := make([]AddRecord, rows)
		for i := range recs {
			recs[i] = AddRecord{ID: fmt.Sprint(i), RolloutID: "t", CreatedAt: fixedNow, Role: roles[i%len(roles)]}
		}
		b, err := ToBatch(recs, s)
		if err != nil {
			t.Fatal(err)
		}
		col := b.Column(s.FieldIndices(ColRole)[0]).(*array.Dictionary)
		dict := col.Dictionary().(*array.String)
		for i := range rows {
			if got := dict.Value(col.GetValueIndex(i)); got != roles[i%len(roles)] {
				t.Errorf("row %d: role %q, want %q", i, got, roles[i%len(roles)])
			}
		}
		return b
	}
	var prev arrow.RecordBatch
	for _, roles := range sets {
		b := build(roles, 3*len(roles)+1)
		checkBatch(t, b)
		if prev != nil {
			pd := prev.Column(s.FieldIndices(ColRole)[0]).(*array.Dictionary).Dictionary()
			bd := b.Column(s.FieldIndices(ColRole)[0]).(*array.Dictionary).Dictionary()
			same := array.Equal(pd, bd)
			if shared := pd.Data() == bd.Data(); shared != same {
				t.Fatalf("roles %v: dictionary shared %v, equal to the last batch's %v", roles, shared, same)
			}
			prev.Release()
		}
		prev = b
	}
	prev.Release()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 50 {
				build(sets[(g+i)%len(sets)], 7+g).Release()
			}
		})
	}
	wg.Wait()
}
