package worker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/datagen"
	"github.com/lancectx/lancectx/internal/oracle"
	"github.com/lancectx/lancectx/rollout"
	"github.com/lancectx/lancectx/wal"
)

// TestEndToEnd drives every route of one store over real HTTP on a FileStore data
// directory, and checks with LanceDB that the base table holds exactly what the API
// lists once the WAL is merged.
func TestEndToEnd(t *testing.T) {
	tw := newTestWorker(t, "", nil)
	info := tw.createStore("exp")
	if info.Name != "exp" || info.URI != "file://"+tw.dir+"/exp.rollout.lance" || info.Version == 0 {
		t.Fatalf("create answered %+v", info)
	}
	tw.do("POST", "/api/v1/rollouts", api.ContentTypeJSON, []byte(`{"name":"exp"}`)).wantError(t, http.StatusConflict, api.CodeAlreadyExists)

	// JSON append, every kind of column.
	big := make([]byte, 300<<10)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range big {
		big[i] = byte(rng.IntN(256))
	}
	jsonRecs := []rollout.AddRecord{
		{ID: "a1", RolloutID: "r1", SequenceOrder: 0, Role: "user", Content: strp("hello"), Reward: f32p(0.5),
			PolicyVersion: strp("ckpt-1"), IncludeInTraining: boolp(true), InputTokens: []int32{1, 2, 3},
			OutputLogprobs: []float32{-0.5, -1.25}, LossMask: []int8{1, 0}, Metadata: json.RawMessage(`{"k":1}`),
			Relationships: []rollout.Relationship{{TargetID: "a2", Relation: "next", Weight: f32p(1)}}},
		{ID: "a2", RolloutID: "r1", SequenceOrder: 1, BinaryPayload: []byte{0, 1, 2, 255}, ArtifactType: strp("image")},
		{ID: "a3", RolloutID: "r2", Dataset: strp("gsm8k"), IncludeInTraining: boolp(false)},
	}
	ar := tw.appendJSON("exp", false, jsonRecs...)
	if ar.Count != 3 || !slices.Equal(ar.IDs, []string{"a1", "a2", "a3"}) || !ar.Durable || ar.Visible {
		t.Fatalf("append answered %+v", ar)
	}
	// Multipart with binary parts: a declared payload_size, and one taken from the part.
	ct, body := multipartBody(t, []rollout.AddRecord{
		{ID: "m1", RolloutID: "r2", PayloadSize: i64p(5), PayloadChecksum: strp("none")},
		{ID: "m2", RolloutID: "r3", Role: "tool"},
	}, map[int][]byte{0: {5, 4, 3, 2, 1}, 1: big})
	var mr api.AppendResponse
	tw.do("POST", "/api/v1/rollouts/exp/records", ct, body).want(t, http.StatusCreated, &mr)
	if mr.Count != 2 || mr.Visible {
		t.Fatalf("multipart append answered %+v", mr)
	}

	// Unflushed rows: this worker reads them, another worker does not yet.
	other := newTestWorker(t, tw.dir, func(c *Config) { c.WorkerID = "other-worker" })
	var seen, unseen api.GetRecordResponse[*rollout.Record]
	tw.do("GET", "/api/v1/rollouts/exp/records/a1", "", nil).want(t, http.StatusOK, &seen)
	other.do("GET", "/api/v1/rollouts/exp/records/a1", "", nil).want(t, http.StatusOK, &unseen)
	if seen.Record == nil || seen.Record.ID != "a1" || unseen.Record != nil {
		t.Fatalf("unflushed a1: this worker reads %+v, the other %+v (want the row, then null)", seen.Record, unseen.Record)
	}
	fr := tw.appendJSON("exp", true, rec("f1", "r3"))
	if !fr.Visible || !fr.Durable {
		t.Fatalf("flush append answered %+v", fr)
	}
	allIDs := []string{"a1", "a2", "a3", "f1", "m1", "m2"}
	if got := sorted(ids(other.listAll("exp", "", 100))); !slices.Equal(got, allIDs) {
		t.Fatalf("after ?flush=true another worker lists %v, want %v", got, allIDs)
	}
	other.close() // its shard must not outlive the store's deletion below

	// Reads.
	all := tw.listAll("exp", "", 100)
	if got := sorted(ids(all)); !slices.Equal(got, allIDs) {
		t.Fatalf("list: %v, want %v", got, allIDs)
	}
	if got := ids(tw.listAll("exp", "", 2)); !slices.Equal(got, ids(all)) {
		t.Fatalf("paged list: %v", got)
	}
	if got := sorted(ids(tw.listAll("exp", `{"rollout_id":"r2"}`, 100))); !slices.Equal(got, []string{"a3", "m1"}) {
		t.Fatalf("filtered list: %v", got)
	}
	if got := ids(tw.listAll("exp", `{"include_in_training":true,"policy_version":"ckpt-1"}`, 1)); !slices.Equal(got, []string{"a1"}) {
		t.Fatalf("filtered list: %v", got)
	}
	var one api.GetRecordResponse[rollout.Record]
	tw.do("GET", "/api/v1/rollouts/exp/records/a1", "", nil).want(t, http.StatusOK, &one)
	a1 := one.Record
	if a1.Role != "user" || *a1.Content != "hello" || *a1.Reward != 0.5 || !slices.Equal(a1.InputTokens, []int32{1, 2, 3}) ||
		string(a1.Metadata) != `{"k":1}` || len(a1.Relationships) != 1 || a1.Relationships[0].TargetID != "a2" ||
		a1.ProblemID != "r1" || a1.ContentType != rollout.DefaultContentType || a1.CreatedAt.IsZero() || a1.BinaryPayload != nil {
		t.Fatalf("get a1: %+v", a1)
	}
	// A missing record is {"record": null} (the reference's answer); a missing payload a 404.
	if r := tw.do("GET", "/api/v1/rollouts/exp/records/nope", "", nil); r.status != http.StatusOK ||
		strings.TrimSpace(string(r.body)) != `{"record":null}` {
		t.Fatalf("missing record: %s", r)
	}
	checkBlob(t, tw, "a2", []byte{0, 1, 2, 255})
	checkBlob(t, tw, "m1", []byte{5, 4, 3, 2, 1})
	checkBlob(t, tw, "m2", big)
	tw.do("GET", "/api/v1/rollouts/exp/records/a1/blob", "", nil).wantError(t, http.StatusNotFound, api.CodeNotFound)

	// Arrow stream: default columns, then a projection with a filter.
	recs, sch := readArrow(t, tw, "")
	if n := rowsOf(recs); n != 6 {
		t.Fatalf("arrow stream has %d rows", n)
	}
	if want := rollout.DefaultReadColumns(rollout.Schema()); !slices.Equal(fieldNames(sch), want) {
		t.Fatalf("arrow columns %v, want %v", fieldNames(sch), want)
	}
	recs, sch = readArrow(t, tw, "?"+url.Values{"columns": {"id,reward,binary_payload"}, "filter": {"reward > 0.1 OR id = 'a2'"}}.Encode())
	if !slices.Equal(fieldNames(sch), []string{"id", "reward", "binary_payload"}) || rowsOf(recs) != 2 {
		t.Fatalf("projected arrow stream: columns %v, %d rows", fieldNames(sch), rowsOf(recs))
	}
	gotIDs := arrowStrings(t, recs, 0)
	sort.Strings(gotIDs)
	if !slices.Equal(gotIDs, []string{"a1", "a2"}) {
		t.Fatalf("filtered arrow ids %v", gotIDs)
	}

	// A client retry of a1 with new content: newest wins, one row per id.
	retry := jsonRecs[0]
	retry.Content = strp("hello again")
	tw.appendJSON("exp", false, retry)

	// Merge everything into the base table.
	var mw api.MergeWALResponse
	tw.do("POST", "/api/v1/internal/merge-wal/exp?flush=true", "", nil).want(t, http.StatusOK, &mw)
	if mw.Reclaimed < 2 || mw.Pending != 0 || mw.Version <= info.Version || mw.Rows != 7 {
		t.Fatalf("merge-wal answered %+v", mw)
	}
	var desc api.StoreInfo
	tw.do("GET", "/api/v1/rollouts/exp", "", nil).want(t, http.StatusOK, &desc)
	if desc.Version != mw.Version {
		t.Fatalf("describe says version %d after merge to %d", desc.Version, mw.Version)
	}
	all = tw.listAll("exp", "", 100)
	if got := ids(all); !slices.Equal(sorted(got), allIDs) {
		t.Fatalf("after merge the API lists %v", got)
	}
	if rep, err := wal.Audit(t.Context(), tw.srv.datasetStore(tw.srv.rollouts, "exp"), "id"); err != nil || rep.Duplicates != 0 || rep.Pending.Generations != 0 {
		t.Fatalf("audit %+v %v", rep, err)
	}
	checkOracle(t, filepath.Join(tw.dir, "exp.rollout.lance"), all)

	var stores api.ListStoresResponse
	tw.do("GET", "/api/v1/rollouts", "", nil).want(t, http.StatusOK, &stores)
	if len(stores.Stores) != 1 || stores.Stores[0].Name != "exp" || stores.Stores[0].URI != info.URI {
		t.Fatalf("stores: %+v", stores)
	}

	// Delete: the dataset (WAL included) and the entry go.
	tw.do("DELETE", "/api/v1/rollouts/exp", "", nil).want(t, http.StatusNoContent, nil)
	tw.do("GET", "/api/v1/rollouts/exp", "", nil).wantError(t, http.StatusNotFound, api.CodeNotFound)
	tw.do("GET", "/api/v1/rollouts/exp/records", "", nil).wantError(t, http.StatusNotFound, api.CodeNotFound)
	tw.do("GET", "/api/v1/rollouts", "", nil).want(t, http.StatusOK, &stores)
	if len(stores.Stores) != 0 {
		t.Fatalf("stores after delete: %+v", stores)
	}
	for k := range listing(t, tw.dir) {
		// LanceDB (the oracle above) keeps its namespace table __manifest in the
		// directory it connected to, the data directory; the registry keeps a
		// tombstone of the deleted incarnation (where a new one's history starts).
		if !strings.HasPrefix(k, "__manifest/") && k != "_registry/rollout/_deleted/exp.json" {
			t.Fatalf("object left after delete: %s", k)
		}
	}
	// The name is free again, and the new store starts empty.
	tw.createStore("exp")
	if got := tw.listAll("exp", "", 100); len(got) != 0 {
		t.Fatalf("recreated store lists %d records", len(got))
	}
}

