package ctxstore

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/lancectx/lancectx/api"
)

func ptr[T any](v T) *T { return &v }

func TestOptionsDefaultsAndRefusals(t *testing.T) {
	o, err := ParseOptions(&api.CreateContextStoreRequest{Name: "a"})
	if err != nil || o.EmbeddingDim != 1536 || o.DistanceMetric != "l2" || o.IDIndexType != "none" || len(o.BlobColumns) != 0 {
		t.Fatalf("defaults: %+v %v", o, err)
	}
	bad := []api.CreateContextStoreRequest{
		{EmbeddingDim: ptr(0)}, {EmbeddingDim: ptr(MaxEmbeddingDim + 1)}, {DistanceMetric: ptr("hamming")},
		{IDIndexType: ptr("hash")}, {BlobColumns: []string{"embedding"}}, {BlobColumns: []string{"text_payload", "text_payload"}},
	}
	for i := range bad {
		if _, err := ParseOptions(&bad[i]); api.StatusOf(err) != 400 {
			t.Errorf("%+v: %v, want a 400", bad[i], err)
		}
	}
	o2, _ := ParseOptions(&api.CreateContextStoreRequest{EmbeddingDim: ptr(8), DistanceMetric: ptr("dot")})
	if d := o.Diff(o2); !strings.Contains(d, "embedding_dim 1536, not 8") || !strings.Contains(d, "distance_metric l2, not dot") {
		t.Errorf("diff: %q", d)
	}
}

func TestFromArrowReadsOptionsAndRefusesOtherSchemas(t *testing.T) {
	o, _ := ParseOptions(&api.CreateContextStoreRequest{EmbeddingDim: ptr(4), DistanceMetric: ptr("cosine"), BlobColumns: []string{"binary_payload"}})
	got, err := FromArrow(Schema(o))
	if err != nil || !reflect.DeepEqual(got, o) {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	// The options say 8 but the column is 4 wide: refused.
	o8 := o
	o8.EmbeddingDim = 8
	raw, _ := json.Marshal(o8)
	sch := Schema(o)
	md := sch.Metadata()
	keys, vals := md.Keys(), append([]string(nil), md.Values()...)
	for i, k := range keys {
		if k == MetaOptions {
			vals[i] = string(raw)
		}
	}
	if _, err := FromArrow(withMeta(sch, keys, vals)); err == nil || !strings.Contains(err.Error(), "embedding") {
		t.Fatalf("mismatched dim: %v", err)
	}
}

func TestRecordRoundTrip(t *testing.T) {
	o, _ := ParseOptions(&api.CreateContextStoreRequest{EmbeddingDim: ptr(3)})
	now := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	in := api.AddContextRecord{ContextRecordFields: api.ContextRecordFields{
		RunID: "run", BotID: ptr("bot"), Role: "assistant", TextPayload: ptr("hello world"), BinaryPayload: []byte{1, 2},
		Embedding: []float32{1, 2, 3}, ExternalID: ptr("ext"), Metadata: json.RawMessage(`{ "a" : 1 }`),
		StateMetadata: &api.ContextStateMetadata{Step: ptr(int32(3)), Custom: ptr("c")},
		Relationships: []api.ContextRelationship{{TargetID: "t1", Relation: "cites", Weight: ptr(float32(0.5))}, {TargetID: "t2", Relation: "x"}},
		ExpiresAt:     ptr(now.Add(time.Hour)),
	}}
	r, err := Normalize("records[0]", &in, now, o)
	if err != nil {
		t.Fatal(err)
	}
	if r.ID == "" || r.ContentType != DefaultContentType || r.LifecycleStatus != StatusActive || string(r.Metadata) != `{"a":1}` {
		t.Fatalf("normalized: %+v", r)
	}
	plain := api.ContextRecord{ID: "p", CreatedAt: now, ContextRecordFields: api.ContextRecordFields{RunID: "run", Role: "user",
		ContentType: "text/plain", LifecycleStatus: "active"}}
	rec, err := ToRecord([]api.ContextRecord{r, plain}, o)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	rows := NewRows(rec)
	for i, want := range []api.ContextRecord{r, plain} {
		got, err := rows.Record(i)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("row %d:\n got %+v\nwant %+v", i, got, want)
		}
	}
}

