package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/ctxstore"
	"github.com/lancectx/lancectx/internal/arrowjson"
	"github.com/lancectx/lancectx/internal/oracle"
)

func (tw *testWorker) cxCreate(name string, dim int, metric string) api.ContextStoreInfo {
	tw.t.Helper()
	var info api.ContextStoreInfo
	body := fmt.Sprintf(`{"name":%q,"embedding_dim":%d,"distance_metric":%q}`, name, dim, metric)
	tw.do("POST", "/api/v1/contexts", api.ContentTypeJSON, []byte(body)).want(tw.t, http.StatusCreated, &info)
	return info
}

func (tw *testWorker) cxJSON(method, path string, body any, status int, out any) {
	tw.t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		tw.t.Fatal(err)
	}
	tw.do(method, path, api.ContentTypeJSON, b).want(tw.t, status, out)
}

func (tw *testWorker) cxAdd(name string, recs ...api.AddContextRecord) api.AddContextRecordsResponse {
	tw.t.Helper()
	var out api.AddContextRecordsResponse
	tw.cxJSON("POST", "/api/v1/contexts/"+name+"/records", api.AddContextRecordsRequest{Records: recs}, http.StatusCreated, &out)
	return out
}

func (tw *testWorker) cxSearch(name string, req api.SearchContextRequest) []api.SearchContextResult {
	tw.t.Helper()
	var out api.SearchContextResponse
	tw.cxJSON("POST", "/api/v1/contexts/"+name+"/search", req, http.StatusOK, &out)
	return out.Results
}

func (tw *testWorker) cxMerge(name string) {
	tw.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := tw.srv.mergeWAL(ctx, tw.srv.contexts, name, true); err != nil {
		tw.t.Fatal(err)
	}
}

func cxRec(id, run string, emb []float32, text string) api.AddContextRecord {
	r := api.AddContextRecord{ID: id, ContextRecordFields: api.ContextRecordFields{RunID: run, Embedding: emb}}
	if text != "" {
		r.TextPayload = &text
	}
	return r
}

func randVec(rng *rand.Rand, dim int) []float32 {
	v := make([]float32, dim)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

func resultIDs[T any](rs []T, id func(T) string) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = id(r)
	}
	return out
}

func searchIDs(rs []api.SearchContextResult) []string {
	return resultIDs(rs, func(r api.SearchContextResult) string { return r.Record.ID })
}

