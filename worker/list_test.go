package worker

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/rollout"
)

// list GETs the records route with the query q and decodes the answer.
func (tw *testWorker) list(name string, q url.Values) api.ListRecordsResponse[rollout.Record] {
	tw.t.Helper()
	var page api.ListRecordsResponse[rollout.Record]
	tw.do("GET", "/api/v1/rollouts/"+name+"/records?"+q.Encode(), "", nil).want(tw.t, http.StatusOK, &page)
	return page
}

// TestListReturnsEveryRowOrRefuses: without a limit the list answers every matching
// row (the reference's behaviour) up to ListMaxRows, counted before anything is sent,
// and past it a 400 that says what to do instead; never a silently truncated answer.
// It counts rows of every source: base, pending generations and unsealed rows.
func TestListReturnsEveryRowOrRefuses(t *testing.T) {
	const max = 150
	tw := newTestWorker(t, "", func(c *Config) { c.ListMaxRows = max })
	tw.createStore("big")
	var first []rollout.AddRecord
	for i := range 120 {
		first = append(first, rec(fmt.Sprintf("r-%03d", i), fmt.Sprintf("t%d", i%3)))
	}
	tw.appendJSON("big", true, first...) // a pending generation

	page := tw.list("big", nil)
	if len(page.Records) != 120 || page.HasMore || page.Limit != max || page.Offset != 0 {
		t.Fatalf("no limit: %d records, has_more %v, limit %d, offset %d; want all 120", len(page.Records), page.HasMore, page.Limit, page.Offset)
	}
	var more []rollout.AddRecord
	for i := 120; i < 160; i++ {
		more = append(more, rec(fmt.Sprintf("r-%03d", i), "t9"))
	}
	tw.appendJSON("big", true, more[:30]...)
	tw.appendJSON("big", false, more[30:]...) // unsealed: counted too

	e := tw.do("GET", "/api/v1/rollouts/big/records", "", nil).wantError(t, http.StatusBadRequest, api.CodeInvalidRequest)
	for _, want := range []string{"more than 150 rows", "limit and offset", "/api/v1/rollouts/{name}/arrow"} {
		if !strings.Contains(e.Message, want) {
			t.Errorf("over the bound: %q does not say %q", e.Message, want)
		}
	}
	// Fewer matching rows fit again: past an offset, or under a filter.
	if page := tw.list("big", url.Values{"offset": {"20"}}); len(page.Records) != 140 || page.HasMore {
		t.Fatalf("offset 20, no limit: %d records, has_more %v", len(page.Records), page.HasMore)
	}
	if page := tw.list("big", url.Values{"filters": {`{"rollout_id":"t9"}`}}); len(page.Records) != 40 || page.HasMore {
		t.Fatalf("filtered, no limit: %d records", len(page.Records))
	}
	// Paging works past the bound; a limit over it is refused.
	got := tw.listAll("big", "", 100)
	if len(got) != 160 {
		t.Fatalf("paged: %d records, want 160", len(got))
	}
	e = tw.do("GET", "/api/v1/rollouts/big/records?limit=151", "", nil).wantError(t, http.StatusBadRequest, api.CodeInvalidRequest)
	if !strings.Contains(e.Message, "limit=151") || !strings.Contains(e.Message, "(150 rows") {
		t.Fatalf("limit over the bound: %q", e.Message)
	}
	// After a merge the rows are in the base table only: still counted.
	tw.do("POST", "/api/v1/internal/merge-wal/big?flush=true", "", nil).want(t, http.StatusOK, nil)
	tw.do("GET", "/api/v1/rollouts/big/records", "", nil).wantError(t, http.StatusBadRequest, api.CodeInvalidRequest)
	if page := tw.list("big", url.Values{"offset": {"10"}}); len(page.Records) != 150 || page.HasMore {
		t.Fatalf("merged, offset 10: %d records", len(page.Records))
	}
}

