package rollout

import (
	"bytes"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/lancectx/lancectx/internal/arrowrows"
)

// arrowSeed is an Arrow IPC stream of records as ToBatch lays them out.
func arrowSeed(t testing.TB, recs []AddRecord, opts ...ipc.Option) []byte {
	t.Helper()
	b, err := ToBatch(recs, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, append([]ipc.Option{ipc.WithSchema(b.Schema())}, opts...)...)
	if err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// FuzzParseAppendArrow feeds arbitrary bytes to the Arrow body decoder: it never
// panics, refuses with a 4xx *api.Error, and what it accepts is sound Arrow (every
// buffer checked) that lays out as the rollout schema, with valid ids, as the WAL
// will lay it out.
func FuzzParseAppendArrow(f *testing.F) {
	reward := float32(0.5)
	content := "hello"
	ts := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	recs := []AddRecord{
		{ID: "a", RolloutID: "r", ProblemID: "r", Role: "user", ContentType: "text/plain", CreatedAt: ts, Content: &content,
			InputTokens: []int32{1, 2}, Relationships: []Relationship{{TargetID: "b", Relation: "next", Weight: &reward}}},
		{ID: "b", RolloutID: "r", ProblemID: "p", Role: "assistant", ContentType: "text/plain", CreatedAt: ts, Reward: &reward,
			BinaryPayload: []byte{1, 2, 3}, Metadata: []byte(`{"k":1}`)},
	}
	f.Add(arrowSeed(f, recs))
	f.Add(arrowSeed(f, recs, ipc.WithLZ4()))
	f.Add(arrowSeed(f, recs, ipc.WithZstd()))
	f.Add(arrowSeed(f, recs[:1])[:100])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, body []byte) {
		out, err := ParseAppendArrow(body, fuzzOpts)
		if err != nil {
			checkRefusal(t, err)
			if out != nil {
				t.Fatalf("refusal with %d batches", len(out))
			}
			return
		}
		defer releaseBatches(out)
		rows := 0
		for _, r := range out {
			rows += int(r.NumRows())
			for i, c := range r.Columns() {
				if err := arrowrows.Validate(c); err != nil {
					t.Fatalf("accepted column %s is not sound: %v", r.Schema().Field(i).Name, err)
				}
			}
			conformed, err := arrowrows.Conform(r, Schema())
			if err != nil {
				t.Fatalf("accepted batch does not lay out as the rollout schema: %v", err)
			}
			ids := conformed.Column(0).(*array.String)
			for i := 0; i < ids.Len(); i++ {
				if ids.IsNull(i) || ids.Value(i) == "" {
					t.Fatalf("accepted row %d without an id", i)
				}
			}
			if _, err := FromBatch(conformed, true); err != nil {
				t.Fatalf("accepted batch does not read back: %v", err)
			}
			conformed.Release()
		}
		if rows == 0 || rows > fuzzOpts.MaxRecords {
			t.Fatalf("accepted %d rows", rows)
		}
	})
}