// TestContextRecordRoutes walks the reference's record routes on one store: add,
// upsert (a new row superseding the old, the chain kept), batch upsert, patch,
// delete as tombstones, point reads, lists with filters and include_*, related
// records, payloads, version, compaction; then LanceDB reads the merged table.
func TestContextRecordRoutes(t *testing.T) {
	tw := newTestWorker(t, "", nil)
	info := tw.cxCreate("mem", 4, "cosine")
	if info.EmbeddingDim != 4 || info.DistanceMetric != "cosine" || info.IDIndexType != "none" || !strings.HasSuffix(info.URI, "mem.context.lance") {
		t.Fatalf("info %+v", info)
	}
	// The same name with other options: 409 naming the difference; the same options: 409.
	e := tw.do("POST", "/api/v1/contexts", api.ContentTypeJSON, []byte(`{"name":"mem","embedding_dim":8}`)).wantError(t, http.StatusConflict, api.CodeAlreadyExists)
	if !strings.Contains(e.Message, "embedding_dim 4, not 8") {
		t.Fatalf("conflict message %q", e.Message)
	}
	var stores api.ListContextStoresResponse
	tw.do("GET", "/api/v1/contexts", "", nil).want(t, http.StatusOK, &stores)
	if len(stores.Contexts) != 1 || stores.Contexts[0].Name != "mem" {
		t.Fatalf("stores %+v", stores)
	}

	ext := "doc-1"
	a := cxRec("a", "run1", []float32{1, 0, 0, 0}, "the quick brown fox")
	a.ExternalID = &ext
	a.BinaryPayload = []byte{1, 2, 3}
	b := cxRec("b", "run1", []float32{0, 1, 0, 0}, "lazy dog")
	b.Relationships = []api.ContextRelationship{{TargetID: "a", Relation: "cites"}}
	past := time.Now().Add(-time.Hour)
	c := cxRec("c", "run2", []float32{0, 0, 1, 0}, "expired fox")
	c.ExpiresAt = &past
	added := tw.cxAdd("mem", a, b, c)
	if added.Count != 3 || !slices.Equal(added.IDs, []string{"a", "b", "c"}) {
		t.Fatalf("add %+v", added)
	}

	var got api.GetContextRecordResponse
	tw.do("GET", "/api/v1/contexts/mem/records/a", "", nil).want(t, http.StatusOK, &got)
	if got.Record == nil || got.Record.ExternalID == nil || *got.Record.ExternalID != ext || string(got.Record.BinaryPayload) != "\x01\x02\x03" {
		t.Fatalf("get a: %+v", got.Record)
	}
	got = api.GetContextRecordResponse{}
	tw.do("GET", "/api/v1/contexts/mem/records/nope", "", nil).want(t, http.StatusOK, &got)
	if got.Record != nil {
		t.Fatalf("missing record: %+v", got.Record)
	}

	// Upsert of doc-1: a new row supersedes a.
	up := cxRec("", "run1", []float32{1, 1, 0, 0}, "the quick brown fox jumps")
	up.ExternalID = &ext
	var ur api.UpsertContextRecordResponse
	tw.cxJSON("PUT", "/api/v1/contexts/mem/records", api.UpsertContextRecordRequest{Record: up}, http.StatusOK, &ur)
	if ur.Inserted || ur.ReplacedID == nil || *ur.ReplacedID != "a" || ur.Record.SupersedesID == nil || *ur.Record.SupersedesID != "a" {
		t.Fatalf("upsert %+v", ur)
	}
	newID := ur.Record.ID
	tw.do("GET", "/api/v1/contexts/mem/records/by-external-id?external_id=doc-1", "", nil).want(t, http.StatusOK, &got)
	if got.Record == nil || got.Record.ID != newID {
		t.Fatalf("by external id: %+v", got.Record)
	}
	tw.do("GET", "/api/v1/contexts/mem/records/a", "", nil).want(t, http.StatusOK, &got)
	if got.Record == nil || got.Record.SupersededByID == nil || *got.Record.SupersededByID != newID || got.Record.LifecycleStatus != ctxstore.StatusSuperseded {
		t.Fatalf("superseded a: %+v", got.Record)
	}

	// Batch upsert: doc-1 again (supersedes newID) and a new doc-2.
	ext2 := "doc-2"
	u1, u2 := cxRec("", "run1", []float32{1, 2, 0, 0}, "v3"), cxRec("d", "run3", []float32{0, 0, 0, 1}, "doc two")
	u1.ExternalID, u2.ExternalID = &ext, &ext2
	var br api.UpsertContextRecordsResponse
	tw.cxJSON("PUT", "/api/v1/contexts/mem/records/batch", api.UpsertContextRecordsRequest{Records: []api.AddContextRecord{u1, u2}, Key: "external_id"}, http.StatusOK, &br)
	if len(br.Results) != 2 || br.Results[0].Inserted || *br.Results[0].ReplacedID != newID || !br.Results[1].Inserted {
		t.Fatalf("batch upsert %+v", br)
	}
	headID := br.Results[0].Record.ID

	// Patch by external id: the head is rewritten in place (same id).
	var pr api.PatchContextRecordResponse
	tw.cxJSON("PATCH", "/api/v1/contexts/mem/records", map[string]any{"external_id": "doc-1", "patch": map[string]any{"tenant": "acme", "text_payload": "patched fox"}}, http.StatusOK, &pr)
	if !pr.Updated || pr.Record == nil || pr.Record.ID != headID || *pr.Record.Tenant != "acme" || *pr.Record.TextPayload != "patched fox" || *pr.Record.SupersedesID != newID {
		t.Fatalf("patch %+v", pr)
	}
	pr = api.PatchContextRecordResponse{}
	tw.cxJSON("PATCH", "/api/v1/contexts/mem/records", map[string]any{"id": "nope", "patch": map[string]any{"tenant": "x"}}, http.StatusOK, &pr)
	if pr.Updated || pr.Record != nil {
		t.Fatalf("patch of a missing record: %+v", pr)
	}

	list := func(query string) []string {
		t.Helper()
		var lr api.ListContextRecordsResponse
		tw.do("GET", "/api/v1/contexts/mem/records"+query, "", nil).want(t, http.StatusOK, &lr)
		ids := resultIDs(lr.Records, func(r api.ContextRecord) string { return r.ID })
		sort.Strings(ids)
		return ids
	}
	check := func(stage string) {
		t.Helper()
		if ids, want := list(""), []string{"b", "d", headID}; !slices.Equal(ids, sorted(want)) {
			t.Fatalf("%s: list %v, want %v", stage, ids, sorted(want))
		}
		if ids, want := list("?include_retired=true&include_expired=true"), []string{"a", "b", "c", "d", newID, headID}; !slices.Equal(ids, sorted(want)) {
			t.Fatalf("%s: list all %v, want %v", stage, ids, sorted(want))
		}
		f := url.QueryEscape(`{"run_id":"run1"}`)
		if ids, want := list("?filters="+f), []string{"b", headID}; !slices.Equal(ids, sorted(want)) {
			t.Fatalf("%s: list run1 %v", stage, ids)
		}
		if ids := list("?include_expired=true&filters=" + url.QueryEscape(`{"run_id":"run2"}`)); !slices.Equal(ids, []string{"c"}) {
			t.Fatalf("%s: expired %v", stage, ids)
		}
		var rel api.ListContextRecordsResponse
		tw.do("GET", "/api/v1/contexts/mem/records/related?target_id=a&relation=cites&include_relationships=true", "", nil).want(t, http.StatusOK, &rel)
		if len(rel.Records) != 1 || rel.Records[0].ID != "b" || len(rel.Records[0].Relationships) != 1 {
			t.Fatalf("%s: related %+v", stage, rel)
		}
		r := tw.do("GET", "/api/v1/contexts/mem/records/a/payload", "", nil)
		if r.status != http.StatusOK || string(r.body) != "\x01\x02\x03" {
			t.Fatalf("%s: payload %v", stage, r)
		}
		// Search: the nearest live record to (1,1,0,0) in cosine is the head of doc-1 (1,2,0,0).
		res := tw.cxSearch("mem", api.SearchContextRequest{Query: []float32{1, 1, 0, 0}, Limit: intp(10)})
		if ids := searchIDs(res); len(ids) != 3 || ids[0] != headID {
			t.Fatalf("%s: search %v", stage, ids)
		}
	}
	check("wal")

	// Delete: by id (one tombstone) and by external id (doc-2's chain).
	var dr api.DeleteContextRecordsResponse
	tw.do("DELETE", "/api/v1/contexts/mem/records/b", "", nil).want(t, http.StatusOK, &dr)
	if dr.Deleted != 1 {
		t.Fatalf("delete b: %+v", dr)
	}
	tw.do("DELETE", "/api/v1/contexts/mem/records/b", "", nil).want(t, http.StatusOK, &dr)
	if dr.Deleted != 0 {
		t.Fatalf("delete b again: %+v", dr)
	}
	tw.do("DELETE", "/api/v1/contexts/mem/records?external_id=doc-2", "", nil).want(t, http.StatusOK, &dr)
	if dr.Deleted != 1 {
		t.Fatalf("delete doc-2: %+v", dr)
	}
	if ids := list(""); !slices.Equal(ids, []string{headID}) {
		t.Fatalf("after deletes: %v", ids)
	}
	got = api.GetContextRecordResponse{}
	tw.do("GET", "/api/v1/contexts/mem/records/b", "", nil).want(t, http.StatusOK, &got)
	if got.Record != nil {
		t.Fatalf("deleted b reads %+v", got.Record)
	}

	// Merge: the same answers from the base table.
	var v0 api.ContextVersionResponse
	tw.do("GET", "/api/v1/contexts/mem/version", "", nil).want(t, http.StatusOK, &v0)
	tw.cxMerge("mem")
	var v1 api.ContextVersionResponse
	tw.do("GET", "/api/v1/contexts/mem/version", "", nil).want(t, http.StatusOK, &v1)
	if v1.Version <= v0.Version {
		t.Fatalf("version %d after a merge, %d before", v1.Version, v0.Version)
	}
	if ids := list("?include_retired=true&include_expired=true"); !slices.Equal(ids, sorted([]string{"a", "c", newID, headID})) {
		t.Fatalf("merged: %v", ids)
	}
	// Two more merged writes, then compaction folds the fragments.
	tw.cxAdd("mem", cxRec("e", "run4", []float32{0, 0, 1, 1}, ""))
	tw.cxMerge("mem")
	var cr api.ContextCompactResponse
	tw.cxJSON("POST", "/api/v1/contexts/mem/compact", map[string]any{}, http.StatusOK, &cr)
	if cr.FragmentsRemoved < 2 || cr.FragmentsAdded != 1 {
		t.Fatalf("compact %+v", cr)
	}
	var cs api.ContextCompactStatsResponse
	tw.do("GET", "/api/v1/contexts/mem/compact/stats", "", nil).want(t, http.StatusOK, &cs)
	if cs.TotalFragments != 1 || cs.TotalCompactions != 1 || cs.LastCompaction == nil || cs.IsCompacting || cs.LastError != nil {
		t.Fatalf("compact stats %+v", cs)
	}

	// LanceDB reads the table: every row, tombstones as rows of their content type.
	rows, err := oracle.New(t).Read(filepath.Join(tw.dir, "mem.context.lance"), oracle.ReadOptions{Columns: []string{"id", "content_type", "lifecycle_status", "superseded_by_id"}})
	if err != nil {
		t.Fatal(err)
	}
	byID := map[string]map[string]any{}
	for _, r := range rows {
		var m map[string]any
		if err := json.Unmarshal([]byte(r), &m); err != nil {
			t.Fatal(err)
		}
		byID[m["id"].(string)] = m
	}
	if len(byID) != 7 || len(rows) != 7 {
		t.Fatalf("LanceDB reads %d rows: %v", len(rows), rows)
	}
	if byID["b"]["content_type"] != ctxstore.ContentTypeTombstone || byID["a"]["superseded_by_id"] != newID || byID[newID]["lifecycle_status"] != "superseded" {
		t.Fatalf("LanceDB rows %v", rows)
	}

	// Reopened on another worker process (same data): the options come from the table.
	tw.close()
	tw2 := newTestWorker(t, tw.dir, nil)
	var info2 api.ContextStoreInfo
	tw2.do("GET", "/api/v1/contexts/mem", "", nil).want(t, http.StatusOK, &info2)
	if info2.EmbeddingDim != 4 || info2.DistanceMetric != "cosine" {
		t.Fatalf("reopened info %+v", info2)
	}
	tw2.do("POST", "/api/v1/contexts/mem/search", api.ContentTypeJSON, []byte(`{"query":[1,2,3]}`)).wantError(t, http.StatusBadRequest, api.CodeInvalidRequest)
}