// TestListFilters: the list takes the SQL filter of the Arrow route and of `lancectx
// dataset scan`, the reference's filters object, and both at once (ANDed); a bad
// filter is a 400 naming the problem; an unknown parameter is a 400 naming the
// accepted ones instead of an unfiltered answer.
func TestListFilters(t *testing.T) {
	tw := newTestWorker(t, "", nil)
	tw.createStore("f")
	var recs []rollout.AddRecord
	for i := range 30 {
		r := rec(fmt.Sprintf("s-%02d", i), fmt.Sprintf("traj%d", i%3))
		r.Reward = f32p(float32(i) / 4)
		if i%2 == 0 {
			r.Role = "user"
		}
		recs = append(recs, r)
	}
	tw.appendJSON("f", true, recs[:20]...)
	tw.appendJSON("f", false, recs[20:]...)

	want := func(keep func(i int) bool) []string {
		var out []string
		for i := range recs {
			if keep(i) {
				out = append(out, recs[i].ID)
			}
		}
		return out
	}
	cases := map[string]struct {
		q    url.Values
		want []string
	}{
		"a SQL filter": {url.Values{"filter": {"reward > 5.5"}},
			want(func(i int) bool { return float32(i)/4 > 5.5 })},
		"a SQL filter with AND and a string": {url.Values{"filter": {"rollout_id = 'traj1' AND reward <= 4"}},
			want(func(i int) bool { return i%3 == 1 && float32(i)/4 <= 4 })},
		"the filters object": {url.Values{"filters": {`{"rollout_id":"traj1"}`}},
			want(func(i int) bool { return i%3 == 1 })},
		"filter and filters together are ANDed": {url.Values{"filter": {"reward > 2 OR role = 'user'"}, "filters": {`{"rollout_id":"traj2"}`}},
			want(func(i int) bool { return i%3 == 2 && (float32(i)/4 > 2 || i%2 == 0) })},
		"a filter with a limit pages the filtered rows": {url.Values{"filter": {"role = 'user'"}, "limit": {"3"}, "offset": {"2"}},
			want(func(i int) bool { return i%2 == 0 })[2:5]},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			page := tw.list("f", tc.q)
			if got := sorted(ids(page.Records)); !slices.Equal(got, sorted(tc.want)) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
	for name, tc := range map[string]struct{ query, msg string }{
		"an unknown parameter":            {"rollout_id=traj1", `unknown query parameter "rollout_id": this route accepts limit, offset, filter, filters`},
		"a filter that does not parse":    {url.Values{"filter": {"reward >"}}.Encode(), "filter:"},
		"a filter on an unknown column":   {url.Values{"filter": {"rewards > 1"}}.Encode(), "filter:"},
		"a filter comparing text and int": {url.Values{"filter": {"reward = 'high'"}}.Encode(), "filter:"},
		"a filter given twice":            {"filter=reward%20%3E%201&filter=reward%20%3C%202", "given 2 times"},
	} {
		t.Run(name, func(t *testing.T) {
			e := tw.do("GET", "/api/v1/rollouts/f/records?"+tc.query, "", nil).wantError(t, http.StatusBadRequest, api.CodeInvalidRequest)
			if !strings.Contains(e.Message, tc.msg) {
				t.Fatalf("message %q does not contain %q", e.Message, tc.msg)
			}
		})
	}
}

// TestEveryRouteRefusesUnknownParameters: each worker route answers a query parameter
// it does not take with a 400 naming the ones it does, before doing anything.
func TestEveryRouteRefusesUnknownParameters(t *testing.T) {
	tw := newTestWorker(t, "", nil)
	tw.createStore("q")
	tw.appendJSON("q", true, rollout.AddRecord{ID: "b", RolloutID: "r", BinaryPayload: []byte("x")})
	accepts := map[string]string{
		"POST /api/v1/rollouts/{name}/records":       "this route accepts flush",
		"GET /api/v1/rollouts/{name}/records":        "this route accepts limit, offset, filter, filters",
		"GET /api/v1/rollouts/{name}/arrow":          "this route accepts columns, filter",
		"POST /api/v1/internal/merge-wal/{name}":     "this route accepts flush",
		"POST /api/v1/generic/{name}/rows":           "this route accepts flush",
		"GET /api/v1/generic/{name}/rows":            "this route accepts limit, offset, filter",
		"GET /api/v1/generic/{name}/rows/{id}":       "this route accepts columns",
		"POST /api/v1/generic/{name}/merge-wal":      "this route accepts flush",
		"POST /api/v1/datagen/{name}/events":         "this route accepts checkpoint",
		"GET /api/v1/datagen/{name}/items/{item_id}": "this route accepts load_blobs",
		"GET /api/v1/datagen/{name}/root-status":     "this route accepts ids",
	}
	for k, v := range contextAccepts {
		accepts[k] = v
	}
	body := map[string]string{
		"POST /api/v1/rollouts":                 `{"name":"new-store"}`,
		"POST /api/v1/rollouts/{name}/records":  `{"records":[{"id":"never","rollout_id":"r"}]}`,
		"POST /api/v1/generic":                  `{"name":"new-store","schema":{"columns":[{"name":"id","type":"string"}]}}`,
		"POST /api/v1/generic/{name}/rows":      `{"rows":[{"id":"never"}]}`,
		"POST /api/v1/generic/{name}/batch-get": `{"ids":["b"]}`,
	}
	routes := api.Routes()
	checked := 0
	for _, rt := range routes {
		if rt.Path == "/metrics" {
			continue // Prometheus scrapes may carry params of their own
		}
		key := rt.Method + " " + rt.Path
		t.Run(key, func(t *testing.T) {
			path := strings.NewReplacer("{name}", "q", "{id}", "b").Replace(rt.Path)
			var b []byte
			ct := ""
			if s, ok := body[key]; ok {
				b, ct = []byte(s), api.ContentTypeJSON
			}
			e := tw.do(rt.Method, path+"?bogus=1", ct, b).wantError(t, http.StatusBadRequest, api.CodeInvalidRequest)
			msg := accepts[key]
			if msg == "" {
				msg = "this route takes no query parameters"
			}
			if !strings.Contains(e.Message, `unknown query parameter "bogus"`) || !strings.Contains(e.Message, msg) {
				t.Fatalf("message %q, want it to name bogus and say %q", e.Message, msg)
			}
			checked++
		})
	}
	if checked < 12 {
		t.Fatalf("only %d routes checked", checked)
	}
	// Nothing happened: the store is there, with its one row; no store was created.
	var stores api.ListStoresResponse
	tw.do("GET", "/api/v1/rollouts", "", nil).want(t, http.StatusOK, &stores)
	if len(stores.Stores) != 1 || stores.Stores[0].Name != "q" {
		t.Fatalf("stores %+v", stores)
	}
	if got := ids(tw.listAll("q", "", 10)); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("rows %v", got)
	}
}

// TestRoutesAreTheDocumentedOnes: the routes the worker's handler registers are
// exactly api.Routes(), which TestOpenAPIListsEveryRouteAndNothingElse holds equal to
// the OpenAPI document: a route served but not documented, or documented but not
// served, fails here or there.
func TestRoutesAreTheDocumentedOnes(t *testing.T) {
	tw := newTestWorker(t, "", nil)
	key := func(r api.Route) string { return r.Method + " " + r.Path }
	var served, documented []string
	for _, r := range tw.srv.Routes() {
		served = append(served, key(r))
	}
	for _, r := range api.Routes() {
		documented = append(documented, key(r))
	}
	slices.Sort(served)
	slices.Sort(documented)
	if !slices.Equal(served, documented) {
		t.Fatalf("served:\n%s\ndocumented (api.Routes):\n%s", strings.Join(served, "\n"), strings.Join(documented, "\n"))
	}
}
