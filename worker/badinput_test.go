package worker

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/rollout"
	"github.com/lancectx/lancectx/rollout/rollouttest"
)

// badCase is a worker-level request that must be refused.
type badCase struct {
	name        string
	method      string
	path        string
	contentType string
	body        []byte
	chunked     bool // send the body without a Content-Length
	status      int
	code        string
}

// TestBadRequests replays the rollout package's corpus of bad requests and the
// worker's own cases over HTTP: each gets its 4xx with the JSON envelope, and the
// data directory's object listing is the same afterwards (nothing was written).
func TestBadRequests(t *testing.T) {
	corpus, err := rollouttest.BadRequests()
	if err != nil {
		t.Fatal(err)
	}
	tw := newTestWorker(t, "", func(c *Config) {
		c.MaxBodyBytes = corpus.Limits.MaxBodyBytes
		c.MaxRecords = corpus.Limits.MaxRecords
		c.MaxPartBytes = corpus.Limits.MaxPartBytes
		c.ListMaxRows = corpus.Limits.MaxListRows
	})
	const store = "bad" // in place of corpus.StorePlaceholder
	tw.createStore(store)
	// Base rows, a pending generation and unsealed rows: a request that wrongly
	// reached the WAL, a seal or a merge would show in the listing.
	tw.appendJSON(store, true, rec("seed-1", "r"), rollout.AddRecord{ID: "seed-blob", RolloutID: "r", BinaryPayload: []byte("xyz")})
	tw.do("POST", "/api/v1/internal/merge-wal/"+store, "", nil).want(t, http.StatusOK, nil)
	tw.appendJSON(store, true, rec("seed-2", "r"))
	tw.appendJSON(store, false, rec("seed-3", "r"))
	// A dataset nobody registered, where a store named "orphan" would go.
	rdr, err := array.NewRecordReader(rollout.Schema(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lance.WriteStore(t.Context(), objstore.Prefixed(tw.data, "orphan.rollout.lance"), rdr, lance.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	rdr.Release()
	before := listing(t, tw.dir)

	requests := 0
	check := func(t *testing.T, req *http.Request, status int, code, msg string) {
		t.Helper()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		requests++
		r := response{status: resp.StatusCode, header: resp.Header, body: body}
		e := r.wantError(t, status, code)
		if msg != "" && !strings.Contains(e.Message, msg) {
			t.Fatalf("message %q does not contain %q", e.Message, msg)
		}
		// Created or changed objects only: the seeds' seals delete the WAL entries
		// they cover in the background, and may still be doing so.
		if d := writtenSince(before, listing(t, tw.dir)); d != "" {
			t.Fatalf("the request wrote to the data directory: %s", d)
		}
	}

	for _, c := range corpus.Cases {
		t.Run("corpus/"+c.Name, func(t *testing.T) {
			req, err := c.NewRequest(t.Context(), tw.url, store)
			if err != nil {
				t.Fatal(err)
			}
			check(t, req, c.WantStatus, c.WantCode, c.WantMessage)
		})
	}

	valid := jsonBody(t, []rollout.AddRecord{rec("never-written", "r")})
	long := strings.Repeat("n", 200)
	oversized := append(append([]byte(`{"records":[{"id":"x","rollout_id":"r","content":"`), bytes.Repeat([]byte("a"), int(corpus.Limits.MaxBodyBytes))...), `"}]}`...)
	var cases []badCase
	for _, n := range []struct{ label, esc string }{
		{"..", "a..b"}, {"/", "a%2Fb"}, {"NUL", "a%00b"}, {"200 chars", long}, {"a backslash", "a%5Cb"}, {"reserved _stats", "_stats"},
	} {
		for _, r := range []struct{ method, path string }{
			{"GET", "/api/v1/rollouts/%s"}, {"DELETE", "/api/v1/rollouts/%s"}, {"GET", "/api/v1/rollouts/%s/records"},
			{"GET", "/api/v1/rollouts/%s/records/x"}, {"GET", "/api/v1/rollouts/%s/records/x/blob"},
			{"GET", "/api/v1/rollouts/%s/arrow"}, {"POST", "/api/v1/internal/merge-wal/%s"},
		} {
			cases = append(cases, badCase{name: fmt.Sprintf("%s %s with %s in the name", r.method, r.path, n.label),
				method: r.method, path: fmt.Sprintf(r.path, n.esc), status: 400, code: api.CodeInvalidRequest})
		}
	}
	for _, r := range []struct{ method, path string }{
		{"GET", "/api/v1/rollouts/ghost/records/x"}, {"GET", "/api/v1/rollouts/ghost/records/x/blob"},
		{"GET", "/api/v1/rollouts/ghost/arrow"}, {"POST", "/api/v1/internal/merge-wal/ghost"},
	} {
		cases = append(cases, badCase{name: r.method + " " + r.path + " of an unknown store", method: r.method, path: r.path,
			status: 404, code: api.CodeNotFound})
	}
	ct, mp := multipartBody(t, []rollout.AddRecord{{ID: "x", RolloutID: "r", PayloadSize: i64p(3)}}, map[int][]byte{0: []byte("abc")})
	cases = append(cases,
		badCase{name: "a multipart append to an unknown store", method: "POST", path: "/api/v1/rollouts/ghost/records",
			contentType: ct, body: mp, status: 404, code: api.CodeNotFound},
		badCase{name: "an append with flush to an unknown store", method: "POST", path: "/api/v1/rollouts/ghost/records?flush=true",
			contentType: api.ContentTypeJSON, body: valid, status: 404, code: api.CodeNotFound},
		badCase{name: "an oversized body without a Content-Length", method: "POST", path: "/api/v1/rollouts/bad/records",
			contentType: api.ContentTypeJSON, body: oversized, chunked: true, status: 413, code: api.CodePayloadTooLarge},
		badCase{name: "an oversized body with a Content-Length", method: "POST", path: "/api/v1/rollouts/bad/records",
			contentType: api.ContentTypeJSON, body: oversized, status: 413, code: api.CodePayloadTooLarge},
		badCase{name: "an empty batch with flush", method: "POST", path: "/api/v1/rollouts/bad/records?flush=true",
			contentType: api.ContentTypeJSON, body: []byte(`{"records":[]}`), status: 400, code: api.CodeInvalidRequest},
		badCase{name: "an empty multipart batch", method: "POST", path: "/api/v1/rollouts/bad/records",
			contentType: "multipart/form-data; boundary=B", body: []byte("--B\r\nContent-Disposition: form-data; name=\"metadata\"\r\n\r\n{\"records\":[]}\r\n--B--\r\n"),
			status: 400, code: api.CodeInvalidRequest},
		badCase{name: "a record id with NUL on the blob route", method: "GET", path: "/api/v1/rollouts/bad/records/a%00/blob",
			status: 400, code: api.CodeInvalidRequest},
		badCase{name: "a record id of 600 bytes on the blob route", method: "GET", path: "/api/v1/rollouts/bad/records/" + strings.Repeat("i", 600) + "/blob",
			status: 400, code: api.CodeInvalidRequest},
		badCase{name: "the payload of a record without one", method: "GET", path: "/api/v1/rollouts/bad/records/seed-1/blob",
			status: 404, code: api.CodeNotFound},
		badCase{name: "an unknown Arrow column", method: "GET", path: "/api/v1/rollouts/bad/arrow?columns=id,nope",
			status: 400, code: api.CodeInvalidRequest},
		badCase{name: "a repeated Arrow column", method: "GET", path: "/api/v1/rollouts/bad/arrow?columns=id,id",
			status: 400, code: api.CodeInvalidRequest},
		badCase{name: "an empty Arrow column name", method: "GET", path: "/api/v1/rollouts/bad/arrow?columns=id,,reward",
			status: 400, code: api.CodeInvalidRequest},
		badCase{name: "columns given twice", method: "GET", path: "/api/v1/rollouts/bad/arrow?columns=id&columns=reward",
			status: 400, code: api.CodeInvalidRequest},
		badCase{name: "a filter that does not parse", method: "GET", path: "/api/v1/rollouts/bad/arrow?" + url.Values{"filter": {"reward >"}}.Encode(),
			status: 400, code: api.CodeInvalidRequest},
		badCase{name: "a filter on an unknown column", method: "GET", path: "/api/v1/rollouts/bad/arrow?" + url.Values{"filter": {"nope = 1"}}.Encode(),
			status: 400, code: api.CodeInvalidRequest},
		badCase{name: "a filter comparing a number with text", method: "GET", path: "/api/v1/rollouts/bad/arrow?" + url.Values{"filter": {"reward = 'high'"}}.Encode(),
			status: 400, code: api.CodeInvalidRequest},
		badCase{name: "a filter over 64 KiB", method: "GET", path: "/api/v1/rollouts/bad/arrow?" + url.Values{"filter": {"id = '" + strings.Repeat("x", 70000) + "'"}}.Encode(),
			status: 400, code: api.CodeInvalidRequest},
		badCase{name: "filters given twice", method: "GET", path: "/api/v1/rollouts/bad/records?filters=%7B%7D&filters=%7B%7D",
			status: 400, code: api.CodeInvalidRequest},
		badCase{name: "a list filter over 64 KiB", method: "GET", path: "/api/v1/rollouts/bad/records?" + url.Values{"filter": {"id = '" + strings.Repeat("x", 70000) + "'"}}.Encode(),
			status: 400, code: api.CodeInvalidRequest},
		badCase{name: "a list filter on an unknown column", method: "GET", path: "/api/v1/rollouts/bad/records?" + url.Values{"filter": {"nope = 1"}}.Encode(),
			status: 400, code: api.CodeInvalidRequest},
		badCase{name: "a list with a limit over the bound", method: "GET", path: "/api/v1/rollouts/bad/records?limit=100001",
			status: 400, code: api.CodeInvalidRequest},
		badCase{name: "creating a store with an unknown query parameter", method: "POST", path: "/api/v1/rollouts?dry_run=true",
			contentType: api.ContentTypeJSON, body: []byte(`{"name":"never"}`), status: 400, code: api.CodeInvalidRequest},
		badCase{name: "deleting a store with an unknown query parameter", method: "DELETE", path: "/api/v1/rollouts/bad?force=true",
			status: 400, code: api.CodeInvalidRequest},
		badCase{name: "creating a store that exists", method: "POST", path: "/api/v1/rollouts",
			contentType: api.ContentTypeJSON, body: []byte(`{"name":"bad"}`), status: 409, code: api.CodeAlreadyExists},
		badCase{name: "creating a store where an unregistered dataset is", method: "POST", path: "/api/v1/rollouts",
			contentType: api.ContentTypeJSON, body: []byte(`{"name":"orphan"}`), status: 409, code: api.CodeConflict},
		badCase{name: "reading a store that is only an unregistered dataset", method: "GET", path: "/api/v1/rollouts/orphan/records",
			status: 404, code: api.CodeNotFound},
		badCase{name: "creating a store with storage options", method: "POST", path: "/api/v1/rollouts",
			contentType: api.ContentTypeJSON, body: []byte(`{"name":"opts","storage_options":{"aws_region":"x"}}`), status: 400, code: api.CodeInvalidRequest},
		badCase{name: "creating a store with a body over 1 MiB", method: "POST", path: "/api/v1/rollouts",
			contentType: api.ContentTypeJSON, body: []byte(`{"name":"` + strings.Repeat("x", 2<<20) + `"}`), status: 413, code: api.CodePayloadTooLarge},
		badCase{name: "an unknown route", method: "GET", path: "/api/v1/experiments", status: 404, code: api.CodeNotFound},
		badCase{name: "an unknown method", method: "PUT", path: "/api/v1/rollouts/bad/records", status: 405, code: api.CodeInvalidRequest},
		badCase{name: "a merge with flush=yes", method: "POST", path: "/api/v1/internal/merge-wal/bad?flush=yes", status: 400, code: api.CodeInvalidRequest},
		badCase{name: "a merge of an unknown store with flush", method: "POST", path: "/api/v1/internal/merge-wal/ghost?flush=true", status: 404, code: api.CodeNotFound},
		badCase{name: "a merge with GET", method: "GET", path: "/api/v1/internal/merge-wal/bad", status: 405, code: api.CodeInvalidRequest},
	)
	for _, c := range cases {
		t.Run("worker/"+c.name, func(t *testing.T) {
			var body io.Reader
			if c.body != nil {
				body = bytes.NewReader(c.body)
				if c.chunked {
					body = io.MultiReader(body) // hides the length: sent chunked
				}
			}
			req, err := http.NewRequestWithContext(t.Context(), c.method, tw.url+c.path, body)
			if err != nil {
				t.Fatal(err)
			}
			if c.contentType != "" {
				req.Header.Set("Content-Type", c.contentType)
			}
			check(t, req, c.status, c.code, "")
		})
	}
	t.Logf("%d bad requests refused (%d from the corpus), nothing written", requests, len(corpus.Cases))
	if requests < 40 {
		t.Fatalf("only %d bad requests ran", requests)
	}
	// The seed rows are all still there and readable.
	if got := sorted(ids(tw.listAll(store, "", 100))); strings.Join(got, ",") != "seed-1,seed-2,seed-3,seed-blob" {
		t.Fatalf("store lists %v", got)
	}
}
