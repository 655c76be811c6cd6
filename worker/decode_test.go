package worker

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/rollout"
	"github.com/lancectx/lancectx/rollout/rollouttest"
)

var decodeNow = time.Date(2025, 3, 4, 5, 6, 7, 891234567, time.UTC)

func decodeClock() time.Time { return decodeNow }

// rawMultipart builds a multipart body from raw metadata JSON and named parts, in
// order, with the metadata part first.
func rawMultipart(t *testing.T, meta string, parts map[string][]byte, order []string) (*bytes.Buffer, string) {
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

func TestDecodeMultipartAttachesPartsByIndex(t *testing.T) {
	meta := `{"records":[
		{"id":"a","rollout_id":"t","payload_size":5},
		{"id":"b","rollout_id":"t"},
		{"id":"a","rollout_id":"t","artifact_type":"image"},
		{"id":"c","rollout_id":"t","payload_size":0}]}`
	bin := []byte{0, 1, 2, 0xff, '\r', '\n', '-', '-'}
	parts := map[string][]byte{"0": []byte("hello"), "2": bin, "3": {}}
	body, ct := rawMultipart(t, meta, parts, []string{"2", "0", "3"})
	req := httptest.NewRequest("POST", "/api/v1/rollouts/s/records", body)
	req.Header.Set("Content-Type", ct)
	recs, err := DecodeAppendRequest(req, rollout.DecodeOptions{Now: decodeClock})
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

func TestDecodeMultipartStreamsLargeParts(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	meta := fmt.Sprintf(`{"records":[{"id":"a","rollout_id":"t","payload_size":%d}]}`, len(big))
	body, ct := rawMultipart(t, meta, map[string][]byte{"0": big}, []string{"0"})
	recs, err := decodeAppendMultipart(body, ct[strings.Index(ct, "boundary=")+9:], rollout.DecodeOptions{})
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
			_, err := DecodeAppendRequest(req, rollout.DecodeOptions{})
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
	opts := rollout.DecodeOptions{MaxBodyBytes: 1000}
	body := `{"records":[{"id":"a","rollout_id":"t","content":"` + strings.Repeat("x", 2000) + `"}]}`
	req := httptest.NewRequest("POST", "/x", chunked{strings.NewReader(body)})
	req.Header.Set("Content-Type", "application/json")
	req.ContentLength = -1
	if _, err := DecodeAppendRequest(req, opts); statusOf(err) != 413 {
		t.Fatalf("JSON: %v", err)
	}
	mp, ct := rawMultipart(t, `{"records":[{"id":"a","rollout_id":"t"}]}`, map[string][]byte{"0": bytes.Repeat([]byte("y"), 2000)}, []string{"0"})
	req = httptest.NewRequest("POST", "/x", chunked{mp})
	req.Header.Set("Content-Type", ct)
	req.ContentLength = -1
	if _, err := DecodeAppendRequest(req, opts); statusOf(err) != 413 {
		t.Fatalf("multipart: %v", err)
	}
}

// TestBadRequestCorpusLayers replays the shared corpus against the layer each case
// names, calling it directly: each case must be refused by that layer, with its status,
// code and message. Cases of the store layer need the registry: TestBadRequests replays
// them (and every other case) over HTTP. (Sequential subtests: replayed counts the ones
// that ran.)
func TestBadRequestCorpusLayers(t *testing.T) {
	corpus, err := rollouttest.BadRequests()
	if err != nil {
		t.Fatal(err)
	}
	opts := rollout.DecodeOptions{
		MaxBodyBytes: corpus.Limits.MaxBodyBytes,
		MaxRecords:   corpus.Limits.MaxRecords,
		MaxPartBytes: corpus.Limits.MaxPartBytes,
		Now:          decodeClock,
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
			workerOnly++ // needs the registry: TestBadRequests replays it
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
					_, err = parseListQuery(req, corpus.Limits.MaxListRows)
				} else {
					if _, berr := DecodeAppendRequest(req, opts); berr != nil {
						t.Fatalf("the body of a query case is refused: %v", berr)
					}
					_, err = queryFlush(req)
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
	t.Logf("replayed %d cases; %d need the registry", replayed, workerOnly)
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
	opts := rollout.DecodeOptions{MaxBodyBytes: 1 << 30, Now: decodeClock}
	meta := fmt.Sprintf(`{"records":[{"id":"a","rollout_id":"t","payload_size":%d}]}`, huge)
	body, ct := rawMultipart(t, meta, map[string][]byte{"0": []byte("tiny")}, []string{"0"})
	jsonReq := httptest.NewRequest("POST", "/x", strings.NewReader(`{"records":[{"id":"a","rollout_id":"t"}]}`))
	jsonReq.ContentLength = huge // a client's word, not yet bytes
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := decodeAppendMultipart(body, ct[strings.Index(ct, "boundary=")+9:], opts)
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

// TestDecodeAppendArrowOwnsItsMemory: DecodeAppendArrow reads the body into a pooled
// buffer and gives it back before the batches are appended, so no batch may point into
// the body: the values must survive the body being scribbled over and the buffer being
// reused by the next request.
func TestDecodeAppendArrowOwnsItsMemory(t *testing.T) {
	snapshot := func(recs []arrow.RecordBatch) string {
		var sb strings.Builder
		for _, r := range recs {
			for i, c := range r.Columns() {
				fmt.Fprintf(&sb, "%s=%v\n", r.Schema().Field(i).Name, c)
			}
		}
		return sb.String()
	}
	content := func(tag string) func(int) string {
		return func(i int) string { return strings.Repeat(tag, 200) + itoa(i) }
	}
	a := clientBatch(t, 0, 50, content("a"))
	defer a.Release()
	body := arrowStream(t, []arrow.RecordBatch{a})
	got, err := rollout.ParseAppendArrow(body, rollout.DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer releaseAll(got)
	want := snapshot(got)
	for i := range body {
		body[i] = 0xaa
	}
	if s := snapshot(got); s != want {
		t.Fatal("a batch of ParseAppendArrow changed when its body was overwritten: it points into the body")
	}

	// Through the handler's path: the second request reads into the buffer the first
	// one gave back (the pool of this goroutine's P), with other content.
	decode := func(rec arrow.RecordBatch) []arrow.RecordBatch {
		b := arrowStream(t, []arrow.RecordBatch{rec})
		req := httptest.NewRequest(http.MethodPost, "/api/v1/rollouts/x/records", bytes.NewReader(b))
		req.Header.Set("Content-Type", "application/vnd.apache.arrow.stream")
		recs, err := DecodeAppendArrow(req, rollout.DecodeOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return recs
	}
	first := decode(a)
	defer releaseAll(first)
	want = snapshot(first)
	b := clientBatch(t, 1000, 50, content("b"))
	defer b.Release()
	for range 3 {
		releaseAll(decode(b))
	}
	if s := snapshot(first); s != want {
		t.Fatal("a batch of DecodeAppendArrow changed when later requests reused the body buffer")
	}
}

func releaseAll(recs []arrow.RecordBatch) {
	for _, r := range recs {
		r.Release()
	}
}