func intp(n int) *int { return &n }

// TestContextSearchEqualsLanceDB: for each metric, a search over base + WAL returns
// the ids and distances LanceDB's own exact search (nearestTo(q).distanceType(m)
// .bypassVectorIndex()) returns on the merged table, with filters applied before
// ranking.
func TestContextSearchEqualsLanceDB(t *testing.T) {
	const dim, n, k = 16, 240, 7
	for _, metric := range []string{"l2", "cosine", "dot"} {
		t.Run(metric, func(t *testing.T) {
			tw := newTestWorker(t, "", nil)
			tw.cxCreate("s", dim, metric)
			rng := rand.New(rand.NewPCG(7, uint64(len(metric))))
			var batch []api.AddContextRecord
			for i := range n {
				run := []string{"ra", "rb"}[i%2]
				var emb []float32
				if i%17 != 5 { // some records have no embedding: never ranked
					emb = randVec(rng, dim)
				}
				batch = append(batch, cxRec(fmt.Sprintf("r%03d", i), run, emb, ""))
				if len(batch) == 40 {
					tw.cxAdd("s", batch...)
					batch = nil
					if i < n/2 {
						tw.cxMerge("s") // the first half in the base table, the rest in the WAL
					}
				}
			}
			queries := make([][]float32, 5)
			for i := range queries {
				queries[i] = randVec(rng, dim)
			}
			filters := []*api.ContextFilters{nil, {RunID: strp("rb")}}
			type answer struct {
				ids   []string
				dists []float32
			}
			var before []answer
			for _, q := range queries {
				for _, f := range filters {
					res := tw.cxSearch("s", api.SearchContextRequest{Query: q, Limit: intp(k), Filters: f})
					a := answer{ids: searchIDs(res)}
					for _, r := range res {
						a.dists = append(a.dists, r.Distance)
						if f != nil && r.Record.RunID != "rb" {
							t.Fatalf("filtered search returned %s of run %s", r.Record.ID, r.Record.RunID)
						}
					}
					if len(a.ids) != k {
						t.Fatalf("%d results, want %d", len(a.ids), k)
					}
					before = append(before, a)
				}
			}
			tw.cxMerge("s")
			var specs []oracle.QuerySpec
			for _, q := range queries {
				for _, f := range filters {
					where := "content_type != '" + ctxstore.ContentTypeTombstone + "'"
					if f != nil {
						where += " AND run_id = 'rb'"
					}
					specs = append(specs, oracle.QuerySpec{Vector: q, Column: "embedding", Limit: k, BypassIndex: true,
						DistanceType: metric, Where: where, Columns: []string{"id"}})
				}
			}
			res, err := oracle.New(t).Queries(filepath.Join(tw.dir, "s.context.lance"), specs)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range res {
				var ids []string
				var dists []float32
				for _, row := range r.Rows {
					var m struct {
						ID       string  `json:"id"`
						Distance float64 `json:"_distance"`
					}
					if err := json.Unmarshal([]byte(row), &m); err != nil {
						t.Fatal(err)
					}
					ids = append(ids, m.ID)
					dists = append(dists, float32(m.Distance))
				}
				if !slices.Equal(ids, before[i].ids) {
					t.Fatalf("query %d: lancectx (base+WAL) %v, LanceDB (merged) %v", i, before[i].ids, ids)
				}
				for j := range dists {
					if d := math.Abs(float64(dists[j] - before[i].dists[j])); d > 1e-4*math.Max(1, math.Abs(float64(dists[j]))) {
						t.Fatalf("query %d rank %d: distance %v, LanceDB %v", i, j, before[i].dists[j], dists[j])
					}
				}
			}
		})
	}
}