func TestNormalizeRefuses(t *testing.T) {
	o, _ := ParseOptions(&api.CreateContextStoreRequest{EmbeddingDim: ptr(2)})
	now := time.Now()
	nan := float32(math.NaN())
	cases := map[string]api.AddContextRecord{
		"embedding":        {ContextRecordFields: api.ContextRecordFields{RunID: "r", Embedding: []float32{1}}},
		"embedding[1]":     {ContextRecordFields: api.ContextRecordFields{RunID: "r", Embedding: []float32{1, nan}}},
		"run_id":           {},
		"content_type":     {ContextRecordFields: api.ContextRecordFields{RunID: "r", ContentType: ContentTypeTombstone}},
		"lifecycle_status": {ContextRecordFields: api.ContextRecordFields{RunID: "r", LifecycleStatus: StatusSuperseded}},
		"metadata":         {ContextRecordFields: api.ContextRecordFields{RunID: "r", Metadata: json.RawMessage(`[1]`)}},
		"target_id":        {ContextRecordFields: api.ContextRecordFields{RunID: "r", Relationships: []api.ContextRelationship{{Relation: "x"}}}},
		"payload_size":     {ContextRecordFields: api.ContextRecordFields{RunID: "r", PayloadSize: ptr(int64(-1))}},
		"id":               {ID: "a\x00b", ContextRecordFields: api.ContextRecordFields{RunID: "r"}},
	}
	for field, in := range cases {
		_, err := Normalize("records[0]", &in, now, o)
		if api.StatusOf(err) != 400 || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: %v", field, err)
		}
	}
}

