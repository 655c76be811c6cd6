package hostile

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/rollout/rollouttest"
)

// seedContext gives the context store (named like the rollout store, embedding_dim
// 4) two records, seed-1 (external id ext-1, a binary payload) and seed-2 (no
// payload), each an acked, sealed write.
func (s *stack) seedContext() {
	s.t.Helper()
	s.must("POST", "/api/v1/contexts", tokRW, `{"name":"`+store+`","embedding_dim":4}`, http.StatusCreated, nil)
	s.must("POST", "/api/v1/contexts/"+store+"/records", tokRW, `{"records":[`+
		`{"id":"seed-1","run_id":"r1","external_id":"ext-1","text_payload":"hello world","embedding":[1,0,0,0],"binary_payload":"eHl6"},`+
		`{"id":"seed-2","run_id":"r1","text_payload":"second","embedding":[0,1,0,0]}]}`, http.StatusCreated, nil)
}

// cxRecord is a valid record to add as JSON, with extra overriding or adding fields
// (a nil value removes one).
func cxRecord(extra map[string]any) string {
	r := map[string]any{"id": "h-1", "run_id": "r-h", "text_payload": "hostile", "embedding": []float64{0, 0, 1, 0}}
	for k, v := range extra {
		if v == nil {
			delete(r, k)
		} else {
			r[k] = v
		}
	}
	b, err := json.Marshal(r)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// contextCases are hostile requests aimed at the context store routes: each must be
// refused with its 4xx and the envelope, writing nothing.
func contextCases(limits rollouttest.Limits) []hostileCase {
	const create = "/api/v1/contexts"
	const records = "/api/v1/contexts/{store}/records"
	const search = "/api/v1/contexts/{store}/search"
	const retrieve = "/api/v1/contexts/{store}/retrieve"
	with := func(status int, code, name, method, path, body string) hostileCase {
		return hostileCase{Name: "contexts: " + name, Method: method, Path: path, ContentType: api.ContentTypeJSON, Body: body,
			WantStatus: status, WantCode: code}
	}
	bad400 := func(name, method, path, body string) hostileCase {
		return with(400, api.CodeInvalidRequest, name, method, path, body)
	}
	add := func(extra map[string]any) string { return `{"records":[` + cxRecord(extra) + `]}` }
	upsert := func(extra map[string]any) string { return `{"record":` + cxRecord(extra) + `}` }
	q4 := `[0.5,0.5,0,0]`
	return []hostileCase{
		// Create.
		bad400("a create without a name is refused", "POST", create, `{"embedding_dim":4}`),
		bad400("a create whose name is a number is refused", "POST", create, `{"name":7}`),
		bad400("a context store name walking out of the data directory is refused", "POST", create, `{"name":"../x"}`),
		bad400("embedding_dim 0 is refused", "POST", create, `{"name":"fresh","embedding_dim":0}`),
		bad400("embedding_dim past 65536 is refused", "POST", create, `{"name":"fresh","embedding_dim":70000}`),
		bad400("embedding_dim given as a string is refused", "POST", create, `{"name":"fresh","embedding_dim":"8"}`),
		bad400("a fractional embedding_dim is refused", "POST", create, `{"name":"fresh","embedding_dim":1.5}`),
		bad400("an unknown distance_metric is refused", "POST", create, `{"name":"fresh","distance_metric":"hamming"}`),
		bad400("an unknown id_index_type is refused", "POST", create, `{"name":"fresh","id_index_type":"hash"}`),
		bad400("a blob column that is not a payload is refused", "POST", create, `{"name":"fresh","blob_columns":["embedding"]}`),
		bad400("a blob column listed twice is refused", "POST", create, `{"name":"fresh","blob_columns":["text_payload","text_payload"]}`),
		bad400("context storage_options are refused", "POST", create, `{"name":"fresh","storage_options":{"aws_access_key_id":"x"}}`),
		bad400("a context create with a schema is refused", "POST", create, `{"name":"fresh","schema":{"columns":[]}}`),
		with(409, api.CodeAlreadyExists, "creating the store again with another embedding_dim is a 409", "POST", create,
			`{"name":"`+store+`","embedding_dim":8}`),
		{Name: "contexts: a create sent as text/plain is a 415", Method: "POST", Path: create, ContentType: "text/plain",
			Body: `{"name":"fresh"}`, WantStatus: 415, WantCode: api.CodeUnsupportedMediaType},

		// Add.
		bad400("an empty records array is refused", "POST", records, `{"records":[]}`),
		bad400("an add without records is refused", "POST", records, `{}`),
		bad400("a record without run_id is refused", "POST", records, add(map[string]any{"run_id": nil})),
		bad400("an embedding of the wrong length is refused", "POST", records, add(map[string]any{"embedding": []float64{1, 2, 3}})),
		bad400("an embedding holding a string is refused", "POST", records, add(map[string]any{"embedding": []any{1, "2", 3, 4}})),
		bad400("an embedding value past float32 is refused", "POST", records, `{"records":[`+
			strings.Replace(cxRecord(nil), `[0,0,1,0]`, `[0,0,1e39,0]`, 1)+`]}`),
		bad400("an unknown field in a record is refused", "POST", records, add(map[string]any{"secret": 1})),
		bad400("a record setting supersedes_id is refused", "POST", records, add(map[string]any{"supersedes_id": "seed-1"})),
		bad400("a record with the tombstone content type is refused", "POST", records,
			add(map[string]any{"content_type": "application/x-lance-context-tombstone"})),
		bad400("a record claiming lifecycle_status superseded is refused", "POST", records, add(map[string]any{"lifecycle_status": "superseded"})),
		bad400("metadata that is an array is refused", "POST", records, add(map[string]any{"metadata": []int{1}})),
		bad400("a relationship without target_id is refused", "POST", records,
			add(map[string]any{"relationships": []map[string]any{{"relation": "cites"}}})),
		bad400("a negative payload_size is refused", "POST", records, add(map[string]any{"payload_size": -1})),
		bad400("an id given twice in one add is refused", "POST", records, `{"records":[`+cxRecord(nil)+`,`+cxRecord(nil)+`]}`),
		bad400("an id with a control character is refused", "POST", records, add(map[string]any{"id": "a\u0007b"})),
		bad400("a created_at that is not RFC 3339 is refused", "POST", records, add(map[string]any{"created_at": "yesterday"})),
		bad400("an expires_at in year 0 is refused", "POST", records, add(map[string]any{"expires_at": "0000-01-01T00:00:00Z"})),
		bad400("a binary_payload with bad base64 is refused", "POST", records, add(map[string]any{"binary_payload": "not base64!"})),
		{Name: "contexts: an add over the body limit is a 413", Method: "POST", Path: records, ContentType: api.ContentTypeJSON,
			Body: add(map[string]any{"text_payload": "@BIG@"}), Fills: []fill{{"@BIG@", "x", int(limits.MaxBodyBytes)}},
			WantStatus: 413, WantCode: api.CodePayloadTooLarge},
		{Name: "contexts: more records than one add takes is a 413", Method: "POST", Path: records, ContentType: api.ContentTypeJSON,
			Body: `{"records":[@RECS@{"run_id":"r"}]}`, Fills: []fill{{"@RECS@", `{"run_id":"r"},`, limits.MaxRecords}},
			WantStatus: 413, WantCode: api.CodePayloadTooLarge},
		{Name: "contexts: an add sent as text/plain is a 415", Method: "POST", Path: records, ContentType: "text/plain",
			Body: add(nil), WantStatus: 415, WantCode: api.CodeUnsupportedMediaType},

		// Upsert.
		bad400("an upsert without external_id is refused", "PUT", records, upsert(nil)),
		bad400("an upsert keyed on id is refused", "PUT", records, `{"record":`+cxRecord(map[string]any{"external_id": "e"})+`,"key":"id"}`),
		bad400("an upsert reusing the id of the record it supersedes is refused", "PUT", records,
			upsert(map[string]any{"id": "seed-1", "external_id": "ext-1"})),
		bad400("a batch upsert of one external id twice is refused", "PUT", records+"/batch", `{"records":[`+
			cxRecord(map[string]any{"id": "h-1", "external_id": "e"})+`,`+cxRecord(map[string]any{"id": "h-2", "external_id": "e"})+`]}`),
		bad400("an empty batch upsert is refused", "PUT", records+"/batch", `{"records":[]}`),

		// Patch.
		bad400("a patch naming id and external_id is refused", "PATCH", records, `{"id":"seed-1","external_id":"ext-1","patch":{"tenant":"t"}}`),
		bad400("a patch naming neither id nor external_id is refused", "PATCH", records, `{"patch":{"tenant":"t"}}`),
		bad400("a patch that is not an object is refused", "PATCH", records, `{"id":"seed-1","patch":[1]}`),
		bad400("an empty patch is refused", "PATCH", records, `{"id":"seed-1","patch":{}}`),
		bad400("a patch of the supersede chain is refused", "PATCH", records, `{"id":"seed-1","patch":{"superseded_by_id":"x"}}`),
		bad400("a patch setting an embedding of the wrong length is refused", "PATCH", records, `{"id":"seed-1","patch":{"embedding":[1]}}`),
		bad400("a patch clearing run_id is refused", "PATCH", records, `{"id":"seed-1","patch":{"run_id":null}}`),

		// Deletes and reads.
		bad400("a delete by external id without one is refused", "DELETE", records, ``),
		bad400("a delete by external id given twice is refused", "DELETE", records+"?external_id=a&external_id=b", ``),
		bad400("a list with limit=0 is refused", "GET", records+"?limit=0", ``),
		bad400("list filters that are not JSON are refused", "GET", records+"?filters=%7Bnope", ``),
		bad400("a list filter on an unknown key is refused", "GET", records+"?filters=%7B%22secret%22%3A%22x%22%7D", ``),
		bad400("include_expired=maybe is refused", "GET", records+"?include_expired=maybe", ``),
		bad400("related records without target_id are refused", "GET", records+"/related", ``),
		bad400("a lookup by external id without one is refused", "GET", records+"/by-external-id", ``),
		with(404, api.CodeNotFound, "the payload of an unknown record is a 404", "GET", records+"/nope/payload", ``),
		with(404, api.CodeNotFound, "the payload of a record without one is a 404", "GET", records+"/seed-2/payload", ``),

		// Search and retrieve.
		bad400("a query vector of the wrong length is refused", "POST", search, `{"query":[1,2,3]}`),
		bad400("a search without a query is refused", "POST", search, `{"limit":3}`),
		bad400("a search with limit 0 is refused", "POST", search, `{"query":`+q4+`,"limit":0}`),
		bad400("a search with limit 1001 is refused", "POST", search, `{"query":`+q4+`,"limit":1001}`),
		bad400("a search filter on an unknown key is refused", "POST", search, `{"query":`+q4+`,"filters":{"secret":"x"}}`),
		bad400("a query value past float32 is refused", "POST", search, `{"query":[1e39,0,0,0]}`),
		bad400("a query holding null is refused", "POST", search, `{"query":[null,0,0,0]}`),
		{Name: "contexts: a search sent as text/plain is a 415", Method: "POST", Path: search, ContentType: "text/plain",
			Body: `{"query":` + q4 + `}`, WantStatus: 415, WantCode: api.CodeUnsupportedMediaType},
		bad400("a retrieve without text or vector is refused", "POST", retrieve, `{"limit":3}`),
		bad400("a retrieve with another fusion is refused", "POST", retrieve, `{"text":"hello","fusion":"sum"}`),
		bad400("a retrieve whose text has no terms is refused", "POST", retrieve, `{"text":"!?!"}`),
		bad400("a retrieve vector of the wrong length is refused", "POST", retrieve, `{"text":"hello","vector":[1]}`),

		// Compaction.
		bad400("target_rows_per_fragment 0 is refused", "POST", "/api/v1/contexts/{store}/compact", `{"target_rows_per_fragment":0}`),
		bad400("materialize_deletions 2 is refused", "POST", "/api/v1/contexts/{store}/compact", `{"materialize_deletions":2}`),
		with(405, api.CodeInvalidRequest, "a POST on records/batch is a 405", "POST", records+"/batch", `{"records":[]}`),

		// Checkout.
		bad400("a checkout without version or latest is refused", "POST", "/api/v1/contexts/{store}/checkout", `{}`),
		bad400("a checkout of version 0 is refused", "POST", "/api/v1/contexts/{store}/checkout", `{"version":0}`),
		bad400("a checkout naming a version and latest is refused", "POST", "/api/v1/contexts/{store}/checkout", `{"version":1,"latest":true}`),
		bad400("a checkout of a negative version is refused", "POST", "/api/v1/contexts/{store}/checkout", `{"version":-1}`),
		with(404, api.CodeNotFound, "a checkout of a version the store lacks is a 404", "POST", "/api/v1/contexts/{store}/checkout", `{"version":999}`),
	}
}

// contextOK are the context routes served with the right token (auth_test.go's
// okRequests), in an order that keeps each valid.
func contextOK() []okRequest {
	rec := `{"id":"a1","run_id":"r","external_id":"e1","text_payload":"hi there","embedding":[1,0],"binary_payload":"eHl6"}`
	return []okRequest{
		{method: "POST", path: "/api/v1/contexts", body: `{"name":"authz","embedding_dim":2}`, status: 201, worker: true},
		{method: "GET", path: "/api/v1/contexts", status: 200, worker: true},
		{method: "GET", path: "/api/v1/contexts/authz", status: 200, worker: true},
		{method: "POST", path: "/api/v1/contexts/authz/records", body: `{"records":[` + rec + `]}`, status: 201, worker: true},
		{method: "PUT", path: "/api/v1/contexts/authz/records", body: `{"record":{"run_id":"r","external_id":"e2"}}`, status: 200, worker: true},
		{method: "PUT", path: "/api/v1/contexts/authz/records/batch", body: `{"records":[{"run_id":"r","external_id":"e3"}]}`, status: 200, worker: true},
		{method: "PATCH", path: "/api/v1/contexts/authz/records", body: `{"id":"a1","patch":{"tenant":"t"}}`, status: 200, worker: true},
		{method: "GET", path: "/api/v1/contexts/authz/records", status: 200, worker: true},
		{method: "GET", path: "/api/v1/contexts/authz/records/by-external-id?external_id=e1", status: 200, worker: true},
		{method: "GET", path: "/api/v1/contexts/authz/records/related?target_id=a1", status: 200, worker: true},
		{method: "GET", path: "/api/v1/contexts/authz/records/a1", status: 200, worker: true},
		{method: "GET", path: "/api/v1/contexts/authz/records/a1/payload", status: 200, worker: true},
		{method: "POST", path: "/api/v1/contexts/authz/search", body: `{"query":[1,0]}`, status: 200, worker: true},
		{method: "POST", path: "/api/v1/contexts/authz/retrieve", body: `{"text":"hi"}`, status: 200, worker: true},
		{method: "GET", path: "/api/v1/contexts/authz/version", status: 200, worker: true},
		{method: "POST", path: "/api/v1/contexts/authz/checkout", body: `{"latest":true}`, status: 200, worker: true},
		{method: "POST", path: "/api/v1/contexts/authz/compact", body: `{}`, status: 200, worker: true},
		{method: "GET", path: "/api/v1/contexts/authz/compact/stats", status: 200, worker: true},
		{method: "DELETE", path: "/api/v1/contexts/authz/records?external_id=e3", status: 200, worker: true},
		{method: "DELETE", path: "/api/v1/contexts/authz/records/a1", status: 200, worker: true},
		{method: "DELETE", path: "/api/v1/contexts/authz", status: 204, worker: true},
	}
}

// TestContextCorpusSize: the corpus holds at least 40 hand-written hostile requests
// for context stores, besides the generated families every context route gets, and
// every context route has an authorized request in the auth tests.
func TestContextCorpusSize(t *testing.T) {
	corpus, err := rollouttest.BadRequests()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range contextCases(corpus.Limits) {
		if c.WantStatus < 400 || c.WantStatus >= 500 {
			t.Fatalf("%s: want %d, not a 4xx", c.Name, c.WantStatus)
		}
		n++
	}
	gen := 0
	for _, c := range generated() {
		if strings.Contains(c.Path, "/api/v1/contexts") {
			gen++
		}
	}
	t.Logf("%d hand-written and %d generated hostile requests aim at context stores", n, gen)
	if n < 40 {
		t.Fatalf("only %d hand-written hostile context requests; at least 40", n)
	}
	var routes []string
	for _, r := range api.Routes() {
		if strings.HasPrefix(r.Path, "/api/v1/contexts") {
			routes = append(routes, r.Method+" "+r.Path)
		}
	}
	if len(routes) == 0 {
		t.Fatal("api.Routes lists no context route")
	}
	for _, r := range contextOK() {
		key := r.method + " " + strings.NewReplacer("/authz", "/{name}", "/records/a1", "/records/{id}").Replace(strings.Split(r.path, "?")[0])
		routes = slices.DeleteFunc(routes, func(s string) bool { return s == key })
	}
	if len(routes) != 0 {
		t.Fatalf("context routes without an authorized request: %v", routes)
	}
	covered := map[string]bool{}
	for _, r := range routesFor("/api/v1/contexts") {
		covered[r.method+" "+r.pattern] = true
	}
	for _, r := range api.Routes() {
		if strings.HasPrefix(r.Path, "/api/v1/contexts") && !covered[r.Method+" "+r.Path] {
			t.Errorf("%s %s is missing from the generated route families", r.Method, r.Path)
		}
	}
}