// TestContextRetrieveHybrid: BM25 over text_payload and the vector channel fuse by
// reciprocal rank, over base + WAL, with each channel's score reported.
func TestContextRetrieveHybrid(t *testing.T) {
	tw := newTestWorker(t, "", nil)
	tw.cxCreate("h", 2, "l2")
	tw.cxAdd("h",
		cxRec("fox", "r", []float32{10, 10}, "the quick brown fox"),
		cxRec("dog", "r", []float32{0, 1}, "a lazy dog sleeps"),
		cxRec("both", "r", []float32{0, 0.1}, "fox and dog"),
	)
	tw.cxMerge("h")
	tw.cxAdd("h", cxRec("near", "r", []float32{0, 0}, "nothing relevant"))
	var out api.RetrieveContextResponse
	tw.cxJSON("POST", "/api/v1/contexts/h/retrieve", api.RetrieveContextRequest{Text: strp("fox"), Vector: []float32{0, 0}, Limit: intp(4)}, http.StatusOK, &out)
	ids := resultIDs(out.Results, func(r api.RetrieveContextResult) string { return r.Record.ID })
	// Vector ranks near, both, dog, fox; text ranks both and fox (BM25: the shorter
	// document with fox first). both: 1/62 + 1/61; near: 1/61; fox: 1/64 + 1/62; dog: 1/63.
	if want := []string{"both", "fox", "near", "dog"}; !slices.Equal(ids, want) {
		t.Fatalf("retrieve %v, want %v", ids, want)
	}
	r0 := out.Results[0]
	if math.Abs(r0.Score-(1.0/62+1.0/61)) > 1e-12 || !slices.Equal(r0.MatchedChannels, []string{"vector", "text"}) ||
		r0.VectorDistance == nil || math.Abs(float64(*r0.VectorDistance)-0.01) > 1e-6 || r0.TextScore == nil || *r0.TextScore <= 0 {
		t.Fatalf("first %+v", r0)
	}
	if nr := out.Results[2]; nr.TextScore != nil || !slices.Equal(nr.MatchedChannels, []string{"vector"}) {
		t.Fatalf("near %+v", nr)
	}
	// Text only.
	tw.cxJSON("POST", "/api/v1/contexts/h/retrieve", api.RetrieveContextRequest{Text: strp("DOG")}, http.StatusOK, &out)
	if ids := resultIDs(out.Results, func(r api.RetrieveContextResult) string { return r.Record.ID }); !slices.Equal(ids, []string{"both", "dog"}) {
		t.Fatalf("text only %v", ids)
	}
}

