package rollout

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lancectx/lancectx/api"
)

func TestFromBatchReadsAProjection(t *testing.T) {
	b, err := ToBatch(sampleRecords(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	// Keep id, reward and binary_payload only, in another order.
	idx := func(n string) int { return b.Schema().FieldIndices(n)[0] }
	proj := array.NewRecordBatch(arrow.NewSchema([]arrow.Field{
		b.Schema().Field(idx(ColReward)), b.Schema().Field(idx(ColID)), b.Schema().Field(idx(ColBinaryPayload)),
	}, nil), []arrow.Array{b.Column(idx(ColReward)), b.Column(idx(ColID)), b.Column(idx(ColBinaryPayload))}, b.NumRows())
	defer proj.Release()

	recs, err := FromBatch(proj, false)
	if err != nil {
		t.Fatal(err)
	}
	if recs[0].ID != "a" || *recs[0].Reward != 0.5 || recs[0].BinaryPayload != nil || recs[0].RolloutID != "" {
		t.Fatalf("projection without payload: %+v", recs[0])
	}
	recs, err = FromBatch(proj, true)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(recs[0].BinaryPayload, []byte{0, 1, 2}) || recs[1].BinaryPayload != nil {
		t.Fatalf("payloads: %v %v", recs[0].BinaryPayload, recs[1].BinaryPayload)
	}
}

// foreignBatch builds a batch the way another writer might: plain utf8 roles, large
// strings where we use utf8, NaN and infinities, metadata that is not JSON.
func foreignBatch(t *testing.T, mem memory.Allocator) arrow.RecordBatch {
	t.Helper()
	s := arrow.NewSchema([]arrow.Field{
		{Name: ColID, Type: arrow.BinaryTypes.LargeString},
		{Name: ColRole, Type: arrow.BinaryTypes.String},
		{Name: ColReward, Type: arrow.PrimitiveTypes.Float32, Nullable: true},
		{Name: ColOutputLogprobs, Type: float32List, Nullable: true},
		{Name: ColMetadata, Type: arrow.BinaryTypes.LargeString, Nullable: true},
		{Name: ColCreatedAt, Type: &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}},
		{Name: "_rowid", Type: arrow.PrimitiveTypes.Uint64},
	}, nil)
	bld := array.NewRecordBuilder(mem, s)
	defer bld.Release()
	bld.Field(0).(*array.LargeStringBuilder).AppendValues([]string{"x", "y"}, nil)
	bld.Field(1).(*array.StringBuilder).AppendValues([]string{"user", "tool"}, nil)
	bld.Field(2).(*array.Float32Builder).AppendValues([]float32{float32(math.NaN()), float32(math.Inf(-1))}, nil)
	lb := bld.Field(3).(*array.ListBuilder)
	vb := lb.ValueBuilder().(*array.Float32Builder)
	lb.Append(true)
	vb.AppendValues([]float32{1, float32(math.NaN()), float32(math.Inf(-1))}, nil)
	lb.Append(true)
	vb.AppendNull()
	bld.Field(4).(*array.LargeStringBuilder).AppendValues([]string{`{"ok":1}`, `{broken`}, nil)
	bld.Field(5).(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{1_700_000_000_123_456_789, 0}, nil)
	bld.Field(6).(*array.Uint64Builder).AppendValues([]uint64{7, 8}, nil)
	return bld.NewRecordBatch()
}

func TestFromBatchSoftensWhatJSONCannotCarry(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	b := foreignBatch(t, mem)
	defer b.Release()
	recs, err := FromBatch(b, false)
	if err != nil {
		t.Fatal(err)
	}
	got := []string{mustJSON(recs[0]), mustJSON(recs[1])}
	want := []string{
		`{"id":"x","rollout_id":"","problem_id":"","sequence_order":0,"role":"user","created_at":"2023-11-14T22:13:20.123456789Z","content_type":"","output_logprobs":[1,null,null],"metadata":{"ok":1}}`,
		`{"id":"y","rollout_id":"","problem_id":"","sequence_order":0,"role":"tool","created_at":"1970-01-01T00:00:00Z","content_type":"","output_logprobs":[null],"metadata":"{broken"}`,
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("record %d:\n got  %s\n want %s", i, got[i], want[i])
		}
	}
}

