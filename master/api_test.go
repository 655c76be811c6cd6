package master

import (
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/coord"
	"github.com/lancectx/lancectx/objstore"
)

// quietSettings run no loop and no executor: every task a test enqueues stays queued.
func quietSettings() Settings {
	set := fastSettings()
	set.StatsScanInterval, set.StatsRefreshInterval, set.MergeWALInterval = 0, 0, 0
	set.CompactionInterval, set.CleanupInterval, set.StatsMaintenanceEveryNScans, set.TaskConcurrency = 0, 0, 0, 0
	return set
}

// rawJSON decodes a JSON object answer into its keys.
func rawJSON(t *testing.T, method, url, body string) (int, map[string]json.RawMessage) {
	t.Helper()
	var doc map[string]json.RawMessage
	st := httpJSON(t, method, url, body, &doc)
	return st, doc
}

// TestTasksAnswerOneShape: POST /api/v1/tasks answers one task record for every kind,
// optimize included (the chain's last task, with the chain's ids), and the
// experiment's optimize route answers the same; the record carries the reference's
// unix-millisecond times beside RFC 3339 ones and its timeout in seconds.
func TestTasksAnswerOneShape(t *testing.T) {
	data := objstore.NewMem()
	createExperiment(t, data, "exp", 1, 5)
	c := newCluster(t, data)
	m := c.start(quietSettings(), nil)
	base := m.srv.URL
	before := time.Now().UnixMilli()

	wantKeys := []string{"attempts", "enqueued_at", "enqueued_time", "id", "kind", "max_attempts", "payload", "state", "target", "timeout_secs"}
	check := func(what string, st int, doc map[string]json.RawMessage, kind string, chain bool) api.Task {
		t.Helper()
		if st != http.StatusAccepted && st != http.StatusOK {
			t.Fatalf("%s: status %d: %s", what, st, doc)
		}
		var keys []string
		for k := range doc {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		want := slices.Clone(wantKeys)
		if chain {
			want = append(want, "chain", "depends_on", "waiting")
		}
		slices.Sort(want)
		for _, k := range want {
			if !slices.Contains(keys, k) {
				t.Errorf("%s: no %q in %v", what, k, keys)
			}
		}
		for _, gone := range []string{"timeout", "created_at", "tasks"} {
			if _, ok := doc[gone]; ok {
				t.Errorf("%s: old field %q still there", what, gone)
			}
		}
		b, _ := json.Marshal(doc)
		var tk api.Task
		if err := json.Unmarshal(b, &tk); err != nil {
			t.Fatal(err)
		}
		if tk.Kind != kind || tk.State != "queued" || tk.TimeoutSecs <= 0 || tk.StartedAt != nil || tk.FinishedAt != nil {
			t.Errorf("%s: %+v", what, tk)
		}
		if tk.EnqueuedAt < before || tk.EnqueuedAt > time.Now().UnixMilli() || tk.EnqueuedTime.UnixMilli() != tk.EnqueuedAt {
			t.Errorf("%s: enqueued_at %d, enqueued_time %s (test started at %d)", what, tk.EnqueuedAt, tk.EnqueuedTime, before)
		}
		return tk
	}

	st, doc := rawJSON(t, "POST", base+"/api/v1/tasks", `{"kind":"compact","target":"exp"}`)
	compact := check("compact", st, doc, KindCompact, false)
	if compact.TimeoutSecs != m.taskTimeout(KindCompact).Seconds() {
		t.Errorf("timeout_secs %v, want %v", compact.TimeoutSecs, m.taskTimeout(KindCompact).Seconds())
	}
	st, doc = rawJSON(t, "POST", base+"/api/v1/tasks", `{"kind":"stats_maintenance"}`)
	check("stats_maintenance", st, doc, KindStatsMaintenance, false)
	st, doc = rawJSON(t, "POST", base+"/api/v1/tasks", `{"kind":"optimize","target":"exp"}`)
	opt := check("optimize task", st, doc, KindCleanup, true)
	st, doc = rawJSON(t, "POST", base+"/api/v1/experiments/exp/optimize", "")
	opt2 := check("optimize route", st, doc, KindCleanup, true)
	for _, o := range []api.Task{opt, opt2} {
		if len(o.Chain) != 3 || o.Chain[2] != o.ID || o.DependsOn[0] != o.Chain[1] {
			t.Fatalf("optimize chain %+v", o)
		}
	}
	// The chain's tasks read back in order, each the same shape, without a chain.
	kinds := []string{KindMergeWAL, KindCompact, KindCleanup}
	for i, id := range opt.Chain {
		st, doc := rawJSON(t, "GET", base+"/api/v1/tasks/"+id, "")
		tk := check("chain task", st, doc, kinds[i], false)
		if tk.Chain != nil || (i > 0 && tk.DependsOn[0] != opt.Chain[i-1]) {
			t.Fatalf("chain task %d: %+v", i, tk)
		}
	}
	var list api.TaskListResponse
	if st := httpJSON(t, "GET", base+"/api/v1/tasks?kind=compact", "", &list); st != 200 || list.Total == 0 {
		t.Fatalf("list: %d %+v", st, list)
	}
	for _, tk := range list.Tasks {
		if tk.Kind != KindCompact || tk.EnqueuedAt == 0 || tk.TimeoutSecs <= 0 {
			t.Fatalf("listed %+v", tk)
		}
	}
}

// TestUnknownDependencyIsNamed: a depends_on id that names no task is refused with a
// message that says which id and what is wrong with it; one that is not a task id at
// all says so; nothing is enqueued.
func TestUnknownDependencyIsNamed(t *testing.T) {
	data := objstore.NewMem()
	createExperiment(t, data, "exp", 1, 5)
	c := newCluster(t, data)
	m := c.start(quietSettings(), nil)
	base := m.srv.URL
	const ghost = "0190a0a0-0000-7000-8000-000000000001"
	for _, tc := range []struct {
		body   string
		status int
		msg    []string
	}{
		{`{"kind":"compact","target":"exp","depends_on":["` + ghost + `"]}`, 404,
			[]string{"depends_on", ghost, "does not exist"}},
		{`{"kind":"compact","target":"exp","depends_on":["not-a-task"]}`, 400,
			[]string{"depends_on[0]", `"not-a-task"`, "is not a task id"}},
	} {
		var env api.ErrorResponse
		if st := httpJSON(t, "POST", base+"/api/v1/tasks", tc.body, &env); st != tc.status {
			t.Fatalf("%s: %d %+v", tc.body, st, env)
		}
		for _, want := range tc.msg {
			if !strings.Contains(env.Error.Message, want) {
				t.Errorf("%s: message %q does not contain %q", tc.body, env.Error.Message, want)
			}
		}
	}
	var list api.TaskListResponse
	if st := httpJSON(t, "GET", base+"/api/v1/tasks", "", &list); st != 200 || list.Total != 0 {
		t.Fatalf("a refused task was enqueued: %+v", list)
	}
	// A dependency that exists is accepted.
	var dep, tk api.Task
	httpJSON(t, "POST", base+"/api/v1/tasks", `{"kind":"merge_wal","target":"exp"}`, &dep)
	if st := httpJSON(t, "POST", base+"/api/v1/tasks", `{"kind":"compact","target":"exp","depends_on":["`+dep.ID+`"]}`, &tk); st != 202 ||
		len(tk.DependsOn) != 1 || tk.DependsOn[0] != dep.ID {
		t.Fatalf("depending on %s: %d %+v", dep.ID, st, tk)
	}
}

// TestMasterRoutesRefuseUnknownParameters: every master route answers a query
// parameter it does not take with a 400 naming the ones it does, and serves every
// route api.MasterRoutes lists.
func TestMasterRoutesRefuseUnknownParameters(t *testing.T) {
	data := objstore.NewMem()
	createExperiment(t, data, "exp", 1, 5)
	c := newCluster(t, data)
	m := c.start(quietSettings(), nil)
	base := m.srv.URL
	var tk api.Task
	httpJSON(t, "POST", base+"/api/v1/tasks", `{"kind":"compact","target":"exp"}`, &tk)
	// A refused request does nothing.
	var env api.ErrorResponse
	if st := httpJSON(t, "POST", base+"/api/v1/tasks?dry_run=true", `{"kind":"merge_wal","target":"exp"}`, &env); st != 400 {
		t.Fatalf("POST /api/v1/tasks?dry_run=true: %d", st)
	}
	var list api.TaskListResponse
	if httpJSON(t, "GET", base+"/api/v1/tasks?kind=merge_wal", "", &list); list.Total != 0 {
		t.Fatalf("a refused task request enqueued %+v", list.Tasks)
	}
	accepts := map[string]string{
		"GET /api/v1/experiments":                          "this route accepts search, kind, limit, offset",
		"GET /api/v1/experiments/{name}":                   "this route accepts fresh, kind",
		"POST /api/v1/experiments/{name}/rescan":           "this route accepts kind",
		"POST /api/v1/experiments/{name}/optimize":         "this route accepts kind",
		"POST /api/v1/experiments/{name}/query":            "this route accepts kind",
		"GET /api/v1/experiments/{name}/records":           "this route accepts kind, source, limit, offset, filter, include_in_training, id, rollout_id",
		"GET /api/v1/experiments/{name}/records/{id}":      "this route accepts kind",
		"GET /api/v1/experiments/{name}/records/{id}/blob": "this route accepts kind",
		"GET /api/v1/tasks":                                "this route accepts kind, target, state, limit, offset",
		"GET /api/v1/experiments/{name}/versions":          "this route accepts kind, limit",
		"GET /api/v1/experiments/{name}/fragments":         "this route accepts kind",
	}
	body := map[string]string{"POST /api/v1/tasks": `{"kind":"compact","target":"exp"}`}
	n := 0
	for _, rt := range api.MasterRoutes() {
		key := rt.Method + " " + rt.Path
		if rt.Path == "/metrics" {
			continue
		}
		path := strings.NewReplacer("{name}", "exp", "{id}", tk.ID).Replace(rt.Path)
		var env api.ErrorResponse
		st := httpJSON(t, rt.Method, base+path+"?bogus=1", body[key], &env)
		want := accepts[key]
		if want == "" {
			want = "this route takes no query parameters"
		}
		if st != 400 || !strings.Contains(env.Error.Message, `unknown query parameter "bogus"`) || !strings.Contains(env.Error.Message, want) {
			t.Errorf("%s?bogus=1: %d %q, want a 400 saying %q", key, st, env.Error.Message, want)
		}
		// Without the parameter the route is served (not the mux's 404 or 405; a
		// handler's 404 for the made-up experiment is fine).
		// (Raw: a served task's own "error" field is a string, not the envelope.)
		var plain json.RawMessage
		st = httpJSON(t, rt.Method, base+path, body[key], &plain)
		if st == 404 && strings.Contains(string(plain), "no route") || st == 405 || st >= 500 {
			t.Errorf("%s: %d %s", key, st, plain)
		}
		n++
	}
	if n < 9 {
		t.Fatalf("only %d routes checked", n)
	}
}

// fill sets every exported field of the struct v points to a non-zero value, so a
// field added later shows up in the shape comparisons below.
func fill(t *testing.T, v any) {
	t.Helper()
	rv := reflect.ValueOf(v).Elem()
	for i := 0; i < rv.NumField(); i++ {
		f := rv.Field(i)
		switch {
		case f.Type() == reflect.TypeFor[time.Time]():
			f.Set(reflect.ValueOf(time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)))
		case f.Kind() == reflect.String:
			f.SetString("x" + rv.Type().Field(i).Name)
		case f.CanInt():
			f.SetInt(int64(7 + i))
		case f.CanUint():
			f.SetUint(uint64(7 + i))
		case f.Kind() == reflect.Bool:
			f.SetBool(true)
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.String:
			f.Set(reflect.ValueOf([]string{"s"}))
		default:
			t.Fatalf("fill: field %s of type %s", rv.Type().Field(i).Name, f.Type())
		}
	}
}

