package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
)

// roundTripInput exercises every column: nulls, empty strings and lists, unicode,
// float edge values, a payload, nested metadata, repeated ids.
const roundTripInput = `{"records":[
 {"id":"m-1","rollout_id":"traj-1","problem_id":"p-7","dataset":"gsm8k","sequence_order":3,"role":"tool",
  "created_at":"2024-05-01T12:00:00.123456Z","content":"héllo \"world\"\n🚀","content_type":"application/json",
  "model_input_string":"in","model_output_string":"out","rationale":"why","problem_text":"2+2","user_metadata":"{not json",
  "input_tokens":[1,2,2147483647,-2147483648],"output_tokens":[],"num_input_tokens":4,"num_output_tokens":0,
  "output_logprobs":[-0.5,-1.25,1e-7,3.4e38],"input_logprobs":[],"ref_logprobs":[0],"loss_mask":[1,0,-128,127],
  "advantage":0.1,"reward":1,"raw_reward":-0.0025,"grader_id":"g","score":0.75,"include_in_training":false,
  "exclude_reason":"","policy_version":"ckpt-42",
  "relationships":[{"target_id":"m-0","relation":"reply_to","weight":0.5},{"target_id":"m/2","relation":"next"}],
  "binary_payload":"AAECA//+/f8=","payload_size":8,"payload_checksum":"sha256:abc","artifact_type":"screenshot",
  "metadata":{"a":[1,{"b":null}],"c":"d","e":1.5e300,"f":true}},
 {"id":"m-2","rollout_id":"traj-1"},
 {"id":"m-3","rollout_id":"traj-2","role":"grade","relationships":[],"metadata":"just a string","include_in_training":true,
  "binary_payload":""},
 {"id":"m-1","rollout_id":"traj-1","sequence_order":-1,"metadata":[],"reward":-3.5}
]}`

func TestRoundTripThroughLanceKeepsEveryValue(t *testing.T) {
	ctx := context.Background()
	recs, err := ParseAppendJSON([]byte(roundTripInput), DecodeOptions{Now: fixedClock})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := ToBatch(recs, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer batch.Release()
	checkBatch(t, batch)
	rdr, err := array.NewRecordReader(Schema(), []arrow.RecordBatch{batch})
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	ds, err := lance.WriteStore(ctx, objstore.NewMem(), rdr, lance.WriteOptions{})
	if err != nil {
		t.Fatalf("write a Lance dataset: %v", err)
	}
	if !ds.Schema().Arrow().Equal(Schema()) {
		t.Fatalf("the dataset's schema differs:\n%s", ds.Schema().Arrow())
	}
	batches, err := ds.Collect(ctx, lance.ScanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got []Record
	for _, b := range batches {
		rs, err := FromBatch(b, true)
		b.Release()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, rs...)
	}

	// The expected output is the input plus the defaults the server fills.
	var in struct {
		Records []map[string]any `json:"records"`
	}
	if err := json.Unmarshal([]byte(roundTripInput), &in); err != nil {
		t.Fatal(err)
	}
	now := fixedNow.UTC().Truncate(time.Microsecond).Format(time.RFC3339Nano)
	defaults := map[string]any{"problem_id": nil, "sequence_order": 0.0, "role": "assistant", "created_at": now, "content_type": "text/plain"}
	if len(got) != len(in.Records) {
		t.Fatalf("%d records back, want %d", len(got), len(in.Records))
	}
	for i, want := range in.Records {
		for k, v := range defaults {
			if _, ok := want[k]; !ok {
				if k == "problem_id" {
					v = want["rollout_id"]
				}
				want[k] = v
			}
		}
		if p, ok := want["binary_payload"].(string); ok {
			if _, ok := want["payload_size"]; !ok {
				b, _ := decodeBase64(p)
				want["payload_size"] = float64(len(b))
			}
		}
		b, err := json.Marshal(got[i])
		if err != nil {
			t.Fatal(err)
		}
		var have map[string]any
		if err := json.Unmarshal(b, &have); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(have, want) {
			t.Errorf("record %d differs:\n got  %s\n want %s", i, b, mustJSON(want))
			for _, k := range sortedKeys(have, want) {
				if !reflect.DeepEqual(have[k], want[k]) {
					t.Errorf("  %s: got %v, want %v", k, have[k], want[k])
				}
			}
		}
		// The same record, re-read as AddRecord.ToRecord, is what the read gave.
		if w := recs[i].ToRecord(); !reflect.DeepEqual(mustJSON(w), string(b)) {
			t.Errorf("record %d: ToRecord gives %s, the read gave %s", i, mustJSON(w), b)
		}
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func sortedKeys(ms ...map[string]any) []string {
	seen := map[string]bool{}
	for _, m := range ms {
		for k := range m {
			seen[k] = true
		}
	}
	var out []string
	for k := range seen {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestLanceScansRolloutColumnsWithFiltersAndProjection(t *testing.T) {
	ctx := context.Background()
	recs, err := ParseAppendJSON([]byte(roundTripInput), DecodeOptions{Now: fixedClock})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := ToBatch(recs, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer batch.Release()
	rdr, _ := array.NewRecordReader(Schema(), []arrow.RecordBatch{batch})
	defer rdr.Release()
	ds, err := lance.WriteStore(ctx, objstore.NewMem(), rdr, lance.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	filter, err := ParseFilters(`{"rollout_id":"traj-1","role":"assistant"}`)
	if err != nil {
		t.Fatal(err)
	}
	batches, err := ds.Collect(ctx, lance.ScanOptions{Columns: DefaultReadColumns(nil), Filter: filter})
	if err != nil {
		t.Fatalf("scan with %q: %v", filter, err)
	}
	var ids []string
	for _, b := range batches {
		rs, err := FromBatch(b, true)
		b.Release()
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			if r.BinaryPayload != nil {
				t.Errorf("%s: payload read though not projected", r.ID)
			}
			ids = append(ids, fmt.Sprintf("%s/%d", r.ID, r.SequenceOrder))
		}
	}
	if !reflect.DeepEqual(ids, []string{"m-2/0", "m-1/-1"}) {
		t.Fatalf("filter %q selected %v", filter, ids)
	}
}
