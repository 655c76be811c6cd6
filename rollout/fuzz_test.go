package rollout

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/lance/expr"
	"github.com/lancectx/lancectx/rollout/rollouttest"
)

var fuzzOpts = DecodeOptions{MaxBodyBytes: 1 << 20, MaxRecords: 64, MaxPartBytes: 1 << 16, Now: fixedClock}

// checkRefusal fails t unless err is a 4xx *api.Error.
func checkRefusal(t *testing.T, err error) {
	t.Helper()
	e, ok := api.AsError(err)
	if !ok || e.Status < 400 || e.Status > 499 || e.Code == "" || e.Message == "" {
		t.Fatalf("refusal is not a 4xx *api.Error: %#v", err)
	}
}

// checkAccepted fails t unless accepted records pass validation, convert to Arrow and
// read back unchanged.
func checkAccepted(t *testing.T, recs []AddRecord) {
	t.Helper()
	if err := ValidateRecords(recs); err != nil {
		t.Fatalf("decoded records fail validation: %v", err)
	}
	for i := range recs {
		if p := recs[i].BinaryPayload; p != nil && (recs[i].PayloadSize == nil || *recs[i].PayloadSize != int64(len(p))) {
			t.Fatalf("records[%d]: payload of %d bytes, payload_size %v", i, len(p), recs[i].PayloadSize)
		}
	}
	b, err := ToBatch(recs, nil)
	if err != nil {
		t.Fatalf("ToBatch of accepted records: %v", err)
	}
	defer b.Release()
	checkBatch(t, b)
	back, err := FromBatch(b, true)
	if err != nil {
		t.Fatalf("FromBatch: %v", err)
	}
	for i := range recs {
		want, err := json.Marshal(recs[i].ToRecord())
		if err != nil {
			t.Fatalf("records[%d] does not encode: %v", i, err)
		}
		if got := mustJSON(back[i]); got != string(want) {
			t.Fatalf("records[%d] changed through Arrow:\n got  %s\n want %s", i, got, want)
		}
	}
}

// corpusBodies seeds f with the JSON bodies of the bad-request corpus (the multipart
// ones seed the worker's multipart fuzz target).
func corpusBodies(f *testing.F) {
	corpus, err := rollouttest.BadRequests()
	if err != nil {
		f.Fatal(err)
	}
	for _, c := range corpus.Cases {
		if c.Layer != rollouttest.LayerBody || c.Fill != nil {
			continue
		}
		if strings.HasPrefix(c.ContentType, "multipart/") {
			continue
		}
		b, err := c.BodyBytes()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

func FuzzDecodeAppendJSON(f *testing.F) {
	f.Add([]byte(roundTripInput))
	f.Add([]byte(`{"records":[{"id":"a","rollout_id":"t"}]}`))
	f.Add([]byte(`{"records":[{"id":"a","rollout_id":"t","relationships":[{"target_id":"b","relation":"r","weight":1}],"loss_mask":[1]}]}`))
	corpusBodies(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		recs, err := ParseAppendJSON(data, fuzzOpts)
		// The pooled decoder (the worker's) answers the same, twice in a row (the
		// second time in memory the first handed back).
		for range 2 {
			pooled, release, perr := ParseAppendJSONPooled(data, fuzzOpts)
			if (err == nil) != (perr == nil) || err != nil && err.Error() != perr.Error() {
				t.Fatalf("pooled decode: %v, copying decode: %v", perr, err)
			}
			if err == nil && !reflect.DeepEqual(pooled, recs) {
				t.Fatalf("pooled decode differs:\n got %+v\nwant %+v", pooled, recs)
			}
			release()
		}
		if err != nil {
			checkRefusal(t, err)
			return
		}
		if !json.Valid(data) {
			t.Fatalf("accepted invalid JSON")
		}
		checkAccepted(t, recs)
	})
}

func FuzzParseFilters(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `{"role":"tool"}`, `{"dataset":"x' OR 1=1 --","include_in_training":true}`,
		`{"policy_version":"\u0000\n\t'\"\\"}`, `{"rollout_id":"` + "`" + `"}`, `[]`, `{"role":1}`, `{"a":`,
		`{"artifact_type":"` + strings.Repeat("'", 50) + `"}`,
	} {
		f.Add(s)
	}
	s := Schema()
	f.Fuzz(func(t *testing.T, text string) {
		sql, err := ParseFilters(text)
		if err != nil {
			checkRefusal(t, err)
			return
		}
		if sql == "" {
			return
		}
		e, err := expr.Parse(sql)
		if err != nil {
			t.Fatalf("ParseFilters(%q) = %q, which does not parse: %v", text, sql, err)
		}
		if _, err := expr.Bind(e, s); err != nil {
			t.Fatalf("filter %q does not bind: %v", sql, err)
		}
		// Values stay literals: the filter reads only the allowed columns, each once.
		// (A value like "x' OR role = 'y" would otherwise add a column.)
		allowed := []string{ColRolloutID, ColProblemID, ColDataset, ColPolicyVersion, ColRole, ColContentType, ColArtifactType, ColIncludeInTraining}
		seen := map[string]bool{}
		for _, c := range e.Columns() {
			if !slices.Contains(allowed, c) || seen[c] {
				t.Fatalf("filter %q reads column %q", sql, c)
			}
			seen[c] = true
		}
	})
}

// FuzzFastDecoderMatchesEncodingJSON holds the fast append decoder to encoding/json:
// on every body the strict check accepts, both decode to the same wire records.
func FuzzFastDecoderMatchesEncodingJSON(f *testing.F) {
	f.Add([]byte(roundTripInput))
	f.Add([]byte(`{"records":[{"id":"a\"\\\u00e9","rollout_id":"t","metadata":"x\"}]"},{"id":"b","rollout_id":"t","metadata":[{"a":"]"},-1.5e3]}]}`))
	f.Add([]byte(`{"records":null,"records":[]}`))
	f.Add([]byte(` { "records" : [ { "id" : "a" , "rollout_id" : "t" , "metadata" : true , "loss_mask" : [ -128 , 127 ] } ] } `))
	f.Add([]byte(`{"records":[{"\u0069d":"a","rollout_id":"t","relationships":[{"target_id":"x","relation":"y","weight":null}],"payload_size":-9223372036854775808}]}`))
	corpusBodies(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		if appendDecoder.Check(data) != nil {
			return
		}
		fast, err := decodeAppendFast(data)
		if err != nil {
			t.Fatalf("fast decoder refused a checked body: %v", err)
		}
		var slow appendWire
		if err := json.Unmarshal(data, &slow); err != nil {
			t.Fatalf("encoding/json refused a checked body: %v", err)
		}
		if !reflect.DeepEqual(fast, slow) {
			t.Fatalf("fast and encoding/json differ:\n fast %s\n slow %s", mustJSON(fast), mustJSON(slow))
		}
	})
}