func TestFromBatchRefusesKnownColumnsOfAnUnreadableType(t *testing.T) {
	s := arrow.NewSchema([]arrow.Field{{Name: ColSequenceOrder, Type: arrow.PrimitiveTypes.Int64}}, nil)
	bld := array.NewRecordBuilder(memory.DefaultAllocator, s)
	defer bld.Release()
	bld.Field(0).(*array.Int64Builder).Append(1)
	b := bld.NewRecordBatch()
	defer b.Release()
	if _, err := FromBatch(b, false); err == nil || !strings.Contains(err.Error(), `column "sequence_order"`) {
		t.Fatalf("got %v", err)
	}
}

func TestFloat32ListEncodesLikeEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	vals := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 0.1, 1e-6, 9.999999e-7, 1e-7, 1e20, 1e21, 3.4028235e38,
		math.SmallestNonzeroFloat32, -2.5e-3, 123456789}
	for range 5000 {
		v := math.Float32frombits(rng.Uint32())
		if finite(v) {
			vals = append(vals, v)
		}
	}
	got, err := json.Marshal(Float32List(vals))
	if err != nil {
		t.Fatal(err)
	}
	want, err := json.Marshal(vals)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Float32List differs from encoding/json:\n%.300s\n%.300s", got, want)
	}
	if b, _ := json.Marshal(Float32List(nil)); string(b) != "null" {
		t.Fatalf("nil list = %s", b)
	}
	if b, _ := json.Marshal(Float32List{}); string(b) != "[]" {
		t.Fatalf("empty list = %s", b)
	}
}

func TestListWriterWritesTheListResponse(t *testing.T) {
	recs := make([]Record, 0)
	for _, r := range sampleRecords(t) {
		recs = append(recs, r.ToRecord())
	}
	cases := map[string]struct {
		recs    []Record
		hasMore bool
		limit   int
		offset  int
	}{
		"an empty page":                {nil, false, 100, 0},
		"a page of records with more":  {recs, true, 3, 6},
		"a single record as last page": {recs[:1], false, 10, 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			lw := NewListWriter(&buf)
			for i := range tc.recs {
				if err := lw.Write(&tc.recs[i]); err != nil {
					t.Fatal(err)
				}
			}
			if err := lw.Close(tc.hasMore, tc.limit, tc.offset); err != nil {
				t.Fatal(err)
			}
			if lw.Count() != len(tc.recs) {
				t.Fatalf("Count = %d", lw.Count())
			}
			page := tc.recs
			if page == nil {
				page = []Record{}
			}
			want, _ := json.Marshal(api.ListRecordsResponse[Record]{Records: page, HasMore: tc.hasMore, Limit: tc.limit, Offset: tc.offset})
			if buf.String() != string(want)+"\n" {
				t.Fatalf("got  %s\nwant %s", buf.String(), want)
			}
			if err := lw.Write(&recs[0]); err == nil {
				t.Fatal("Write after Close succeeded")
			}
		})
	}
}

func TestListWriterStreamsBatchesInChunks(t *testing.T) {
	one := sampleRecords(t)[0]
	many := make([]AddRecord, 2000)
	for i := range many {
		many[i] = one
	}
	b, err := ToBatch(many, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	cw := &countingWriter{}
	lw := NewListWriter(cw)
	if err := lw.WriteBatch(b, false); err != nil {
		t.Fatal(err)
	}
	if cw.writes == 0 {
		t.Fatal("nothing was written before Close: the page is held in memory")
	}
	if err := lw.Close(false, 2000, 0); err != nil {
		t.Fatal(err)
	}
	var resp api.ListRecordsResponse[Record]
	if err := json.Unmarshal(cw.buf.Bytes(), &resp); err != nil || len(resp.Records) != 2000 {
		t.Fatalf("decoded %d records: %v", len(resp.Records), err)
	}
}

type countingWriter struct {
	buf    bytes.Buffer
	writes int
}

func (c *countingWriter) Write(p []byte) (int, error) { c.writes++; return c.buf.Write(p) }

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("connection reset") }

func TestListWriterErrorsAreSticky(t *testing.T) {
	lw := NewListWriter(failingWriter{})
	r := sampleRecords(t)[0].ToRecord()
	_ = lw.Write(&r)
	if err := lw.Close(false, 1, 0); err == nil || !strings.Contains(err.Error(), "connection reset") {
		t.Fatalf("Close = %v", err)
	}
	if err := lw.Write(&r); err == nil {
		t.Fatal("Write after a failure succeeded")
	}
}
