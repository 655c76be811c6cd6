package worker

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/generic"
	"github.com/lancectx/lancectx/internal/arrowjson"
	"github.com/lancectx/lancectx/internal/oracle"
	"github.com/lancectx/lancectx/wal"
)

// docsSchema declares one column of every type a generic store takes.
const docsSchema = `{"columns":[
 {"name":"id","type":"string","nullable":false},
 {"name":"title","type":"string"},
 {"name":"body","type":"string","large":true},
 {"name":"raw","type":"binary"},
 {"name":"image","type":"binary","blob":true},
 {"name":"ok","type":"bool"},
 {"name":"n32","type":"int32"},
 {"name":"n64","type":"int64","nullable":false},
 {"name":"f32","type":"float32"},
 {"name":"f64","type":"float64"},
 {"name":"at","type":"timestamp"},
 {"name":"meta","type":"json"},
 {"name":"tags","type":"list","item":"string"},
 {"name":"scores","type":"list","item":"float64"},
 {"name":"emb","type":"fixed_size_list","item":"float32","size":4}]}`

// genericRow is a row as the API returns it.
type genericRow map[string]json.RawMessage

func (r genericRow) id(t testing.TB) string {
	t.Helper()
	var s string
	if err := json.Unmarshal(r["id"], &s); err != nil {
		t.Fatalf("row without a string id: %v", r)
	}
	return s
}

func (tw *testWorker) createGeneric(name, schema string, sealOnAdd bool) api.GenericStoreInfo {
	tw.t.Helper()
	var info api.GenericStoreInfo
	body := fmt.Sprintf(`{"name":%q,"schema":%s,"seal_on_add":%t}`, name, schema, sealOnAdd)
	tw.do("POST", "/api/v1/generic", api.ContentTypeJSON, []byte(body)).want(tw.t, http.StatusCreated, &info)
	return info
}

func (tw *testWorker) appendRows(name, query string, rows ...string) api.GenericAppendResponse {
	tw.t.Helper()
	var out api.GenericAppendResponse
	tw.do("POST", "/api/v1/generic/"+name+"/rows"+query, api.ContentTypeJSON, []byte(`{"rows":[`+strings.Join(rows, ",")+`]}`)).
		want(tw.t, http.StatusCreated, &out)
	return out
}

// listRows pages through a generic store's rows.
func listRowsHTTP(t testing.TB, base, name, filter string, limit int) []genericRow {
	t.Helper()
	var out []genericRow
	for offset := 0; ; offset += limit {
		q := url.Values{"limit": {fmt.Sprint(limit)}, "offset": {fmt.Sprint(offset)}}
		if filter != "" {
			q.Set("filter", filter)
		}
		var page api.ListRowsResponse[genericRow]
		doHTTP(t, base, "GET", "/api/v1/generic/"+name+"/rows?"+q.Encode(), "", nil).want(t, http.StatusOK, &page)
		if page.Limit != limit || page.Offset != offset {
			t.Fatalf("page echoes limit %d offset %d, want %d %d", page.Limit, page.Offset, limit, offset)
		}
		out = append(out, page.Rows...)
		if !page.HasMore {
			return out
		}
	}
}

func rowIDs(t testing.TB, rows []genericRow) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.id(t)
	}
	return out
}

