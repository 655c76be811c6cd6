package worker

import (
	"bytes"
	"encoding/json"
	"mime/multipart"
	"strings"
	"testing"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/rollout"
	"github.com/lancectx/lancectx/rollout/rollouttest"
)

var fuzzOpts = rollout.DecodeOptions{MaxBodyBytes: 1 << 20, MaxRecords: 64, MaxPartBytes: 1 << 16, Now: decodeClock}

// FuzzDecodeMultipart holds the multipart decoder to its contract on any body: a 4xx
// *api.Error, or records that pass validation, carry their payloads with matching
// sizes, and go through Arrow and back unchanged.
func FuzzDecodeMultipart(f *testing.F) {
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	_ = w.SetBoundary("XBOUNDARYX")
	_ = w.WriteField("metadata", `{"records":[{"id":"a","rollout_id":"t","payload_size":3},{"id":"b","rollout_id":"t"},{"id":"c","rollout_id":"t"}]}`)
	p, _ := w.CreateFormFile("0", "a.bin")
	p.Write([]byte{0, '\r', '\n'})
	p, _ = w.CreateFormField("2")
	p.Write([]byte("--XBOUNDARYX"))
	w.Close()
	f.Add(buf.Bytes(), "XBOUNDARYX")
	corpus, err := rollouttest.BadRequests()
	if err != nil {
		f.Fatal(err)
	}
	for _, c := range corpus.Cases {
		if c.Layer != rollouttest.LayerBody || c.Fill != nil || !strings.HasPrefix(c.ContentType, "multipart/") {
			continue
		}
		b, err := c.BodyBytes()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b, "XBOUNDARYX")
	}
	f.Fuzz(func(t *testing.T, body []byte, boundary string) {
		recs, err := decodeAppendMultipart(bytes.NewReader(body), boundary, fuzzOpts)
		if err != nil {
			e, ok := api.AsError(err)
			if !ok || e.Status < 400 || e.Status > 499 || e.Code == "" || e.Message == "" {
				t.Fatalf("refusal is not a 4xx *api.Error: %#v", err)
			}
			return
		}
		if err := rollout.ValidateRecords(recs); err != nil {
			t.Fatalf("decoded records fail validation: %v", err)
		}
		for i := range recs {
			if p := recs[i].BinaryPayload; p != nil && (recs[i].PayloadSize == nil || *recs[i].PayloadSize != int64(len(p))) {
				t.Fatalf("records[%d]: payload of %d bytes, payload_size %v", i, len(p), recs[i].PayloadSize)
			}
		}
		b, err := rollout.ToBatch(recs, nil)
		if err != nil {
			t.Fatalf("ToBatch of accepted records: %v", err)
		}
		defer b.Release()
		back, err := rollout.FromBatch(b, true)
		if err != nil {
			t.Fatalf("FromBatch: %v", err)
		}
		for i := range recs {
			want, _ := json.Marshal(recs[i].ToRecord())
			got, _ := json.Marshal(back[i])
			if string(got) != string(want) {
				t.Fatalf("records[%d] changed through Arrow:\n got  %s\n want %s", i, got, want)
			}
		}
	})
}
