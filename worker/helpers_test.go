package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/textproto"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/rollout"
)

func quietLogger() *slog.Logger {
	if os.Getenv("LANCECTX_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// testWorker is a worker served over real HTTP on a FileStore data directory.
type testWorker struct {
	t    testing.TB
	srv  *Server
	http *httptest.Server
	dir  string
	data objstore.Store
	url  string
	once sync.Once
}

// newTestWorker starts a worker on dir (a new temp dir when empty). Tests seal
// explicitly (flush, merge-wal) unless they set a seal interval.
func newTestWorker(t testing.TB, dir string, mut func(*Config)) *testWorker {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	st, err := objstore.NewFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		DataDir:               "file://" + dir,
		Store:                 st,
		WorkerID:              "test-worker",
		SealInterval:          time.Hour,
		MergeAfterGenerations: -1,
		Logger:                quietLogger(),
	}
	if mut != nil {
		mut(&cfg)
	}
	s, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	tw := &testWorker{t: t, srv: s, http: hs, dir: dir, data: st, url: hs.URL}
	t.Cleanup(func() { tw.close() })
	return tw
}

func (tw *testWorker) close() {
	tw.once.Do(func() {
		tw.http.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := tw.srv.Close(ctx); err != nil {
			tw.t.Errorf("close worker: %v", err)
		}
	})
}

// response is a finished HTTP exchange.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) String() string { return fmt.Sprintf("%d %s", r.status, truncateBytes(r.body, 400)) }

func truncateBytes(b []byte, n int) string {
	if len(b) > n {
		return string(b[:n]) + "..."
	}
	return string(b)
}

func (tw *testWorker) do(method, path, contentType string, body []byte) response {
	tw.t.Helper()
	return doHTTP(tw.t, tw.url, method, path, contentType, body)
}

func doHTTP(t testing.TB, base, method, path, contentType string, body []byte) response {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, path, err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// want checks the status and decodes the JSON body into v (if not nil).
func (r response) want(t testing.TB, status int, v any) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, truncateBytes(r.body, 600))
	}
	if v != nil {
		if err := json.Unmarshal(r.body, v); err != nil {
			t.Fatalf("decode %T: %v: %s", v, err, truncateBytes(r.body, 600))
		}
	}
}

// wantError checks a 4xx/5xx envelope.
func (r response) wantError(t testing.TB, status int, code string) api.ErrorBody {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, truncateBytes(r.body, 600))
	}
	if ct := r.header.Get("Content-Type"); ct != api.ContentTypeJSON {
		t.Fatalf("error Content-Type %q, want %s: %s", ct, api.ContentTypeJSON, truncateBytes(r.body, 300))
	}
	var env api.ErrorResponse
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&env); err != nil {
		t.Fatalf("error body is not the envelope: %v: %s", err, truncateBytes(r.body, 300))
	}
	if env.Error.Code != code || env.Error.Message == "" {
		t.Fatalf("error %+v, want code %s and a message", env.Error, code)
	}
	return env.Error
}

func (tw *testWorker) createStore(name string) api.StoreInfo {
	tw.t.Helper()
	var info api.StoreInfo
	tw.do("POST", "/api/v1/rollouts", api.ContentTypeJSON, []byte(`{"name":"`+name+`"}`)).want(tw.t, http.StatusCreated, &info)
	return info
}

func jsonBody(t testing.TB, records []rollout.AddRecord) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{"records": records})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (tw *testWorker) appendJSON(name string, flush bool, records ...rollout.AddRecord) api.AppendResponse {
	tw.t.Helper()
	path := "/api/v1/rollouts/" + name + "/records"
	if flush {
		path += "?flush=true"
	}
	var out api.AppendResponse
	tw.do("POST", path, api.ContentTypeJSON, jsonBody(tw.t, records)).want(tw.t, http.StatusCreated, &out)
	return out
}

// multipartBody builds a multipart append: metadata first, then one part per payload
// keyed by record index.
func multipartBody(t testing.TB, records []rollout.AddRecord, payloads map[int][]byte) (string, []byte) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	h := textproto.MIMEHeader{}
	h.Set("Content-Disposition", `form-data; name="metadata"`)
	h.Set("Content-Type", api.ContentTypeJSON)
	pw, err := mw.CreatePart(h)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pw.Write(jsonBody(t, records)); err != nil {
		t.Fatal(err)
	}
	idx := make([]int, 0, len(payloads))
	for i := range payloads {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for _, i := range idx {
		h := textproto.MIMEHeader{}
		h.Set("Content-Disposition", fmt.Sprintf(`form-data; name="%d"`, i))
		h.Set("Content-Type", api.ContentTypeOctetStream)
		pw, err := mw.CreatePart(h)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := pw.Write(payloads[i]); err != nil {
			t.Fatal(err)
		}
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return mw.FormDataContentType(), buf.Bytes()
}

// listAll pages through the store's records (limit per page) with the given filters.
func (tw *testWorker) listAll(name, filters string, limit int) []rollout.Record {
	tw.t.Helper()
	return listAllHTTP(tw.t, tw.url, name, filters, limit)
}

func listAllHTTP(t testing.TB, base, name, filters string, limit int) []rollout.Record {
	t.Helper()
	var out []rollout.Record
	for offset := 0; ; offset += limit {
		q := url.Values{"limit": {fmt.Sprint(limit)}, "offset": {fmt.Sprint(offset)}}
		if filters != "" {
			q.Set("filters", filters)
		}
		var page api.ListRecordsResponse[rollout.Record]
		doHTTP(t, base, "GET", "/api/v1/rollouts/"+name+"/records?"+q.Encode(), "", nil).want(t, http.StatusOK, &page)
		if page.Limit != limit || page.Offset != offset {
			t.Fatalf("page echoes limit %d offset %d, want %d %d", page.Limit, page.Offset, limit, offset)
		}
		out = append(out, page.Records...)
		if !page.HasMore {
			if len(page.Records) > limit {
				t.Fatalf("page of %d records with limit %d", len(page.Records), limit)
			}
			return out
		}
		if len(page.Records) != limit {
			t.Fatalf("has_more with a short page (%d of %d)", len(page.Records), limit)
		}
	}
}

// listing is every object of the data directory with its size: what "nothing was
// written" is checked against.
func listing(t testing.TB, dir string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // deleted while walked (a seal finishing its entry deletes)
		}
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = info.Size()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// writtenSince lists the objects created or changed between two listings (not the ones
// removed: a seal that completed before the first listing may still be deleting the WAL
// entries it covers).
func writtenSince(before, after map[string]int64) string {
	var d []string
	for _, e := range strings.Fields(diffListing(before, after)) {
		if !strings.HasPrefix(e, "-") {
			d = append(d, e)
		}
	}
	return strings.Join(d, " ")
}

func diffListing(before, after map[string]int64) string {
	var d []string
	for k, v := range after {
		if bv, ok := before[k]; !ok {
			d = append(d, "+"+k)
		} else if bv != v {
			d = append(d, "~"+k)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			d = append(d, "-"+k)
		}
	}
	sort.Strings(d)
	return strings.Join(d, " ")
}

func strp(s string) *string { return &s }

func f32p(f float32) *float32 { return &f }

func i64p(n int64) *int64 { return &n }

func boolp(b bool) *bool { return &b }

// rec is a small valid record.
func rec(id, rolloutID string) rollout.AddRecord {
	return rollout.AddRecord{ID: id, RolloutID: rolloutID, Content: strp("content of " + id)}
}
