package rollout

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/lancectx/lancectx/api"
)

var fixedNow = time.Date(2025, 3, 4, 5, 6, 7, 891234567, time.FixedZone("CET", 3600))

func fixedClock() time.Time { return fixedNow }

func ptr[T any](v T) *T { return &v }

func TestParseAppendJSONAppliesDefaults(t *testing.T) {
	body := `{"records":[{"id":"m-1","rollout_id":"traj-1"}]}`
	recs, err := ParseAppendJSON([]byte(body), DecodeOptions{Now: fixedClock})
	if err != nil {
		t.Fatal(err)
	}
	want := AddRecord{
		ID: "m-1", RolloutID: "traj-1", ProblemID: "traj-1", Role: "assistant", ContentType: "text/plain",
		CreatedAt: time.Date(2025, 3, 4, 4, 6, 7, 891234000, time.UTC),
	}
	if !reflect.DeepEqual(recs, []AddRecord{want}) {
		t.Fatalf("got %+v\nwant %+v", recs[0], want)
	}
	if recs[0].CreatedAt.Location() != time.UTC {
		t.Fatal("created_at is not UTC")
	}
}

func TestParseAppendJSONKeepsEveryField(t *testing.T) {
	body := `{"records":[{
		"id":"m-1","rollout_id":"traj-1","problem_id":"p-7","dataset":"gsm8k","sequence_order":3,
		"role":"tool","created_at":"2024-05-01T12:00:00.123456789+02:00","content":"hi","content_type":"application/json",
		"model_input_string":"in","model_output_string":"out","rationale":"why","problem_text":"2+2","user_metadata":"u",
		"input_tokens":[1,2,3],"output_tokens":[],"num_input_tokens":3,"num_output_tokens":0,
		"output_logprobs":[-0.5,-1.25],"input_logprobs":[],"ref_logprobs":[0],"loss_mask":[1,0,-1],
		"advantage":0.5,"reward":1,"raw_reward":-2.5e-3,"grader_id":"g","score":0.75,"include_in_training":false,
		"exclude_reason":"","policy_version":"ckpt-42",
		"relationships":[{"target_id":"m-0","relation":"reply_to","weight":0.5},{"target_id":"m-2","relation":"next"}],
		"binary_payload":"aGVsbG8=","payload_size":5,"payload_checksum":"sha256:x","artifact_type":"screenshot",
		"metadata":{ "a" : [1, {"b": null}], "c": "d" }
	}]}`
	recs, err := ParseAppendJSON([]byte(body), DecodeOptions{Now: fixedClock})
	if err != nil {
		t.Fatal(err)
	}
	want := AddRecord{
		ID: "m-1", RolloutID: "traj-1", ProblemID: "p-7", Dataset: ptr("gsm8k"), SequenceOrder: 3,
		Role: "tool", CreatedAt: time.Date(2024, 5, 1, 10, 0, 0, 123456000, time.UTC), Content: ptr("hi"),
		ContentType: "application/json", ModelInputString: ptr("in"), ModelOutputString: ptr("out"),
		Rationale: ptr("why"), ProblemText: ptr("2+2"), UserMetadata: ptr("u"),
		InputTokens: []int32{1, 2, 3}, OutputTokens: []int32{}, NumInputTokens: ptr[int32](3), NumOutputTokens: ptr[int32](0),
		OutputLogprobs: []float32{-0.5, -1.25}, InputLogprobs: []float32{}, RefLogprobs: []float32{0}, LossMask: []int8{1, 0, -1},
		Advantage: ptr[float32](0.5), Reward: ptr[float32](1), RawReward: ptr[float32](-2.5e-3), GraderID: ptr("g"),
		Score: ptr[float32](0.75), IncludeInTraining: ptr(false), ExcludeReason: ptr(""), PolicyVersion: ptr("ckpt-42"),
		Relationships: []Relationship{{"m-0", "reply_to", ptr[float32](0.5)}, {"m-2", "next", nil}},
		BinaryPayload: []byte("hello"), PayloadSize: ptr[int64](5), PayloadChecksum: ptr("sha256:x"),
		ArtifactType: ptr("screenshot"), Metadata: json.RawMessage(`{"a":[1,{"b":null}],"c":"d"}`),
	}
	if !reflect.DeepEqual(recs[0], want) {
		g, _ := json.Marshal(recs[0])
		w, _ := json.Marshal(want)
		t.Fatalf("got  %s\nwant %s", g, w)
	}
}