func TestDistancesAreLanceDBs(t *testing.T) {
	q, v := []float32{1, 2, 2}, []float32{2, 0, 1}
	if d := l2(q, v); d != 6 { // 1 + 4 + 1
		t.Errorf("l2 %v", d)
	}
	if d := dot(q, v); d != 1-4 {
		t.Errorf("dot %v", d)
	}
	// q·v = 4, |q| = 3, |v| = √5
	if d, want := cosine(q, v), float32(1-4/(3*math.Sqrt(5))); math.Abs(float64(d-want)) > 1e-7 {
		t.Errorf("cosine %v want %v", d, want)
	}
	// Longer than one lane pass (8): against a float64 reference.
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{7, 8, 9, 768, 1537} {
		a, b := make([]float32, n), make([]float32, n)
		var l, d, na, nb float64
		for i := range a {
			a[i], b[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
			x, y := float64(a[i]), float64(b[i])
			l += (x - y) * (x - y)
			d += x * y
			na += x * x
			nb += y * y
		}
		for _, c := range []struct {
			name      string
			got, want float64
		}{{"l2", float64(l2(a, b)), l}, {"dot", float64(dot(a, b)), 1 - d}, {"cosine", float64(cosine(a, b)), 1 - d/math.Sqrt(na*nb)}} {
			if math.Abs(c.got-c.want) > 1e-5*math.Max(1, math.Abs(c.want)) {
				t.Errorf("n=%d %s: %v, float64 reference %v", n, c.name, c.got, c.want)
			}
		}
	}
	if _, ok := DistanceFor("hamming"); ok {
		t.Error("unknown metric accepted")
	}
}

func TestTopKKeepsTheBest(t *testing.T) {
	k := NewTopK(3)
	for i, s := range []float64{5, 1, 4, 1, 9, 0, 3} {
		k.Push(string(rune('a'+i)), s)
	}
	got := k.Sorted()
	want := []Candidate{{"f", 0}, {"b", 1}, {"d", 1}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%v", got)
	}
	if k.Worst() != 1 {
		t.Fatalf("worst %v", k.Worst())
	}
}

func TestTokenize(t *testing.T) {
	got := Tokenize("Hello, WORLD! naïve café-au-lait x2 ½")
	want := []string{"hello", "world", "naïve", "café", "au", "lait", "x2", "½"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%q", got)
	}
}

// BM25 against the formula worked by hand on a three-document corpus.
func TestBM25MatchesTheFormula(t *testing.T) {
	b := NewBM25("quick fox")
	b.Add("a", "the quick brown fox")     // 4 terms: quick 1, fox 1
	b.Add("b", "quick quick quick")       // 3 terms: quick 3
	b.Add("c", "lazy dog sleeps all day") // 5 terms, no match
	got := b.Scores()
	avg := 12.0 / 3
	idf := func(df float64) float64 { return math.Log(1 + (3-df+0.5)/(df+0.5)) }
	term := func(tf, dl float64) float64 { return tf * 2.2 / (tf + 1.2*(1-0.75+0.75*dl/avg)) }
	wantA := idf(2)*term(1, 4) + idf(1)*term(1, 4)
	wantB := idf(2) * term(3, 3)
	if len(got) != 2 {
		t.Fatalf("%v", got)
	}
	m := map[string]float64{got[0].ID: got[0].Score, got[1].ID: got[1].Score}
	if math.Abs(m["a"]-wantA) > 1e-12 || math.Abs(m["b"]-wantB) > 1e-12 {
		t.Fatalf("scores %v, want a=%v b=%v", m, wantA, wantB)
	}
	if got[0].ID != "a" { // the rarer term fox outweighs three quicks
		t.Fatalf("order %v", got)
	}
	if !NewBM25(" ,; ").Empty() {
		t.Fatal("a query of separators has terms")
	}
}

func TestFuseRRF(t *testing.T) {
	got := FuseRRF([]string{"a", "b", "c"}, []string{"c", "d"})
	if got[0].ID != "c" || got[0].Score != 1.0/63+1.0/61 || !reflect.DeepEqual(got[0].Ranks, []int{3, 1}) {
		t.Fatalf("%+v", got)
	}
	if got[1].ID != "a" || got[2].ID != "b" || got[3].ID != "d" { // b and d tie at rank 2: smaller id first
		t.Fatalf("order %+v", got)
	}
}

func withMeta(sch *arrow.Schema, keys, vals []string) *arrow.Schema {
	md := arrow.NewMetadata(keys, vals)
	return arrow.NewSchema(sch.Fields(), &md)
}

// Live reads nothing outside LiveColumns: on rows holding only those columns it gives
// what it gives on whole rows, for every combination of the include flags.
func TestLiveReadsOnlyLiveColumns(t *testing.T) {
	o, _ := ParseOptions(&api.CreateContextStoreRequest{EmbeddingDim: ptr(2)})
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	rec := func(id, ctype, status string, expires, retired *time.Time) api.ContextRecord {
		return api.ContextRecord{ID: id, CreatedAt: now, ContextRecordFields: api.ContextRecordFields{RunID: "r", Role: "user",
			ContentType: ctype, LifecycleStatus: status, ExpiresAt: expires, RetiredAt: retired}}
	}
	past, future := ptr(now.Add(-time.Hour)), ptr(now.Add(time.Hour))
	recs := []api.ContextRecord{
		rec("live", "text/plain", StatusActive, future, nil),
		rec("tomb", ContentTypeTombstone, StatusActive, nil, nil),
		rec("expired", "text/plain", StatusActive, past, nil),
		rec("retired", "text/plain", StatusRetired, nil, nil),
		rec("superseded", "text/plain", StatusSuperseded, nil, nil),
		rec("retired_at", "text/plain", StatusActive, nil, past),
	}
	full, err := ToRecord(recs, o)
	if err != nil {
		t.Fatal(err)
	}
	defer full.Release()
	for _, f := range []Filter{{Now: now}, {Now: now, IncludeExpired: true}, {Now: now, IncludeRetired: true}, {Now: now, IncludeExpired: true, IncludeRetired: true}} {
		var cols []arrow.Array
		var fields []arrow.Field
		for _, c := range f.LiveColumns() {
			i := full.Schema().FieldIndices(c)[0]
			cols, fields = append(cols, full.Column(i)), append(fields, full.Schema().Field(i))
		}
		part := array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, full.NumRows())
		whole, only := NewRows(full), NewRows(part)
		for i := range recs {
			if a, b := f.Live(whole, i), f.Live(only, i); a != b {
				t.Errorf("%+v: record %s: Live %v on whole rows, %v on LiveColumns", f, recs[i].ID, a, b)
			}
		}
		part.Release()
	}
}
