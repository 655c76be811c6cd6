package master

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/objstore"
)

// TestQueryExperiment: POST /api/v1/experiments/{name}/query runs read-only SQL over a
// store's base table and pending WAL generations together (rows the worker sealed are
// there before any merge), for rollout and generic stores; bad SQL, writes and escapes
// are 400s, an unknown store a 404, and nothing the statements try changes the store.
func TestQueryExperiment(t *testing.T) {
	dir := t.TempDir()
	data, err := objstore.NewFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	wurl := kindsWorker(t, dir, data)
	post(t, wurl+"/api/v1/rollouts", `{"name":"q"}`, http.StatusCreated)
	for g := range 3 {
		var recs []string
		for i := range 4 {
			recs = append(recs, fmt.Sprintf(`{"id":"r-%d-%d","rollout_id":"ro-%d","sequence_order":%d,"reward":%d.5,"content":"step %d"}`, g, i, i%2, i, g, i))
		}
		post(t, wurl+"/api/v1/rollouts/q/records?flush=true", `{"records":[`+strings.Join(recs, ",")+`]}`, http.StatusCreated)
	}
	// A retried id with a newer value: the newest row per key is what SQL sees.
	post(t, wurl+"/api/v1/rollouts/q/records?flush=true", `{"records":[{"id":"r-0-0","rollout_id":"ro-0","sequence_order":0,"reward":9.5}]}`, http.StatusCreated)
	post(t, wurl+"/api/v1/generic", `{"name":"q","schema":`+genericDocs+`}`, http.StatusCreated)
	post(t, wurl+"/api/v1/generic/q/rows?flush=true", `{"rows":[{"id":"a","n":1,"title":"x"},{"id":"b","n":2,"title":"y"}]}`, http.StatusCreated)

	c := newCluster(t, data)
	m := c.start(fastSettings(), func(cfg *Config) { cfg.DataURI = "file://" + dir })
	url := m.srv.URL + "/api/v1/experiments/q/query"
	ask := func(u, sql string) (int, api.QueryResponse, api.ErrorResponse) {
		t.Helper()
		b, _ := json.Marshal(map[string]string{"sql": sql})
		var raw json.RawMessage
		var res api.QueryResponse
		var e api.ErrorResponse
		st := httpJSON(t, "POST", u, string(b), &raw)
		if st == http.StatusOK {
			err = json.Unmarshal(raw, &res)
		} else {
			err = json.Unmarshal(raw, &e)
		}
		if err != nil {
			t.Fatalf("%q: %d %s: %v", sql, st, raw, err)
		}
		return st, res, e
	}

	st, res, e := ask(url, `SELECT rollout_id, count(*) AS n, max(reward) AS best FROM records GROUP BY rollout_id ORDER BY rollout_id`)
	if st != 200 || fmt.Sprint(res.Rows) != "[[ro-0 6 9.5] [ro-1 6 2.5]]" || res.RowCount != 2 || res.Truncated ||
		strings.Join(res.Columns, ",") != "rollout_id,n,best" {
		t.Fatalf("rollout query: %d %+v %+v", st, res, e)
	}
	if st, res, e = ask(url, `SELECT id FROM records ORDER BY id LIMIT 3`); st != 200 || fmt.Sprint(res.Rows) != "[[r-0-0] [r-0-1] [r-0-2]]" {
		t.Fatalf("rollout ids: %d %+v %+v", st, res, e)
	}
	if st, res, e = ask(url+"?kind=generic", `SELECT sum(n) AS total, string_agg(title, '' ORDER BY id) AS titles FROM records`); st != 200 ||
		fmt.Sprint(res.Rows) != "[[3 xy]]" {
		t.Fatalf("generic query: %d %+v %+v", st, res, e)
	}
	// The blob column is not in the table.
	if st, _, e = ask(url, `SELECT binary_payload FROM records`); st != 400 || !strings.Contains(e.Error.Message, "binary_payload") {
		t.Fatalf("blob column: %d %+v", st, e)
	}
	for _, sql := range []string{``, `SELEC 1`, `DELETE FROM records`, `DROP TABLE records; SELECT 1`, `COPY records TO '` + dir + `/x.csv'`,
		`SELECT * FROM read_csv('` + dir + `/_registry')`, `INSTALL httpfs`, `SET enable_external_access = true`} {
		if st, _, e = ask(url, sql); st != 400 || e.Error.Code != api.CodeInvalidRequest {
			t.Errorf("%q: %d %+v, want a 400", sql, st, e)
		}
	}
	if st, _, e = ask(m.srv.URL+"/api/v1/experiments/nope/query", `SELECT 1`); st != 404 {
		t.Fatalf("unknown experiment: %d %+v", st, e)
	}
	if st, _, e = ask(url+"?kind=datagen", `SELECT 1`); st != 404 {
		t.Fatalf("no datagen store q: %d %+v", st, e)
	}
	var env api.ErrorResponse
	if st := httpJSON(t, "POST", url, `{"sql":"SELECT 1","extra":1}`, &env); st != 400 {
		t.Fatalf("unknown body field: %d %+v", st, env)
	}
	// Nothing changed: the same answer as before the refused statements.
	if st, res, e = ask(url, `SELECT count(*) FROM records`); st != 200 || fmt.Sprint(res.Rows) != "[[12]]" {
		t.Fatalf("after the refusals: %d %+v %+v", st, res, e)
	}
}