// TestGenericEndToEnd drives every generic route over real HTTP on a FileStore data
// directory: create (bad schemas refused before any I/O), append (bad rows refused,
// nothing written), visibility (unflushed, ?flush, seal_on_add), list, get, batch
// get, blob projection, flush, merge-wal, and LanceDB reading the merged table
// exactly as the API serves it.
func TestGenericEndToEnd(t *testing.T) {
	tw := newTestWorker(t, "", nil)

	// A bad schema leaves nothing behind.
	before := listing(t, tw.dir)
	for _, bad := range []string{
		`{"name":"docs","schema":{"columns":[{"name":"title","type":"string"}]}}`,
		`{"name":"docs","schema":{"columns":[{"name":"id","type":"string"},{"name":"_rowid","type":"int64"}]}}`,
		`{"name":"docs","schema":{"columns":[{"name":"id","type":"string","nullable":true}]}}`,
		`{"name":"docs","schema":{"columns":[{"name":"id","type":"string"},{"name":"v","type":"fixed_size_list","size":0}]}}`,
		`{"name":"docs","schema":{"columns":[{"name":"id","type":"string"}],"extra":1}}`,
		`{"name":"../x","schema":{"columns":[{"name":"id","type":"string"}]}}`,
	} {
		tw.do("POST", "/api/v1/generic", api.ContentTypeJSON, []byte(bad)).wantError(t, http.StatusBadRequest, api.CodeInvalidRequest)
	}
	if d := diffListing(before, listing(t, tw.dir)); d != "" {
		t.Fatalf("refused creates wrote %s", d)
	}

	info := tw.createGeneric("docs", docsSchema, false)
	if info.Name != "docs" || info.URI != "file://"+tw.dir+"/docs.generic.lance" || info.Version == 0 || info.SealOnAdd ||
		len(info.Schema.Columns) != 15 || info.Schema.Columns[4].Name != "image" || !info.Schema.Columns[4].Blob ||
		*info.Schema.Columns[1].Nullable != true || *info.Schema.Columns[7].Nullable != false {
		t.Fatalf("create answered %+v", info)
	}
	// The same name again: 409, naming how the schema differs when it does.
	e := tw.do("POST", "/api/v1/generic", api.ContentTypeJSON,
		[]byte(`{"name":"docs","schema":`+strings.Replace(docsSchema, `"size":4`, `"size":8`, 1)+`}`)).
		wantError(t, http.StatusConflict, api.CodeAlreadyExists)
	if !strings.Contains(e.Message, "different schema") || !strings.Contains(e.Message, `"emb"`) {
		t.Fatalf("re-create with another schema: %s", e.Message)
	}
	tw.do("POST", "/api/v1/generic", api.ContentTypeJSON, []byte(`{"name":"docs","schema":`+docsSchema+`}`)).
		wantError(t, http.StatusConflict, api.CodeAlreadyExists)
	// A rollout store may share the name: kinds have their own namespaces.
	tw.createStore("docs")

	rows := []string{
		`{"id":"d1","title":"first","body":"long text","raw":[0,1,2,255],"image":"iVBORw0=","ok":true,"n32":-5,"n64":9007199254740993,` +
			`"f32":0.25,"f64":1e-300,"at":"2024-02-03T04:05:06.789012Z","meta":{"k":[1,"x",null]},"tags":["a","b"],"scores":[0.5,null],` +
			`"emb":[0.1,0.2,0.3,0.4]}`,
		`{"id":"d2","n64":2,"raw":"AAEC","at":1700000000123456,"meta":"just a string","tags":[]}`,
		`{"id":"d3","n64":3,"title":"third","ok":false}`,
	}
	// Bad rows: a 400 that writes nothing (no WAL entry, no shard claim).
	before = listing(t, tw.dir)
	for _, bad := range []string{
		`{"rows":[{"id":"x","n64":1,"undeclared":1}]}`,
		`{"rows":[{"id":"x"}]}`,
		`{"rows":[{"id":"x","n64":"1"}]}`,
		`{"rows":[{"id":"x","n64":1,"emb":[1,2,3]}]}`,
		`{"rows":[]}`,
		`{"records":[{"id":"x","n64":1}]}`,
		`{"rows":[{"id":"ok","n64":1},{"id":"x","n64":1,"raw":"%%%"}]}`,
	} {
		tw.do("POST", "/api/v1/generic/docs/rows", api.ContentTypeJSON, []byte(bad)).wantError(t, http.StatusBadRequest, api.CodeInvalidRequest)
	}
	if d := writtenSince(before, listing(t, tw.dir)); d != "" {
		t.Fatalf("refused appends wrote %s", d)
	}

	ar := tw.appendRows("docs", "", rows[0], rows[1])
	if ar.Count != 2 || !ar.Durable || ar.Visible {
		t.Fatalf("append answered %+v", ar)
	}
	// Unsealed rows: this worker reads them, another worker does not yet.
	other := newTestWorker(t, tw.dir, func(c *Config) { c.WorkerID = "other-worker" })
	tw.do("GET", "/api/v1/generic/docs/rows/d1", "", nil).want(t, http.StatusOK, nil)
	other.do("GET", "/api/v1/generic/docs/rows/d1", "", nil).wantError(t, http.StatusNotFound, api.CodeNotFound)
	if ar := tw.appendRows("docs", "?flush=true", rows[2]); !ar.Visible {
		t.Fatalf("?flush=true append answered %+v", ar)
	}
	if got := rowIDs(t, listRowsHTTP(t, other.url, "docs", "", 10)); !slices.Equal(sorted(got), []string{"d1", "d2", "d3"}) {
		t.Fatalf("after ?flush=true another worker lists %v", got)
	}

	// seal_on_add: every append is visible to every reader when acknowledged.
	tw.createGeneric("feed", `{"columns":[{"name":"id","type":"string"},{"name":"v","type":"int64"}]}`, true)
	var feed api.GenericStoreInfo
	other.do("GET", "/api/v1/generic/feed", "", nil).want(t, http.StatusOK, &feed)
	if !feed.SealOnAdd {
		t.Fatalf("seal_on_add is not persisted: %+v", feed)
	}
	if ar := tw.appendRows("feed", "", `{"id":"e1","v":1}`); !ar.Visible {
		t.Fatalf("seal_on_add append answered %+v", ar)
	}
	other.do("GET", "/api/v1/generic/feed/rows/e1", "", nil).want(t, http.StatusOK, nil)
	other.close()

	// Reads: list (blob left out), filter, paging, get with columns, batch get.
	all := listRowsHTTP(t, tw.url, "docs", "", 100)
	if len(all) != 3 {
		t.Fatalf("list: %d rows", len(all))
	}
	for _, r := range all {
		if _, ok := r["image"]; ok {
			t.Fatalf("the list returns the blob column: %v", r)
		}
	}
	if got := rowIDs(t, listRowsHTTP(t, tw.url, "docs", "", 1)); !slices.Equal(got, rowIDs(t, all)) {
		t.Fatalf("paged list %v, unpaged %v", got, rowIDs(t, all))
	}
	if got := rowIDs(t, listRowsHTTP(t, tw.url, "docs", "n64 >= 2 AND (ok IS NULL OR ok = false)", 100)); !slices.Equal(sorted(got), []string{"d2", "d3"}) {
		t.Fatalf("filtered list: %v", got)
	}
	tw.do("GET", "/api/v1/generic/docs/rows?filter=nope+%3D+1", "", nil).wantError(t, http.StatusBadRequest, api.CodeInvalidRequest)
	tw.do("GET", "/api/v1/generic/docs/rows?filters=%7B%7D", "", nil).wantError(t, http.StatusBadRequest, api.CodeInvalidRequest)
	var d1 genericRow
	tw.do("GET", "/api/v1/generic/docs/rows/d1", "", nil).want(t, http.StatusOK, &d1)
	want := map[string]string{"id": `"d1"`, "raw": `"AAEC/w=="`, "n64": "9007199254740993", "f32": "0.25", "at": `"2024-02-03T04:05:06.789012Z"`,
		"meta": `{"k":[1,"x",null]}`, "tags": `["a","b"]`, "scores": `[0.5,null]`, "emb": `[0.1,0.2,0.3,0.4]`, "n32": "-5", "ok": "true"}
	for k, v := range want {
		if string(d1[k]) != v {
			t.Fatalf("get d1: %s = %s, want %s (row %v)", k, d1[k], v, d1)
		}
	}
	if _, ok := d1["image"]; ok {
		t.Fatal("get returns the blob column by default")
	}
	var img genericRow
	tw.do("GET", "/api/v1/generic/docs/rows/d1?columns=image,title", "", nil).want(t, http.StatusOK, &img)
	if len(img) != 3 || string(img["image"]) != `"iVBORw0="` || string(img["title"]) != `"first"` || string(img["id"]) != `"d1"` {
		t.Fatalf("get with columns: %v", img)
	}
	tw.do("GET", "/api/v1/generic/docs/rows/nope", "", nil).wantError(t, http.StatusNotFound, api.CodeNotFound)
	tw.do("GET", "/api/v1/generic/docs/rows/d1?columns=nope", "", nil).wantError(t, http.StatusBadRequest, api.CodeInvalidRequest)
	var batch api.GetRowsResponse[genericRow]
	tw.do("POST", "/api/v1/generic/docs/batch-get", api.ContentTypeJSON, []byte(`{"ids":["d3","nope","d1","d3"],"columns":["n64"]}`)).
		want(t, http.StatusOK, &batch)
	if got := rowIDs(t, batch.Rows); !slices.Equal(got, []string{"d3", "d1"}) || len(batch.Rows[0]) != 2 {
		t.Fatalf("batch get: %v", batch.Rows)
	}
	many := `{"ids":[` + strings.Repeat(`"x",`, api.MaxBatchGetIDs) + `"x"]}`
	tw.do("POST", "/api/v1/generic/docs/batch-get", api.ContentTypeJSON, []byte(many)).wantError(t, http.StatusBadRequest, api.CodeInvalidRequest)

	// A retried id: the newest row wins, one row per id.
	tw.appendRows("docs", "", `{"id":"d3","n64":33,"title":"third again"}`)
	tw.do("POST", "/api/v1/generic/docs/flush", "", nil).want(t, http.StatusNoContent, nil)
	var mw api.MergeWALResponse
	tw.do("POST", "/api/v1/generic/docs/merge-wal", "", nil).want(t, http.StatusOK, &mw)
	if mw.Reclaimed != 2 || mw.Pending != 0 || mw.Version <= info.Version {
		t.Fatalf("merge-wal answered %+v", mw)
	}
	if rep, err := wal.Audit(t.Context(), tw.srv.datasetStore(tw.srv.generics, "docs"), "id"); err != nil ||
		rep.Duplicates != 0 || rep.Pending.Generations != 0 || rep.BaseRows != 3 {
		t.Fatalf("audit %+v %v", rep, err)
	}
	var full api.GetRowsResponse[json.RawMessage]
	tw.do("POST", "/api/v1/generic/docs/batch-get", api.ContentTypeJSON,
		[]byte(`{"ids":["d1","d2","d3"],"columns":["id","title","body","raw","image","ok","n32","n64","f32","f64","at","meta","tags","scores","emb"]}`)).
		want(t, http.StatusOK, &full)
	checkGenericOracle(t, filepath.Join(tw.dir, "docs.generic.lance"), docsSchema, full.Rows)

	var stores api.ListStoresResponse
	tw.do("GET", "/api/v1/generic", "", nil).want(t, http.StatusOK, &stores)
	if len(stores.Stores) != 2 || stores.Stores[0].Name != "docs" || stores.Stores[1].Name != "feed" {
		t.Fatalf("generic stores: %+v", stores)
	}
	tw.do("DELETE", "/api/v1/generic/docs", "", nil).want(t, http.StatusNoContent, nil)
	tw.do("GET", "/api/v1/generic/docs", "", nil).wantError(t, http.StatusNotFound, api.CodeNotFound)
	tw.do("GET", "/api/v1/generic/docs/rows", "", nil).wantError(t, http.StatusNotFound, api.CodeNotFound)
	tw.do("GET", "/api/v1/rollouts/docs", "", nil).want(t, http.StatusOK, nil) // the rollout store of the name stays
}

