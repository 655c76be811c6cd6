package master

import (
	"net/http"
	"strings"
	"testing"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/objstore"
)

// TestExperimentSortVersionsAndFragments: ?sort= orders the experiment list by a
// summary field either way (ties in name order) and refuses unknown keys; the versions
// route gives each version's rows and fragments as the manifests say, newest limit
// versions oldest first; the fragments route lists the current version's fragments.
func TestExperimentSortVersionsAndFragments(t *testing.T) {
	data := objstore.NewMem()
	createExperiment(t, data, "exp-a", 3, 5) // 15 rows in 3 fragments, 3 versions
	createExperiment(t, data, "exp-b", 1, 20)
	createExperiment(t, data, "exp-c", 2, 1)
	c := newCluster(t, data)
	m := c.start(quietSettings(), nil)
	base := m.srv.URL
	for _, n := range []string{"exp-a", "exp-b", "exp-c"} {
		var d api.ExperimentDetail
		if st := httpJSON(t, "POST", base+"/api/v1/experiments/"+n+"/rescan", "", &d); st != http.StatusOK || d.Persisted == nil || !*d.Persisted {
			t.Fatalf("rescan %s: %d %+v", n, st, d)
		}
	}
	waitFor(t, hangGuard, "the three rows in the snapshot", func() bool { return len(m.Stats().Snapshot().Rows) == 3 })
	names := func(q string) string {
		t.Helper()
		var l api.ExperimentListResponse
		if st := httpJSON(t, "GET", base+"/api/v1/experiments?"+q, "", &l); st != http.StatusOK {
			t.Fatalf("list ?%s: %d", q, st)
		}
		var out []string
		for _, e := range l.Experiments {
			out = append(out, e.Name)
		}
		return strings.Join(out, ",")
	}
	for q, want := range map[string]string{
		"":                                "exp-a,exp-b,exp-c",
		"sort=name":                       "exp-a,exp-b,exp-c",
		"sort=-name":                      "exp-c,exp-b,exp-a",
		"sort=-row_count":                 "exp-b,exp-a,exp-c",
		"sort=row_count":                  "exp-c,exp-a,exp-b",
		"sort=fragment_count":             "exp-b,exp-c,exp-a",
		"sort=-fragment_count&limit=2":    "exp-a,exp-c",
		"sort=-fragment_count&offset=2":   "exp-b",
		"sort=-row_count&search=exp-a":    "exp-a",
		"sort=pending_wal_generations":    "exp-a,exp-b,exp-c", // all 0: name order
		"sort=-row_count&offset=5":        "",
		"sort=-pending_wal_generations":   "exp-a,exp-b,exp-c",
		"sort=-total_compactions&limit=1": "exp-a",
	} {
		if got := names(q); got != want {
			t.Errorf("?%s = %q, want %q", q, got, want)
		}
	}
	var e api.ErrorResponse
	if st := httpJSON(t, "GET", base+"/api/v1/experiments?sort=bogus", "", &e); st != http.StatusBadRequest || !strings.Contains(e.Error.Message, "row_count") {
		t.Errorf("sort=bogus: %d %+v; want a 400 naming the keys", st, e)
	}

	var vs api.ExperimentVersionsResponse
	if st := httpJSON(t, "GET", base+"/api/v1/experiments/exp-a/versions", "", &vs); st != http.StatusOK {
		t.Fatalf("versions: %d", st)
	}
	if vs.Total != 3 || len(vs.Versions) != 3 || vs.Kind != "rollout" || vs.Name != "exp-a" {
		t.Fatalf("versions = %+v", vs)
	}
	for i, v := range vs.Versions {
		if v.Rows != int64(5*(i+1)) || v.Fragments != i+1 || v.Timestamp.IsZero() || v.ManifestSize <= 0 || (i > 0 && v.Version <= vs.Versions[i-1].Version) {
			t.Errorf("version %d = %+v; want %d rows in %d fragments, ascending", i, v, 5*(i+1), i+1)
		}
	}
	if st := httpJSON(t, "GET", base+"/api/v1/experiments/exp-a/versions?limit=2", "", &vs); st != http.StatusOK || vs.Total != 3 || len(vs.Versions) != 2 || vs.Versions[1].Rows != 15 {
		t.Fatalf("versions?limit=2: %d %+v; want the newest two", st, vs)
	}
	var fr api.ExperimentFragmentsResponse
	if st := httpJSON(t, "GET", base+"/api/v1/experiments/exp-a/fragments", "", &fr); st != http.StatusOK {
		t.Fatalf("fragments: %d", st)
	}
	if len(fr.Fragments) != 3 || fr.Rows != 15 || fr.Version != vs.Versions[1].Version {
		t.Fatalf("fragments = %+v", fr)
	}
	for _, f := range fr.Fragments {
		if f.PhysicalRows != 5 || f.DeletedRows != 0 || f.DataFiles != 1 {
			t.Errorf("fragment %+v", f)
		}
	}
	for _, bad := range []struct {
		path string
		want int
	}{
		{"/api/v1/experiments/nope/versions", http.StatusNotFound},
		{"/api/v1/experiments/nope/fragments", http.StatusNotFound},
		{"/api/v1/experiments/exp-a/versions?limit=0", http.StatusBadRequest},
		{"/api/v1/experiments/exp-a/fragments?kind=bogus", http.StatusBadRequest},
		{"/api/v1/experiments/exp-a/fragments?x=1", http.StatusBadRequest},
	} {
		if st := httpJSON(t, "GET", base+bad.path, "", &e); st != bad.want || e.Error.Message == "" {
			t.Errorf("GET %s: %d %+v; want %d with a JSON error", bad.path, st, e, bad.want)
		}
	}
}