// TestExperimentRecords: the records routes read a rollout store from storage: the
// base table (source=fragments), the sealed WAL generations (wal) or both (all),
// paged with the reference's clamped limit and filtered; one record by id, and its
// payload as a download named and typed from the record.
func TestExperimentRecords(t *testing.T) {
	dir := t.TempDir()
	data, err := objstore.NewFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	wurl := kindsWorker(t, dir, data)
	post(t, wurl+"/api/v1/rollouts", `{"name":"rec"}`, http.StatusCreated)
	for g := range 3 {
		var recs []string
		for i := range 4 {
			recs = append(recs, fmt.Sprintf(`{"id":"r-%d-%d","rollout_id":"ro-%d","sequence_order":%d,"reward":%d.5}`, g, i, i%2, i, g))
		}
		post(t, wurl+"/api/v1/rollouts/rec/records?flush=true", `{"records":[`+strings.Join(recs, ",")+`]}`, http.StatusCreated)
	}
	payload := []byte("\x89PNG not really")
	b, _ := json.Marshal(map[string]any{"records": []map[string]any{{"id": "r-0-0", "rollout_id": "ro-0", "reward": 9.5,
		"content_type": "image/png", "user_metadata": `{"filename":"a b/../c.png"}`, "binary_payload": payload}}})
	post(t, wurl+"/api/v1/rollouts/rec/records?flush=true", string(b), http.StatusCreated)
	post(t, wurl+"/api/v1/generic", `{"name":"rec","schema":`+genericDocs+`}`, http.StatusCreated)

	c := newCluster(t, data)
	set := fastSettings()
	set.MergeWALInterval, set.CompactionInterval, set.CleanupInterval = 0, 0, 0 // this test merges
	m := c.start(set, func(cfg *Config) { cfg.DataURI = "file://" + dir })
	base := m.srv.URL + "/api/v1/experiments/rec/records"
	list := func(query string) api.ExperimentRecordsResponse[map[string]any] {
		t.Helper()
		var out api.ExperimentRecordsResponse[map[string]any]
		if st := httpJSON(t, "GET", base+query, "", &out); st != 200 {
			t.Fatalf("GET records%s: %d", query, st)
		}
		return out
	}
	ids := func(res api.ExperimentRecordsResponse[map[string]any]) string {
		var out []string
		for _, r := range res.Records {
			out = append(out, fmt.Sprint(r["id"]))
			if _, ok := r["binary_payload"]; ok {
				t.Fatalf("a listed record carries its payload: %v", r)
			}
		}
		return strings.Join(out, ",")
	}
	if res := list(""); len(res.Records) != 0 || res.Source != "fragments" || res.Limit != 25 || res.HasMore {
		t.Fatalf("fragments before any merge: %+v", res)
	}
	if res := list("?source=wal"); len(res.Records) != 12 || res.Source != "wal" || res.HasMore {
		t.Fatalf("wal: %+v", res)
	}
	if res := list("?source=all&limit=5&offset=10"); ids(res) != "r-2-3,r-0-0" || res.HasMore || res.Limit != 5 || res.Offset != 10 {
		t.Fatalf("all, last page: %s %+v", ids(res), res)
	}
	if res := list("?source=all&limit=5"); len(res.Records) != 5 || !res.HasMore {
		t.Fatalf("all, first page: %+v", res)
	}
	if res := list("?source=all&limit=500"); res.Limit != 100 || len(res.Records) != 12 {
		t.Fatalf("limit 500 is clamped to 100: %+v", res)
	}
	if res := list("?source=all&limit=0"); res.Limit != 1 || len(res.Records) != 1 || !res.HasMore {
		t.Fatalf("limit 0 is clamped to 1: %+v", res)
	}
	if res := list("?source=all&rollout_id=ro-1&filter=reward%20%3E%201"); ids(res) != "r-1-1,r-1-3,r-2-1,r-2-3" {
		t.Fatalf("filters: %s", ids(res))
	}
	var e api.ErrorResponse
	for _, q := range []string{"?source=disk", "?filter=nope%20%3D%201", "?filter=(", "?include_in_training=maybe", "?kind=generic", "?offset=-1"} {
		if st := httpJSON(t, "GET", base+q, "", &e); st != 400 {
			t.Errorf("GET records%s: %d %+v, want a 400", q, st, e)
		}
	}

	// After a merge the rows are in the fragments, the newest version of r-0-0 once.
	post(t, wurl+"/api/v1/internal/merge-wal/rec?flush=true", ``, http.StatusOK)
	if res := list("?limit=100"); len(res.Records) != 12 {
		t.Fatalf("fragments after the merge: %+v", res)
	}
	if res := list("?source=wal"); len(res.Records) != 0 {
		t.Fatalf("wal after the merge: %+v", res)
	}
	var one api.GetRecordResponse[map[string]any]
	if st := httpJSON(t, "GET", base+"/r-0-0", "", &one); st != 200 || one.Record["reward"] != 9.5 || one.Record["binary_payload"] != nil {
		t.Fatalf("record r-0-0: %d %+v", st, one)
	}
	if st := httpJSON(t, "GET", base+"/nope", "", &e); st != 404 {
		t.Fatalf("an unknown record: %d %+v", st, e)
	}
	resp, err := http.Get(base + "/r-0-0/blob")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(got) != string(payload) || resp.Header.Get("Content-Type") != "image/png" ||
		resp.Header.Get("Content-Disposition") != `attachment; filename=a_b_.._c.png` {
		t.Fatalf("blob: %d %q %v", resp.StatusCode, got, resp.Header)
	}
	if st := httpJSON(t, "GET", base+"/r-0-1/blob", "", &e); st != 404 {
		t.Fatalf("a record without a payload: %d %+v", st, e)
	}
}