func TestParseAppendJSONFillsPayloadSize(t *testing.T) {
	cases := map[string]struct {
		payload string
		size    int64
	}{
		"a payload without payload_size gets its length": {`"aGVsbG8="`, 5},
		"an empty payload has size zero":                 {`""`, 0},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			body := `{"records":[{"id":"a","rollout_id":"t","binary_payload":` + tc.payload + `}]}`
			recs, err := ParseAppendJSON([]byte(body), DecodeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if recs[0].PayloadSize == nil || *recs[0].PayloadSize != tc.size || recs[0].BinaryPayload == nil {
				t.Fatalf("payload %v size %v", recs[0].BinaryPayload, recs[0].PayloadSize)
			}
		})
	}
	// A payload_size without a payload describes a payload kept elsewhere: allowed.
	recs, err := ParseAppendJSON([]byte(`{"records":[{"id":"a","rollout_id":"t","payload_size":99}]}`), DecodeOptions{})
	if err != nil || *recs[0].PayloadSize != 99 || recs[0].BinaryPayload != nil {
		t.Fatalf("got %+v, %v", recs, err)
	}
}

func TestParseAppendJSONTreatsNullAsAbsent(t *testing.T) {
	body := `{"records":[{"id":"a","rollout_id":"t","problem_id":null,"role":null,"content_type":null,"created_at":null,
		"sequence_order":null,"dataset":null,"input_tokens":null,"relationships":null,"binary_payload":null,"metadata":null}]}`
	recs, err := ParseAppendJSON([]byte(body), DecodeOptions{Now: fixedClock})
	if err != nil {
		t.Fatal(err)
	}
	r := recs[0]
	if r.ProblemID != "t" || r.Role != DefaultRole || r.ContentType != DefaultContentType || r.Dataset != nil ||
		r.InputTokens != nil || r.Relationships != nil || r.BinaryPayload != nil || r.Metadata != nil || r.CreatedAt.IsZero() {
		t.Fatalf("null did not mean absent: %+v", r)
	}
}

func TestOneRequestSharesOneTimestamp(t *testing.T) {
	calls := 0
	clock := func() time.Time { calls++; return fixedNow.Add(time.Duration(calls) * time.Hour) }
	recs, err := ParseAppendJSON([]byte(`{"records":[{"id":"a","rollout_id":"t"},{"id":"b","rollout_id":"t"}]}`), DecodeOptions{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	if calls != 1 || !recs[0].CreatedAt.Equal(recs[1].CreatedAt) {
		t.Fatalf("clock called %d times; %v %v", calls, recs[0].CreatedAt, recs[1].CreatedAt)
	}
}

func TestRepeatedIDsAreKeptInRequestOrder(t *testing.T) {
	recs, err := ParseAppendJSON([]byte(`{"records":[{"id":"a","rollout_id":"t","content":"1"},{"id":"a","rollout_id":"t","content":"2"}]}`), DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || *recs[0].Content != "1" || *recs[1].Content != "2" {
		t.Fatalf("got %+v", recs)
	}
}

func TestTooManyDistinctRolesAreRefused(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"records":[`)
	for i := range MaxDistinctRoles + 1 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":"%d","rollout_id":"t","role":"r%d"}`, i, i)
	}
	b.WriteString(`]}`)
	_, err := ParseAppendJSON([]byte(b.String()), DecodeOptions{})
	if e, ok := api.AsError(err); !ok || e.Status != 400 || !strings.Contains(e.Message, "distinct role values") {
		t.Fatalf("got %v", err)
	}
}