// TestContextRoutesServed: the mux serves every context route of the API document
// (a 2xx for a well-formed call), and answers another method with a JSON 405.
func TestContextRoutesServed(t *testing.T) {
	tw := newTestWorker(t, "", nil)
	n := 0
	for _, rt := range api.Routes() {
		if !strings.HasPrefix(rt.Path, "/api/v1/contexts") {
			continue
		}
		name := "s"
		if rt.Method == "DELETE" && rt.Path == "/api/v1/contexts/{name}" {
			name = "s2" // created by the POST before it
		}
		path := strings.NewReplacer("{name}", name, "{id}", "x").Replace(rt.Path)
		path, body, ct := contextRouteCall(t, tw, rt, path)
		if r := tw.do(rt.Method, path, ct, body); r.status >= 300 {
			t.Errorf("%s %s: %s", rt.Method, path, r)
		}
		n++
	}
	if n != 21 {
		t.Fatalf("%d context routes, want the reference's 21", n)
	}
	r := tw.do("POST", "/api/v1/contexts/s/records/batch", api.ContentTypeJSON, []byte(`{}`))
	r.wantError(t, http.StatusMethodNotAllowed, api.CodeInvalidRequest)
	if allow := r.header.Get("Allow"); allow != "PUT" {
		t.Fatalf("Allow: %q", allow)
	}
	tw.do("PUT", "/api/v1/contexts/s/search", api.ContentTypeJSON, nil).wantError(t, http.StatusMethodNotAllowed, api.CodeInvalidRequest)
}