func ids(rs []rollout.Record) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.ID
	}
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	sort.Strings(s)
	return s
}

func checkBlob(t *testing.T, tw *testWorker, id string, want []byte) {
	t.Helper()
	r := tw.do("GET", "/api/v1/rollouts/exp/records/"+id+"/blob", "", nil)
	r.want(t, http.StatusOK, nil)
	if ct := r.header.Get("Content-Type"); ct != api.ContentTypeOctetStream {
		t.Fatalf("blob Content-Type %q", ct)
	}
	if !bytes.Equal(r.body, want) {
		t.Fatalf("blob of %s: %d bytes, want %d", id, len(r.body), len(want))
	}
}

func readArrow(t *testing.T, tw *testWorker, query string) ([]arrow.RecordBatch, *arrow.Schema) {
	t.Helper()
	r := tw.do("GET", "/api/v1/rollouts/exp/arrow"+query, "", nil)
	r.want(t, http.StatusOK, nil)
	if ct := r.header.Get("Content-Type"); ct != api.ContentTypeArrowStream {
		t.Fatalf("arrow Content-Type %q", ct)
	}
	rd, err := ipc.NewReader(bytes.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Release()
	var out []arrow.RecordBatch
	for rd.Next() {
		b := rd.RecordBatch()
		b.Retain()
		out = append(out, b)
	}
	if err := rd.Err(); err != nil {
		t.Fatalf("arrow stream: %v", err)
	}
	t.Cleanup(func() {
		for _, b := range out {
			b.Release()
		}
	})
	return out, rd.Schema()
}

func rowsOf(recs []arrow.RecordBatch) int64 {
	var n int64
	for _, r := range recs {
		n += r.NumRows()
	}
	return n
}

func fieldNames(s *arrow.Schema) []string {
	var out []string
	for _, f := range s.Fields() {
		out = append(out, f.Name)
	}
	return out
}

func arrowStrings(t *testing.T, recs []arrow.RecordBatch, col int) []string {
	t.Helper()
	var out []string
	for _, r := range recs {
		a, ok := r.Column(col).(*array.String)
		if !ok {
			t.Fatalf("column %d is %s", col, r.Column(col).DataType())
		}
		for i := 0; i < a.Len(); i++ {
			out = append(out, a.Value(i))
		}
	}
	return out
}

// checkOracle reads the base table with LanceDB and compares it with what the API
// listed: the same ids, once each, with the same values.
func checkOracle(t *testing.T, path string, listed []rollout.Record) {
	t.Helper()
	rows, err := oracle.New(t).Read(path, oracle.ReadOptions{Columns: []string{"id", "rollout_id", "problem_id", "content", "sequence_order", "reward"}})
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		ID            string   `json:"id"`
		RolloutID     string   `json:"rollout_id"`
		ProblemID     string   `json:"problem_id"`
		Content       *string  `json:"content"`
		SequenceOrder int32    `json:"sequence_order"`
		Reward        *float64 `json:"reward"`
	}
	want := map[string]rollout.Record{}
	for _, r := range listed {
		want[r.ID] = r
	}
	seen := map[string]bool{}
	for _, line := range rows {
		var r row
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("oracle row %s: %v", line, err)
		}
		if seen[r.ID] {
			t.Fatalf("LanceDB reads id %s twice", r.ID)
		}
		seen[r.ID] = true
		w, ok := want[r.ID]
		if !ok {
			t.Fatalf("LanceDB reads id %s, which the API does not list", r.ID)
		}
		if r.RolloutID != w.RolloutID || r.ProblemID != w.ProblemID || r.SequenceOrder != w.SequenceOrder ||
			fmt.Sprint(deref(r.Content)) != fmt.Sprint(deref(w.Content)) || !sameReward(r.Reward, w.Reward) {
			t.Fatalf("LanceDB row %s differs from the API's %+v", line, w)
		}
	}
	if len(seen) != len(want) {
		t.Fatalf("LanceDB reads %d rows, the API lists %d", len(seen), len(want))
	}
}