// TestCancelAndRetryTaskRoutes: a queued task is cancelled (200, failed, cancelled),
// a second cancel is a 409, a retry makes a new queued task naming the original (202),
// retrying a task that did not fail is a 409; bad and unknown ids are 400 and 404.
func TestCancelAndRetryTaskRoutes(t *testing.T) {
	data := objstore.NewMem()
	createExperiment(t, data, "exp", 1, 5)
	c := newCluster(t, data)
	m := c.start(quietSettings(), nil)
	base := m.srv.URL

	var task api.Task
	if st := httpJSON(t, "POST", base+"/api/v1/tasks", `{"kind":"compact","target":"exp"}`, &task); st != http.StatusAccepted || task.State != "queued" {
		t.Fatalf("create: %d %+v", st, task)
	}
	var got api.Task
	if st := httpJSON(t, "POST", base+"/api/v1/tasks/"+task.ID+"/cancel", "", &got); st != http.StatusOK ||
		got.State != "failed" || !got.Cancelled || got.ID != task.ID || got.FinishedAt == nil || !strings.HasPrefix(got.Error, "cancelled") {
		t.Fatalf("cancel: %d %+v", st, got)
	}
	if st := httpJSON(t, "GET", base+"/api/v1/tasks/"+task.ID, "", &got); st != http.StatusOK || !got.Cancelled {
		t.Fatalf("task after cancel: %d %+v", st, got)
	}
	var e api.ErrorResponse
	if st := httpJSON(t, "POST", base+"/api/v1/tasks/"+task.ID+"/cancel", "", &e); st != http.StatusConflict || e.Error.Code != api.CodeConflict {
		t.Fatalf("second cancel: %d %+v; want 409", st, e)
	}
	var retry api.Task
	if st := httpJSON(t, "POST", base+"/api/v1/tasks/"+task.ID+"/retry", "", &retry); st != http.StatusAccepted ||
		retry.ID == task.ID || retry.RetryOf != task.ID || retry.State != "queued" || retry.Kind != "compact" || retry.Target != "exp" {
		t.Fatalf("retry: %d %+v", st, retry)
	}
	if st := httpJSON(t, "POST", base+"/api/v1/tasks/"+retry.ID+"/retry", "", &e); st != http.StatusConflict || !strings.Contains(e.Error.Message, "queued") {
		t.Fatalf("retry of a queued task: %d %+v; want 409", st, e)
	}
	for _, bad := range []struct {
		path string
		want int
	}{
		{"/api/v1/tasks/not-a-uuid/cancel", http.StatusBadRequest},
		{"/api/v1/tasks/not-a-uuid/retry", http.StatusBadRequest},
		{"/api/v1/tasks/0190a0c2-7a3e-7000-8000-000000000000/cancel", http.StatusNotFound},
		{"/api/v1/tasks/0190a0c2-7a3e-7000-8000-000000000000/retry", http.StatusNotFound},
		{"/api/v1/tasks/" + retry.ID + "/cancel?x=1", http.StatusBadRequest},
	} {
		if st := httpJSON(t, "POST", base+bad.path, "", &e); st != bad.want || e.Error.Message == "" {
			t.Errorf("POST %s: %d %+v; want %d", bad.path, st, e, bad.want)
		}
	}
	if st := httpJSON(t, "GET", base+"/api/v1/tasks/"+retry.ID+"/cancel", "", &e); st != http.StatusMethodNotAllowed {
		t.Errorf("GET of the cancel route: %d, want 405", st)
	}
	if st := httpJSON(t, "GET", base+"/api/v1/tasks/"+retry.ID, "", &got); st != http.StatusOK || got.State != "queued" {
		t.Errorf("the retry after the refused calls: %d %+v", st, got)
	}
	// GET reads its id as cancel and retry do (taskID): an upper-case UUID names the
	// same task, a malformed one is a 400 with a JSON error.
	if st := httpJSON(t, "GET", base+"/api/v1/tasks/"+strings.ToUpper(retry.ID), "", &got); st != http.StatusOK || got.ID != retry.ID {
		t.Errorf("GET with the id in upper case: %d %+v; want 200 and task %s", st, got, retry.ID)
	}
	if st := httpJSON(t, "GET", base+"/api/v1/tasks/not-a-uuid", "", &e); st != http.StatusBadRequest || !strings.Contains(e.Error.Message, "not a UUID") {
		t.Errorf("GET with a malformed id: %d %+v; want 400", st, e)
	}
}
