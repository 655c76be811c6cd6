package master

import (
	"encoding/json"
	"fmt"
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