// contextRouteCall is TestContextRoutesServed's call of a context route: its store s (and
// s2 to delete) created on first use, record x in it, a body where one is needed.
func contextRouteCall(t *testing.T, tw *testWorker, rt api.Route, path string) (string, []byte, string) {
	t.Helper()
	if tw.do("GET", "/api/v1/contexts/s", "", nil).status == http.StatusNotFound {
		tw.cxCreate("s", 2, "l2")
		x := cxRec("x", "r", []float32{1, 2}, "some text")
		x.ExternalID, x.BinaryPayload = strp("ex"), []byte("p")
		tw.cxAdd("s", x)
	}
	ct := api.ContentTypeJSON
	switch rt.Method + " " + rt.Path {
	case "POST /api/v1/contexts":
		return path, []byte(`{"name":"s2","embedding_dim":2}`), ct
	case "POST /api/v1/contexts/{name}/records":
		return path, []byte(`{"records":[{"id":"y","run_id":"r"}]}`), ct
	case "PUT /api/v1/contexts/{name}/records":
		return path, []byte(`{"record":{"run_id":"r","external_id":"ex"}}`), ct
	case "PUT /api/v1/contexts/{name}/records/batch":
		return path, []byte(`{"records":[{"run_id":"r","external_id":"ex2"}]}`), ct
	case "PATCH /api/v1/contexts/{name}/records":
		return path, []byte(`{"id":"x","patch":{"tenant":"t"}}`), ct
	case "DELETE /api/v1/contexts/{name}/records":
		return strings.Replace(path, "s2", "s", 1) + "?external_id=ex2", nil, ""
	case "GET /api/v1/contexts/{name}/records/by-external-id":
		return path + "?external_id=ex", nil, ""
	case "GET /api/v1/contexts/{name}/records/related":
		return path + "?target_id=x", nil, ""
	case "DELETE /api/v1/contexts/{name}/records/{id}":
		return "/api/v1/contexts/s/records/y", nil, ""
	case "POST /api/v1/contexts/{name}/search":
		return path, []byte(`{"query":[0,0]}`), ct
	case "POST /api/v1/contexts/{name}/retrieve":
		return path, []byte(`{"text":"text"}`), ct
	case "POST /api/v1/contexts/{name}/compact":
		return path, []byte(`{}`), ct
	case "POST /api/v1/contexts/{name}/checkout":
		return path, []byte(`{"latest":true}`), ct
	}
	return path, nil, ""
}

// postJSON is an HTTP POST usable off the test goroutine: errors are returned.
func postJSON(base, path string, body any, out any) (int, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return 0, err
	}
	resp, err := http.Post(base+path, api.ContentTypeJSON, strings.NewReader(string(b)))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		var e api.ErrorResponse
		_ = json.NewDecoder(resp.Body).Decode(&e)
		return resp.StatusCode, fmt.Errorf("POST %s: %d %s: %s", path, resp.StatusCode, e.Error.Code, e.Error.Message)
	}
	if out != nil {
		return resp.StatusCode, json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode, nil
}

// TestContextSearchDuringMergesAndCompaction: while records are added one by one and
// merges and compactions run back to back, searches run continuously, and each finds
// every record acked before it started (base, pending generations and memtable, as
// they move between them).
func TestContextSearchDuringMergesAndCompaction(t *testing.T) {
	const n = 60
	tw := newTestWorker(t, "", nil)
	tw.cxCreate("live", 8, "l2")
	rng := rand.New(rand.NewPCG(3, 4))
	vecs := make([][]float32, n)
	for i := range vecs {
		vecs[i] = randVec(rng, 8)
	}
	var mu sync.Mutex
	var acked []string
	writerDone := make(chan error, 1)
	go func() {
		for i := range n {
			id := fmt.Sprintf("w%03d", i)
			if _, err := postJSON(tw.url, "/api/v1/contexts/live/records", api.AddContextRecordsRequest{Records: []api.AddContextRecord{cxRec(id, "c", vecs[i], "")}}, nil); err != nil {
				writerDone <- err
				return
			}
			mu.Lock()
			acked = append(acked, id)
			mu.Unlock()
		}
		writerDone <- nil
	}()
	stop := make(chan struct{})
	type maint struct {
		merges, compactions, removed int
		err                          error
	}
	maintDone := make(chan maint, 1)
	go func() {
		var m maint
		defer func() { maintDone <- m }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			res, err := tw.srv.mergeWAL(ctx, tw.srv.contexts, "live", true)
			cancel()
			if err != nil {
				m.err = fmt.Errorf("merge: %w", err)
				return
			}
			if res.Reclaimed > 0 {
				m.merges++
			}
			var cr api.ContextCompactResponse
			if _, err := postJSON(tw.url, "/api/v1/contexts/live/compact", map[string]any{}, &cr); err != nil {
				m.err = err
				return
			}
			m.compactions++
			m.removed += cr.FragmentsRemoved
		}
	}()
	searches := 0
	var werr error
	for done := false; !done; {
		select {
		case werr = <-writerDone:
			done = true // one more search below sees every record
		default:
		}
		mu.Lock()
		want := slices.Clone(acked)
		mu.Unlock()
		var out api.SearchContextResponse
		if _, err := postJSON(tw.url, "/api/v1/contexts/live/search", api.SearchContextRequest{Query: vecs[0], Limit: intp(n + 10),
			Filters: &api.ContextFilters{RunID: strp("c")}}, &out); err != nil {
			close(stop)
			<-maintDone
			t.Fatalf("search %d (%d acked): %v", searches, len(want), err)
		}
		got := map[string]bool{}
		for _, r := range out.Results {
			got[r.Record.ID] = true
		}
		for _, id := range want {
			if !got[id] {
				close(stop)
				<-maintDone
				t.Fatalf("search %d: acked record %s missing (%d acked, %d found)", searches, id, len(want), len(out.Results))
			}
		}
		searches++
	}
	close(stop)
	m := <-maintDone
	if werr != nil {
		t.Fatal(werr)
	}
	if m.err != nil {
		t.Fatal(m.err)
	}
	t.Logf("%d searches, %d merges, %d compactions removing %d fragments", searches, m.merges, m.compactions, m.removed)
	if m.merges == 0 || m.removed == 0 {
		t.Fatalf("no merge (%d) or no compaction that removed fragments (%d) ran during the searches", m.merges, m.removed)
	}
}