// checkGenericOracle reads the table with LanceDB and checks it holds exactly the
// rows the API served (decoded back through the store's spec, so every value is
// compared in the canonical form both sides print).
func checkGenericOracle(t *testing.T, path, schema string, served []json.RawMessage) {
	t.Helper()
	var ws api.GenericSchema
	if err := json.Unmarshal([]byte(schema), &ws); err != nil {
		t.Fatal(err)
	}
	sp, err := generic.Parse(ws)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"rows": served})
	rec, err := generic.DecodeRows(body, sp, nil, generic.DecodeOptions{})
	if err != nil {
		t.Fatalf("the API's rows do not decode as input: %v", err)
	}
	defer rec.Release()
	want, err := arrowjson.Rows(rec)
	if err != nil {
		t.Fatal(err)
	}
	got, err := oracle.New(t).Read(path, oracle.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(want)
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Fatalf("LanceDB reads\n%s\nthe API serves\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestGenericRouteTable walks the reference's route table for generic stores
// (worker.md §5, plus this worker's batch get) in order, over real HTTP: every route
// is in api.Routes() and answers its documented status with its documented shape.
func TestGenericRouteTable(t *testing.T) {
	tw := newTestWorker(t, "", nil)
	schema := `{"columns":[{"name":"id","type":"string"},{"name":"v","type":"int64"},{"name":"b","type":"binary","blob":true}]}`
	table := []struct {
		method, path, body string
		status             int
		// fields the JSON answer must have (none for 204).
		fields []string
	}{
		{"POST", "/api/v1/generic", `{"name":"walk","schema":` + schema + `}`, 201, []string{"name", "uri", "version", "schema"}},
		{"GET", "/api/v1/generic", "", 200, []string{"stores"}},
		{"GET", "/api/v1/generic/walk", "", 200, []string{"name", "uri", "version", "schema"}},
		{"POST", "/api/v1/generic/walk/rows", `{"rows":[{"id":"a","v":1,"b":[1,2,3]},{"id":"b","v":2}]}`, 201, []string{"version", "count"}},
		{"POST", "/api/v1/generic/walk/flush", "", 204, nil},
		{"GET", "/api/v1/generic/walk/rows?limit=10&offset=0&filter=v%20%3E%200", "", 200, []string{"rows"}},
		{"GET", "/api/v1/generic/walk/rows/a?columns=v,b", "", 200, []string{"id", "v", "b"}},
		{"POST", "/api/v1/generic/walk/batch-get", `{"ids":["b","a"]}`, 200, []string{"rows"}},
		{"POST", "/api/v1/generic/walk/merge-wal", "", 200, []string{"reclaimed"}},
		{"DELETE", "/api/v1/generic/walk", "", 204, nil},
	}
	served := map[string]bool{}
	for _, r := range api.Routes() {
		served[r.Method+" "+r.Path] = true
	}
	walked := map[string]bool{}
	for _, step := range table {
		ct := ""
		if step.body != "" {
			ct = api.ContentTypeJSON
		}
		r := tw.do(step.method, step.path, ct, []byte(step.body))
		if r.status != step.status {
			t.Fatalf("%s %s: %s, want %d", step.method, step.path, r, step.status)
		}
		if step.fields != nil {
			var doc map[string]json.RawMessage
			if err := json.Unmarshal(r.body, &doc); err != nil {
				t.Fatalf("%s %s: %v: %s", step.method, step.path, err, r.body)
			}
			for _, f := range step.fields {
				if _, ok := doc[f]; !ok {
					t.Fatalf("%s %s: the answer has no %q: %s", step.method, step.path, f, r.body)
				}
			}
		}
		tmpl, _, _ := strings.Cut(step.path, "?")
		tmpl = strings.Replace(strings.Replace(tmpl, "/walk", "/{name}", 1), "/rows/a", "/rows/{id}", 1)
		if !served[step.method+" "+tmpl] {
			t.Fatalf("%s %s is not in api.Routes()", step.method, tmpl)
		}
		walked[step.method+" "+tmpl] = true
	}
	for k := range served {
		if strings.Contains(k, "/api/v1/generic") && !walked[k] {
			t.Fatalf("api.Routes() has %s, which the walk does not cover", k)
		}
	}
}

// TestGenericDatasetTools: the `lancectx dataset` tools work on a generic store's
// table (inspect, versions, scan, compact, cleanup), and the store still opens with
// its declared schema afterwards (compaction keeps the persisted spec).
func TestGenericDatasetTools(t *testing.T) {
	bin := lancectxBinary(t)
	tw := newTestWorker(t, "", nil)
	tw.createGeneric("tools", `{"columns":[{"name":"id","type":"string"},{"name":"v","type":"int64"},{"name":"e","type":"fixed_size_list","size":2}]}`, false)
	for i := range 3 {
		tw.appendRows("tools", "?flush=true", fmt.Sprintf(`{"id":"r%d","v":%d,"e":[1,%d]}`, i, i, i))
		tw.do("POST", "/api/v1/generic/tools/merge-wal", "", nil).want(t, http.StatusOK, nil)
	}
	path := filepath.Join(tw.dir, "tools.generic.lance")
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, append([]string{"dataset"}, append(args, path)...)...).Output()
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				t.Fatalf("lancectx dataset %v: %v\n%s", args, err, ee.Stderr)
			}
			t.Fatalf("lancectx dataset %v: %v", args, err)
		}
		return string(out)
	}
	var info struct {
		Rows      int64             `json:"rows"`
		Fragments []json.RawMessage `json:"fragments"`
	}
	if err := json.Unmarshal([]byte(run("inspect")), &info); err != nil || info.Rows != 3 || len(info.Fragments) != 3 {
		t.Fatalf("inspect: %+v %v", info, err)
	}
	run("versions")
	if lines := strings.Split(strings.TrimSpace(run("scan")), "\n"); len(lines) != 3 {
		t.Fatalf("scan printed %d rows", len(lines))
	}
	run("compact")
	run("cleanup", "--older-than", "0s", "--delete-unverified")
	if err := json.Unmarshal([]byte(run("inspect")), &info); err != nil || info.Rows != 3 || len(info.Fragments) != 1 {
		t.Fatalf("inspect after compact: %+v %v", info, err)
	}
	// A fresh worker opens the compacted table with its spec and serves its rows.
	fresh := newTestWorker(t, tw.dir, func(c *Config) { c.WorkerID = "fresh" })
	if got := rowIDs(t, listRowsHTTP(t, fresh.url, "tools", "", 10)); !slices.Equal(sorted(got), []string{"r0", "r1", "r2"}) {
		t.Fatalf("after compaction the store lists %v", got)
	}
	fresh.appendRows("tools", "?flush=true", `{"id":"r3","v":3,"e":[0,0]}`)
	var desc api.GenericStoreInfo
	fresh.do("GET", "/api/v1/generic/tools", "", nil).want(t, http.StatusOK, &desc)
	if len(desc.Schema.Columns) != 3 || desc.Schema.Columns[2].Size != 2 {
		t.Fatalf("describe after compaction: %+v", desc)
	}
}