// TestWireCopiesKeepTheShapes: the API forms of the shared _stats maintenance state
// and of a worker's registration (api types, so clients need not import master or
// coord) encode exactly as the stored types did.
func TestWireCopiesKeepTheShapes(t *testing.T) {
	var st MaintenanceState
	fill(t, &st)
	var wi coord.WorkerInfo
	fill(t, &wi)
	for name, pair := range map[string][2]any{
		"stats maintenance": {st, maintenanceInfoOf(st)},
		"worker":            {wi, workerInfoOf(wi)},
	} {
		a, _ := json.Marshal(pair[0])
		b, _ := json.Marshal(pair[1])
		if string(a) != string(b) {
			t.Errorf("%s: stored %s\n                 wire   %s", name, a, b)
		}
	}
}

// TestRoutesAreTheDocumentedOnes: the routes the master's handler registers are
// exactly api.MasterRoutes(), which TestOpenAPIListsEveryRouteAndNothingElse holds
// equal to the OpenAPI document: a route served but not documented, or documented but
// not served, fails here or there.
func TestRoutesAreTheDocumentedOnes(t *testing.T) {
	c := newCluster(t, objstore.NewMem())
	h := c.start(quietSettings(), nil)
	key := func(r api.Route) string { return r.Method + " " + r.Path }
	var served, documented []string
	for _, r := range h.Routes() {
		served = append(served, key(r))
	}
	for _, r := range api.MasterRoutes() {
		documented = append(documented, key(r))
	}
	slices.Sort(served)
	slices.Sort(documented)
	if !slices.Equal(served, documented) {
		t.Fatalf("served:\n%s\ndocumented (api.MasterRoutes):\n%s", strings.Join(served, "\n"), strings.Join(documented, "\n"))
	}
	// And each is served: not the mux's 404 "no route" nor a 405.
	for _, r := range h.Routes() {
		path := strings.NewReplacer("{name}", "nope", "{id}", "nope").Replace(r.Path)
		req, _ := http.NewRequest(r.Method, h.srv.URL+path, strings.NewReader("{}"))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 405 || resp.StatusCode == 404 && strings.Contains(string(b), "no route") {
			t.Errorf("%s %s: %d %s", r.Method, path, resp.StatusCode, b)
		}
	}
}
