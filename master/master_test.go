package master

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/coord"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
)

// TestOneMasterRunsTheControlPlane: a single master scans, merges pending WAL
// generations, compacts fragmented experiments (recording the compaction in the stats
// row), maintains _stats, plans cleanups, and serves the admin API from its snapshot.
func TestOneMasterRunsTheControlPlane(t *testing.T) {
	data := objstore.NewMem()
	createExperiment(t, data, "fragmented", 6, 10)
	createExperiment(t, data, "walled", 2, 10)
	addGenerations(t, data, "walled", "worker-a", 3, 5)
	createExperiment(t, data, "quiet", 1, 10)
	c := newCluster(t, data)
	m := c.start(fastSettings(), nil)
	base := m.srv.URL

	waitFor(t, 10*time.Second, "the first scan", func() bool { return len(m.Stats().Snapshot().Rows) == 3 })
	waitFor(t, 20*time.Second, "merge and compaction to show in the stats", func() bool {
		s := m.Stats().Snapshot()
		f, _ := s.Get("fragmented")
		w, _ := s.Get("walled")
		return f.FragmentCount < 4 && f.TotalCompactions >= 1 && w.PendingWALGenerations == 0 && w.RowCount == 35
	})
	f, _ := m.Stats().Snapshot().Get("fragmented")
	if f.LastCompaction == NoCompaction || f.RowCount != 60 {
		t.Fatalf("fragmented after compaction: %+v", f)
	}
	ds, err := lance.OpenStore(context.Background(), objstore.Prefixed(data, "walled.rollout.lance"))
	if err != nil {
		t.Fatalf("open the walled base table: %v", err)
	}
	if n := ds.CountRows(); n != 35 {
		t.Fatalf("walled base table: %d rows, want 20 base rows + 15 merged", n)
	}

	// The admin API.
	var list api.ExperimentListResponse
	if st := httpJSON(t, "GET", base+"/api/v1/experiments", "", &list); st != 200 || list.Total != 3 || list.Stale ||
		len(list.Experiments) != 3 || list.Experiments[0].Name != "fragmented" {
		t.Fatalf("list: %d %+v", st, list)
	}
	if list.Experiments[0].LastCompaction == nil || list.Experiments[2].LastCompaction != nil {
		t.Fatalf("last_compaction must be set only when compacted: %+v", list.Experiments)
	}
	if st := httpJSON(t, "GET", base+"/api/v1/experiments?search=al&limit=1&offset=0", "", &list); st != 200 ||
		list.Total != 1 || list.Experiments[0].Name != "walled" {
		t.Fatalf("search: %d %+v", st, list)
	}
	if st := httpJSON(t, "GET", base+"/api/v1/experiments?limit=0", "", nil); st != 400 {
		t.Fatalf("limit=0: %d", st)
	}
	var det api.ExperimentDetail
	if st := httpJSON(t, "GET", base+"/api/v1/experiments/quiet", "", &det); st != 200 || det.Source != "snapshot" || det.RowCount != 10 {
		t.Fatalf("detail: %d %+v", st, det)
	}
	if st := httpJSON(t, "GET", base+"/api/v1/experiments/quiet?fresh=true", "", &det); st != 200 || det.Source != "observed" ||
		det.Persisted == nil || !*det.Persisted {
		t.Fatalf("fresh detail: %d %+v", st, det)
	}
	if st := httpJSON(t, "POST", base+"/api/v1/experiments/quiet/rescan", "", &det); st != 200 || det.Persisted == nil || !*det.Persisted {
		t.Fatalf("rescan: %d %+v", st, det)
	}
	for _, u := range []string{"/api/v1/experiments/nope", "/api/v1/experiments/nope?fresh=true"} {
		if st := httpJSON(t, "GET", base+u, "", nil); st != 404 {
			t.Fatalf("%s: %d", u, st)
		}
	}
	if st := httpJSON(t, "POST", base+"/api/v1/experiments/nope/optimize", "", nil); st != 404 {
		t.Fatalf("optimize unknown: %d", st)
	}

	// Optimize: the merge_wal -> compact -> cleanup chain runs in order.
	// The answer is one task record, the chain's last, listing the chain in order.
	var chain api.Task
	if st := httpJSON(t, "POST", base+"/api/v1/experiments/quiet/optimize", "", &chain); st != 202 || len(chain.Chain) != 3 ||
		chain.Kind != KindCleanup || chain.ID != chain.Chain[2] || len(chain.DependsOn) != 1 || chain.DependsOn[0] != chain.Chain[1] {
		t.Fatalf("optimize: %d %+v", st, chain)
	}
	waitFor(t, 20*time.Second, "the optimize chain", func() bool {
		var tk api.Task
		httpJSON(t, "GET", base+"/api/v1/tasks/"+chain.ID, "", &tk)
		return tk.State == string(coord.StateDone)
	})
	var first, compact, last api.Task
	httpJSON(t, "GET", base+"/api/v1/tasks/"+chain.Chain[0], "", &first)
	httpJSON(t, "GET", base+"/api/v1/tasks/"+chain.Chain[1], "", &compact)
	httpJSON(t, "GET", base+"/api/v1/tasks/"+chain.Chain[2], "", &last)
	if first.Kind != KindMergeWAL || compact.Kind != KindCompact || compact.DependsOn[0] != first.ID || last.Chain != nil {
		t.Fatalf("chain: %+v / %+v / %+v", first, compact, last)
	}
	if first.State != string(coord.StateDone) || !first.FinishedTime.Before(last.StartedTime.Add(time.Millisecond)) ||
		first.FinishedAt == nil || last.StartedAt == nil || *first.FinishedAt > *last.StartedAt {
		t.Fatalf("chain out of order: %+v / %+v", first, last)
	}

	// Tasks API.
	var tk api.Task
	if st := httpJSON(t, "POST", base+"/api/v1/tasks", `{"kind":"compact","target":"quiet"}`, &tk); st != 202 || tk.Kind != KindCompact {
		t.Fatalf("create task: %d %+v", st, tk)
	}
	for body, want := range map[string]int{
		`{"kind":"explode","target":"quiet"}`:           400,
		`{"kind":"compact","target":"nope"}`:            404,
		`{"kind":"compact","target":"../x"}`:            400,
		`{"kind":"compact","target":"quiet","extra":1}`: 400,
		`{"kind":"stats_maintenance","target":"x"}`:     400,
	} {
		if st := httpJSON(t, "POST", base+"/api/v1/tasks", body, nil); st != want {
			t.Errorf("POST /tasks %s: %d, want %d", body, st, want)
		}
	}
	var tl api.TaskListResponse
	if st := httpJSON(t, "GET", base+"/api/v1/tasks?limit=200", "", &tl); st != 200 || tl.Total < 6 {
		t.Fatalf("list tasks: %d %+v", st, tl)
	}
	kinds := map[string]int{}
	for i, x := range tl.Tasks {
		if x.State == string(coord.StateDone) {
			kinds[x.Kind]++
		}
		if i > 0 && tl.Tasks[i-1].ID < x.ID {
			t.Fatal("tasks must be listed newest first")
		}
	}
	for _, k := range taskKinds {
		if k == KindIndex {
			continue // context stores only: TestMasterIndexesAContextStore
		}
		if kinds[k] == 0 {
			t.Errorf("no %s task done: %v", k, kinds)
		}
	}
	if st := httpJSON(t, "GET", base+"/api/v1/tasks?state=bogus", "", nil); st != 400 {
		t.Fatalf("bad state filter: %d", st)
	}
	if st := httpJSON(t, "GET", base+"/api/v1/tasks/0190a0a0-0000-7000-8000-000000000000", "", nil); st != 404 {
		t.Fatalf("unknown task: %d", st)
	}
	if st := httpJSON(t, "GET", base+"/api/v1/tasks/not-an-id", "", nil); st != 400 {
		t.Fatalf("bad task id: %d", st)
	}

	// Cluster, health, metrics, routing.
	var cl api.ClusterResponse
	if st := httpJSON(t, "GET", base+"/api/v1/cluster", "", &cl); st != 200 || cl.Leader == nil || cl.Leader.ID != m.ID() ||
		len(cl.Masters) != 1 || cl.Stats.Experiments != 3 {
		t.Fatalf("cluster: %d %+v", st, cl)
	}
	var h api.MasterHealthResponse
	if st := httpJSON(t, "GET", base+"/api/v1/health", "", &h); st != 200 || h.Status != "ok" || !h.Leader || len(h.Checks) < 6 {
		t.Fatalf("health: %d %+v", st, h)
	}
	if st := httpJSON(t, "DELETE", base+"/api/v1/experiments", "", nil); st != http.StatusMethodNotAllowed {
		t.Fatalf("405 expected: %d", st)
	}
	if st := httpJSON(t, "GET", base+"/api/v1/nothing", "", nil); st != 404 {
		t.Fatalf("404 expected: %d", st)
	}
	problems, err := testutil.GatherAndLint(m.prom)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "master_") {
			t.Errorf("metric lint: %s: %s", p.Metric, p.Text)
		}
	}
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics: %d", resp.StatusCode)
	}
	for _, name := range []string{"master_stats_maintenance_duration_seconds", "master_stats_versions_removed_total",
		"master_stats_version", "master_stats_maintenance_failures_total", "master_stats_maintenance_consecutive_failures",
		"master_stats_unreclaimed_versions", "master_loop_last_success_timestamp_seconds", "master_loop_consecutive_failures",
		"master_task_queue_depth", "master_task_duration_seconds", "master_scan_duration_seconds", "master_tasks_total"} {
		if n, err := testutil.GatherAndCount(m.prom, name); err != nil || n == 0 {
			t.Errorf("metric %s missing (%d, %v)", name, n, err)
		}
	}
}