// contextCrash adds records with embeddings and text (every add is sealed; there is
// no merge route: the background loop merges under load and the final merge runs in
// process).
var contextCrash = crashKind{
	kind:       "context",
	createPath: "/api/v1/contexts", createBody: `{"name":"crash","embedding_dim":4,"distance_metric":"cosine"}`,
	appendPath: "/api/v1/contexts/crash/records",
	getPath:    "/api/v1/contexts/crash/records/",
	appendBody: func(iter, c, n int, ids, content []string) []byte {
		recs := make([]api.AddContextRecord, len(ids))
		for k, id := range ids {
			recs[k] = cxRec(id, fmt.Sprintf("r%d", c), []float32{1, float32(n), float32(k), float32(iter)}, content[k])
		}
		b, _ := json.Marshal(api.AddContextRecordsRequest{Records: recs})
		return b
	},
	listIDs: func(t *testing.T, base string) []string {
		var out api.ListContextRecordsResponse
		doHTTP(t, base, "GET", "/api/v1/contexts/crash/records?limit=100000", "", nil).want(t, http.StatusOK, &out)
		return resultIDs(out.Records, func(r api.ContextRecord) string { return r.ID })
	},
}

// TestCrashKill9Context runs crashKill9 on a context store.
func TestCrashKill9Context(t *testing.T) { crashKill9(t, contextCrash) }

// TestContextCheckout: a checkout pins the store (on this worker) to a base version:
// reads see that version alone (the WAL left out), writes and compaction are a 409,
// an unknown version is a 404; {"latest": true} unpins it.
func TestContextCheckout(t *testing.T) {
	tw := newTestWorker(t, "", nil)
	tw.cxCreate("co", 2, "l2")
	tw.cxAdd("co", cxRec("a", "r", []float32{0, 0}, "alpha"), cxRec("b", "r", []float32{1, 0}, "beta"))
	tw.cxMerge("co")
	var v1 api.ContextVersionResponse
	tw.do("GET", "/api/v1/contexts/co/version", "", nil).want(t, http.StatusOK, &v1)
	tw.cxJSON("PATCH", "/api/v1/contexts/co/records", map[string]any{"id": "a", "patch": map[string]any{"tenant": "later"}}, http.StatusOK, nil)
	tw.cxAdd("co", cxRec("c", "r", []float32{0, 1}, "gamma"))
	tw.cxMerge("co")
	tw.cxAdd("co", cxRec("d", "r", []float32{2, 2}, "delta")) // in the WAL only

	listIDs := func() []string {
		t.Helper()
		var lr api.ListContextRecordsResponse
		tw.do("GET", "/api/v1/contexts/co/records", "", nil).want(t, http.StatusOK, &lr)
		return sorted(resultIDs(lr.Records, func(r api.ContextRecord) string { return r.ID }))
	}
	var got api.ContextVersionResponse
	tw.cxJSON("POST", "/api/v1/contexts/co/checkout", map[string]any{"version": v1.Version}, http.StatusOK, &got)
	if got.Version != v1.Version {
		t.Fatalf("checkout answered %+v, want %d", got, v1.Version)
	}
	if ids := listIDs(); !slices.Equal(ids, []string{"a", "b"}) {
		t.Fatalf("pinned list %v", ids)
	}
	var rec api.GetContextRecordResponse
	tw.do("GET", "/api/v1/contexts/co/records/a", "", nil).want(t, http.StatusOK, &rec)
	if rec.Record == nil || rec.Record.Tenant != nil {
		t.Fatalf("pinned a is not the version's: %+v", rec.Record)
	}
	if ids := searchIDs(tw.cxSearch("co", api.SearchContextRequest{Query: []float32{2, 2}})); !slices.Equal(ids, []string{"b", "a"}) {
		t.Fatalf("pinned search %v", ids)
	}
	tw.do("POST", "/api/v1/contexts/co/records", api.ContentTypeJSON, []byte(`{"records":[{"run_id":"r"}]}`)).wantError(t, http.StatusConflict, api.CodeConflict)
	tw.do("POST", "/api/v1/contexts/co/compact", api.ContentTypeJSON, []byte(`{}`)).wantError(t, http.StatusConflict, api.CodeConflict)
	tw.do("POST", "/api/v1/contexts/co/checkout", api.ContentTypeJSON, []byte(`{"version":999}`)).wantError(t, http.StatusNotFound, api.CodeNotFound)
	tw.do("POST", "/api/v1/contexts/co/checkout", api.ContentTypeJSON, []byte(`{"version":1,"latest":true}`)).wantError(t, http.StatusBadRequest, api.CodeInvalidRequest)

	tw.cxJSON("POST", "/api/v1/contexts/co/checkout", map[string]any{"latest": true}, http.StatusOK, &got)
	if got.Version <= v1.Version {
		t.Fatalf("unpinned at %d", got.Version)
	}
	if ids := listIDs(); !slices.Equal(ids, []string{"a", "b", "c", "d"}) {
		t.Fatalf("unpinned list %v", ids)
	}
	tw.cxAdd("co", cxRec("e", "r", nil, ""))
}