func deref[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

func sameReward(a *float64, b *float32) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return float32(*a) == *b
}

// TestRoutesServed checks that the mux serves every route of the API document, and
// answers unknown paths and methods with the JSON envelope.
func TestRoutesServed(t *testing.T) {
	tw := newTestWorker(t, "", nil)
	tw.createStore("s")
	tw.appendJSON("s", true, rollout.AddRecord{ID: "x", RolloutID: "r", BinaryPayload: []byte("p")})
	tw.createGeneric("s", `{"columns":[{"name":"id","type":"string"}]}`, false)
	tw.appendRows("s", "?flush=true", `{"id":"x"}`)
	tw.dgCreate("s")
	tw.dgAppend("s", "", dgEvent("x", "x", 0, datagen.FieldSet, map[string]any{"value": map[string]any{"kind": "blob", "bytes": []byte("p"), "size": 1}})).
		want(t, http.StatusCreated, nil)
	for _, rt := range api.Routes() {
		if strings.HasPrefix(rt.Path, "/api/v1/contexts") {
			continue // TestContextRoutesServed
		}
		name := "s"
		if rt.Method == "DELETE" {
			name = "s2" // created by the POST before it
		}
		path := strings.NewReplacer("{name}", name, "{id}", "x", "{item_id}", "x", "{root_item_id}", "x", "{event_id}", "x").Replace(rt.Path)
		var body []byte
		ct := ""
		switch {
		case rt.Method == "POST" && rt.Path == "/api/v1/rollouts":
			body, ct = []byte(`{"name":"s2"}`), api.ContentTypeJSON
		case rt.Method == "POST" && strings.HasSuffix(rt.Path, "/records"):
			body, ct = jsonBody(t, []rollout.AddRecord{rec("y", "r")}), api.ContentTypeJSON
		case rt.Method == "POST" && rt.Path == "/api/v1/generic":
			body, ct = []byte(`{"name":"s2","schema":{"columns":[{"name":"id","type":"string"}]}}`), api.ContentTypeJSON
		case rt.Method == "POST" && rt.Path == "/api/v1/generic/{name}/rows":
			body, ct = []byte(`{"rows":[{"id":"y"}]}`), api.ContentTypeJSON
		case rt.Method == "POST" && rt.Path == "/api/v1/datagen":
			body, ct = []byte(`{"name":"s2"}`), api.ContentTypeJSON
		case rt.Method == "POST" && rt.Path == "/api/v1/datagen/{name}/events":
			body, ct = dgBody(dgEvent("y", "y", 0, datagen.ItemCreated, nil)), api.ContentTypeJSON
		case rt.Method == "POST" && rt.Path == "/api/v1/generic/{name}/batch-get":
			body, ct = []byte(`{"ids":["x"]}`), api.ContentTypeJSON
		}
		r := tw.do(rt.Method, path, ct, body)
		if r.status >= 300 {
			t.Errorf("%s %s: %s", rt.Method, path, r)
		}
	}
	tw.do("GET", "/api/v2/nothing", "", nil).wantError(t, http.StatusNotFound, api.CodeNotFound)
	tw.do("GET", "/", "", nil).wantError(t, http.StatusNotFound, api.CodeNotFound)
	r := tw.do("PATCH", "/api/v1/rollouts/s", "", nil)
	r.wantError(t, http.StatusMethodNotAllowed, api.CodeInvalidRequest)
	if allow := r.header.Get("Allow"); allow != "GET, DELETE, HEAD" {
		t.Fatalf("Allow: %q", allow)
	}
	tw.do("PUT", "/api/v1/internal/merge-wal/s", "", nil).wantError(t, http.StatusMethodNotAllowed, api.CodeInvalidRequest)
	tw.do("GET", "/api/v1/openapi.json", "", nil).want(t, http.StatusOK, &map[string]any{})

	// The datagen appends sealed generations of their own: merged, the headroom is full.
	tw.dgMerge("s")
	// Metrics carry the route template, never the store name.
	m := string(tw.do("GET", "/metrics", "", nil).body)
	for _, want := range []string{
		`http_requests_total{method="GET",route="/api/v1/rollouts/{name}/records/{id}/blob",status="200"} 1`,
		`http_requests_total{method="GET",route="unmatched",status="404"} 2`,
		`http_requests_total{method="PATCH",route="/api/v1/rollouts/{name}",status="405"} 1`,
		`http_request_duration_seconds_bucket{method="POST",route="/api/v1/rollouts/{name}/records",status="201",le="+Inf"} 2`,
		`worker_loop_last_success_timestamp_seconds{loop="merge"}`,
		`worker_loop_consecutive_failures{loop="seal"} 0`,
		`rollout_backpressure_headroom_generations 1024`,
		`rollout_stores_resident 3`,
		`rollout_wal_append_rows_total 6`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s (%s)", want, grepLines(m, want[:20]))
		}
	}
	if strings.Contains(m, `"/api/v1/rollouts/s`) {
		t.Errorf("a metric is labelled with a store name")
	}
}

func grepLines(m, prefix string) string {
	var out []string
	for _, l := range strings.Split(m, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "; ")
}
