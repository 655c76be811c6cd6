package rollout

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"net/url"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/rollout/rollouttest"
)

var fixedNow = time.Date(2025, 3, 4, 5, 6, 7, 891234567, time.FixedZone("CET", 3600))

func fixedClock() time.Time { return fixedNow }

func ptr[T any](v T) *T { return &v }

func TestDecodeAppendJSONAppliesDefaults(t *testing.T) {
	body := `{"records":[{"id":"m-1","rollout_id":"traj-1"}]}`
	recs, err := DecodeAppendJSON(strings.NewReader(body), DecodeOptions{Now: fixedClock})
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

func TestDecodeAppendJSONKeepsEveryField(t *testing.T) {
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
	recs, err := DecodeAppendJSON(strings.NewReader(body), DecodeOptions{Now: fixedClock})
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

func TestDecodeAppendJSONFillsPayloadSize(t *testing.T) {
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

func TestDecodeAppendJSONTreatsNullAsAbsent(t *testing.T) {
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

// multipartBody builds a multipart body with the metadata part first.
func multipartBody(t *testing.T, meta string, parts map[string][]byte, order []string) (*bytes.Buffer, string) {
	t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	if err := w.WriteField("metadata", meta); err != nil {
		t.Fatal(err)
	}
	for _, name := range order {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name=%q; filename="blob.bin"`, name))
		h.Set("Content-Type", "application/octet-stream")
		pw, err := w.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		pw.Write(parts[name])
	}
	w.Close()
	return &buf, w.FormDataContentType()
}

func TestDecodeAppendMultipartAttachesPartsByIndex(t *testing.T) {
	meta := `{"records":[
		{"id":"a","rollout_id":"t","payload_size":5},
		{"id":"b","rollout_id":"t"},
		{"id":"a","rollout_id":"t","artifact_type":"image"},
		{"id":"c","rollout_id":"t","payload_size":0}]}`
	bin := []byte{0, 1, 2, 0xff, '\r', '\n', '-', '-'}
	parts := map[string][]byte{"0": []byte("hello"), "2": bin, "3": {}}
	body, ct := multipartBody(t, meta, parts, []string{"2", "0", "3"})
	req := httptest.NewRequest("POST", "/api/v1/rollouts/s/records", body)
	req.Header.Set("Content-Type", ct)
	recs, err := DecodeAppendRequest(req, DecodeOptions{Now: fixedClock})
	if err != nil {
		t.Fatal(err)
	}
	if string(recs[0].BinaryPayload) != "hello" || *recs[0].PayloadSize != 5 {
		t.Errorf("record 0: %q %v", recs[0].BinaryPayload, recs[0].PayloadSize)
	}
	if recs[1].BinaryPayload != nil || recs[1].PayloadSize != nil {
		t.Errorf("record 1 got a payload: %v", recs[1].BinaryPayload)
	}
	if !bytes.Equal(recs[2].BinaryPayload, bin) || *recs[2].PayloadSize != int64(len(bin)) {
		t.Errorf("record 2: %v %v", recs[2].BinaryPayload, recs[2].PayloadSize)
	}
	if recs[3].BinaryPayload == nil || len(recs[3].BinaryPayload) != 0 {
		t.Errorf("record 3: %v", recs[3].BinaryPayload)
	}
}

func TestDecodeAppendMultipartStreamsLargeParts(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	meta := fmt.Sprintf(`{"records":[{"id":"a","rollout_id":"t","payload_size":%d}]}`, len(big))
	body, ct := multipartBody(t, meta, map[string][]byte{"0": big}, []string{"0"})
	recs, err := DecodeAppendMultipart(body, ct[strings.Index(ct, "boundary=")+9:], DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(recs[0].BinaryPayload, big) || cap(recs[0].BinaryPayload) != len(big) {
		t.Fatalf("payload of %d bytes (cap %d)", len(recs[0].BinaryPayload), cap(recs[0].BinaryPayload))
	}
}

func TestDecodeAppendRequestDispatchesOnContentType(t *testing.T) {
	cases := map[string]struct {
		ct     string
		body   string
		status int
	}{
		"application/json is decoded":                 {"application/json", `{"records":[{"id":"a","rollout_id":"t"}]}`, 0},
		"application/json with utf-8 is decoded":      {"application/json; charset=utf-8", `{"records":[{"id":"a","rollout_id":"t"}]}`, 0},
		"no Content-Type is decoded as JSON":          {"", `{"records":[{"id":"a","rollout_id":"t"}]}`, 0},
		"text/plain is a 415":                         {"text/plain", `{}`, 415},
		"application/x-ndjson is a 415":               {"application/x-ndjson", `{}`, 415},
		"multipart/mixed is a 415":                    {"multipart/mixed; boundary=x", `{}`, 415},
		"multipart/form-data without boundary is 400": {"multipart/form-data", `{}`, 400},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req := httptest.NewRequest("POST", "/x", strings.NewReader(tc.body))
			if tc.ct != "" {
				req.Header.Set("Content-Type", tc.ct)
			}
			_, err := DecodeAppendRequest(req, DecodeOptions{})
			if got := statusOf(err); got != tc.status {
				t.Fatalf("status %d (%v), want %d", got, err, tc.status)
			}
		})
	}
}

func statusOf(err error) int {
	if err == nil {
		return 0
	}
	return api.StatusOf(err)
}

// chunked hides the body's length, like a chunked upload.
type chunked struct{ io.Reader }

func TestBodyLimitsHoldWithoutContentLength(t *testing.T) {
	opts := DecodeOptions{MaxBodyBytes: 1000}
	body := `{"records":[{"id":"a","rollout_id":"t","content":"` + strings.Repeat("x", 2000) + `"}]}`
	req := httptest.NewRequest("POST", "/x", chunked{strings.NewReader(body)})
	req.Header.Set("Content-Type", "application/json")
	req.ContentLength = -1
	if _, err := DecodeAppendRequest(req, opts); statusOf(err) != 413 {
		t.Fatalf("JSON: %v", err)
	}
	mp, ct := multipartBody(t, `{"records":[{"id":"a","rollout_id":"t"}]}`, map[string][]byte{"0": bytes.Repeat([]byte("y"), 2000)}, []string{"0"})
	req = httptest.NewRequest("POST", "/x", chunked{mp})
	req.Header.Set("Content-Type", ct)
	req.ContentLength = -1
	if _, err := DecodeAppendRequest(req, opts); statusOf(err) != 413 {
		t.Fatalf("multipart: %v", err)
	}
}

// TestBadRequestCorpus replays the shared corpus against the layer each case names.
// Cases of the store layer need the registry, so only the worker's tests replay them.
// (Sequential subtests: replayed counts the ones that ran.)
func TestBadRequestCorpus(t *testing.T) {
	corpus, err := rollouttest.BadRequests()
	if err != nil {
		t.Fatal(err)
	}
	opts := DecodeOptions{
		MaxBodyBytes: corpus.Limits.MaxBodyBytes,
		MaxRecords:   corpus.Limits.MaxRecords,
		MaxPartBytes: corpus.Limits.MaxPartBytes,
		Now:          fixedClock,
	}
	replayed := 0
	seen := map[string]bool{}
	workerOnly := 0
	for _, tc := range corpus.Cases {
		if seen[tc.Name] {
			t.Errorf("case name %q repeated", tc.Name)
		}
		seen[tc.Name] = true
		if tc.Layer == rollouttest.LayerStore {
			workerOnly++ // needs the registry: the worker's tests replay it
			continue
		}
		t.Run(tc.Name, func(t *testing.T) {
			if tc.WantStatus < 400 || tc.WantStatus > 499 {
				t.Fatalf("want_status %d is not a 4xx", tc.WantStatus)
			}
			var err error
			switch tc.Layer {
			case rollouttest.LayerBody:
				req := corpusRequest(t, &tc)
				_, err = DecodeAppendRequest(req, opts)
			case rollouttest.LayerCreate:
				req := corpusRequest(t, &tc)
				var body api.CreateRolloutStoreRequest
				if err = api.DecodeJSON(req, api.DefaultMaxBodyBytes, &body); err == nil {
					err = api.ValidateName(body.Name)
				}
			case rollouttest.LayerName:
				seg := strings.Split(strings.TrimPrefix(tc.Path, "/api/v1/rollouts/"), "/")[0]
				name, uerr := url.PathUnescape(seg)
				if uerr != nil || name != tc.StoreName {
					t.Fatalf("path segment %q decodes to %q (%v), want %q", seg, name, uerr, tc.StoreName)
				}
				err = api.ValidateName(name)
				if err == nil {
					// The body is valid: only the name is wrong.
					_, err = DecodeAppendRequest(corpusRequest(t, &tc), opts)
					t.Fatalf("the name %q was accepted (body: %v)", name, err)
				}
			case rollouttest.LayerQuery:
				req := corpusRequest(t, &tc)
				if tc.Method == "GET" {
					_, err = ParseListQuery(req.URL.Query())
				} else {
					if _, berr := DecodeAppendRequest(req, opts); berr != nil {
						t.Fatalf("the body of a query case is refused: %v", berr)
					}
					_, err = api.QueryBool(req.URL.Query(), "flush", false)
				}
			case rollouttest.LayerID:
				err = api.ValidateID(tc.ID())
			default:
				t.Fatalf("unknown layer %q", tc.Layer)
			}
			replayed++
			e, ok := api.AsError(err)
			if !ok {
				t.Fatalf("got %v, want a %d %s", err, tc.WantStatus, tc.WantCode)
			}
			if e.Status != tc.WantStatus || e.Code != tc.WantCode {
				t.Fatalf("got %d %s (%s), want %d %s", e.Status, e.Code, e.Message, tc.WantStatus, tc.WantCode)
			}
			if !strings.Contains(e.Message, tc.WantMessage) {
				t.Fatalf("message %q does not contain %q", e.Message, tc.WantMessage)
			}
		})
	}
	if replayed < 40 {
		t.Fatalf("only %d cases replayed at this level", replayed)
	}
	t.Logf("replayed %d cases; %d need a worker", replayed, workerOnly)
}

func corpusRequest(t *testing.T, tc *rollouttest.BadRequest) *http.Request {
	t.Helper()
	req, err := tc.NewRequest(context.Background(), "", "exp-1")
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func TestDeclaredSizesDoNotAllocateAhead(t *testing.T) {
	const huge = 900 << 20
	opts := DecodeOptions{MaxBodyBytes: 1 << 30, Now: fixedClock}
	meta := fmt.Sprintf(`{"records":[{"id":"a","rollout_id":"t","payload_size":%d}]}`, huge)
	body, ct := multipartBody(t, meta, map[string][]byte{"0": []byte("tiny")}, []string{"0"})
	jsonReq := httptest.NewRequest("POST", "/x", strings.NewReader(`{"records":[{"id":"a","rollout_id":"t"}]}`))
	jsonReq.ContentLength = huge // a client's word, not yet bytes
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := DecodeAppendMultipart(body, ct[strings.Index(ct, "boundary=")+9:], opts)
	if e, ok := api.AsError(err); !ok || e.Status != 400 || !strings.Contains(e.Message, "is 4 bytes") {
		t.Fatalf("got %v", err)
	}
	if _, err := DecodeAppendRequest(jsonReq, opts); err != nil {
		t.Fatalf("JSON: %v", err)
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 100<<20 {
		t.Fatalf("allocated %d MiB for a declared %d MiB", grew>>20, huge>>20)
	}
}