// contextAccepts are the query parameters of the context routes that take some
// (TestEveryRouteRefusesUnknownParameters).
var contextAccepts = map[string]string{
	"GET /api/v1/contexts/{name}/records":                "this route accepts limit, offset, filters, include_expired, include_retired, include_relationships",
	"DELETE /api/v1/contexts/{name}/records":             "this route accepts external_id",
	"GET /api/v1/contexts/{name}/records/by-external-id": "this route accepts external_id",
	"GET /api/v1/contexts/{name}/records/related":        "this route accepts limit, offset, filters, include_expired, include_retired, include_relationships, target_id, relation",
}

// TestContextTableLanceDBReadsExactly: records with every field set (and records
// with none of the optional ones), written through the WAL and merged, are read by
// LanceDB column for column as the API returns them.
func TestContextTableLanceDBReadsExactly(t *testing.T) {
	tw := newTestWorker(t, "", nil)
	tw.cxCreate("x", 3, "cosine")
	at := time.Date(2026, 3, 4, 5, 6, 7, 8000, time.UTC)
	full := api.AddContextRecord{ID: "full", CreatedAt: &at, ContextRecordFields: api.ContextRecordFields{
		RunID: "run", BotID: strp("bot"), SessionID: strp("sess"), Role: "assistant",
		StateMetadata: &api.ContextStateMetadata{Step: func() *int32 { v := int32(3); return &v }(), ActivePlanID: strp("plan"), Custom: strp("c")},
		ContentType:   "text/markdown", TextPayload: strp("# notes\nünïcode"), BinaryPayload: []byte{0, 1, 2, 255},
		Embedding: []float32{0.5, -1.25, 3}, ExternalID: strp("ext"), Tenant: strp("acme"), Source: strp("chat"),
		PayloadURI: strp("s3://b/k"), PayloadSize: i64p(42), PayloadChecksum: strp("sha256:00"),
		Metadata:      json.RawMessage(`{"k":[1,2,{"x":null}]}`),
		Relationships: []api.ContextRelationship{{TargetID: "bare", Relation: "cites", Weight: f32p(0.75)}, {TargetID: "other", Relation: "next"}},
		ExpiresAt:     func() *time.Time { v := at.Add(24 * time.Hour); return &v }(), RetentionPolicy: strp("30d"),
		LifecycleStatus: "retired", RetiredAt: &at, RetiredReason: strp("stale"),
	}}
	bare := cxRec("bare", "run", nil, "")
	tw.cxAdd("x", full, bare)
	tw.cxMerge("x")
	var recs []api.ContextRecord
	for _, id := range []string{"full", "bare"} {
		var got api.GetContextRecordResponse
		tw.do("GET", "/api/v1/contexts/x/records/"+id, "", nil).want(t, http.StatusOK, &got)
		if got.Record == nil {
			t.Fatalf("%s missing", id)
		}
		recs = append(recs, *got.Record)
	}
	if r := recs[0]; r.CreatedAt != at || *r.StateMetadata.Step != 3 || string(r.Metadata) != `{"k":[1,2,{"x":null}]}` || len(r.Relationships) != 2 {
		t.Fatalf("full read back as %+v", r)
	}
	opts, _ := ctxstore.ParseOptions(&api.CreateContextStoreRequest{EmbeddingDim: intp(3), DistanceMetric: strp("cosine")})
	rec, err := ctxstore.ToRecord(recs, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	want, err := arrowjson.Rows(rec)
	if err != nil {
		t.Fatal(err)
	}
	got, err := oracle.New(t).Read(filepath.Join(tw.dir, "x.context.lance"), oracle.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(want)
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Fatalf("LanceDB reads\n%s\nthe API returns\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
