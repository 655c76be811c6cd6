package master

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/worker"
)

// TestWorkerAndMasterReportOneURI: a worker and a master over the same data directory,
// each given it in another spelling (a relative path; a file:// URI with a trailing
// slash), report a store's location as the same canonical URI, the one LanceDB opens.
func TestWorkerAndMasterReportOneURI(t *testing.T) {
	dir := t.TempDir()
	data, err := objstore.NewFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(wd, dir)
	if err != nil {
		t.Fatal(err)
	}
	w, err := worker.New(context.Background(), worker.Config{DataDir: rel, Store: data, WorkerID: "uri-worker",
		SealInterval: time.Hour, MergeAfterGenerations: -1, Logger: testLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := w.Close(ctx); err != nil {
			t.Error(err)
		}
	})
	ws := httptest.NewServer(w.Handler())
	t.Cleanup(ws.Close)
	c := newCluster(t, data)
	m := c.start(quietSettings(), func(cfg *Config) { cfg.DataURI = "file://" + filepath.ToSlash(dir) + "/" })

	want := "file://" + filepath.ToSlash(dir) + "/exp.rollout.lance"
	var created, described api.StoreInfo
	if st := httpJSON(t, "POST", ws.URL+"/api/v1/rollouts", `{"name":"exp"}`, &created); st != http.StatusCreated {
		t.Fatalf("create: %d", st)
	}
	httpJSON(t, "GET", ws.URL+"/api/v1/rollouts/exp", "", &described)
	var stores api.ListStoresResponse
	httpJSON(t, "GET", ws.URL+"/api/v1/rollouts", "", &stores)
	var observed, rescanned api.ExperimentDetail
	httpJSON(t, "GET", m.srv.URL+"/api/v1/experiments/exp", "", &observed)
	httpJSON(t, "POST", m.srv.URL+"/api/v1/experiments/exp/rescan", "", &rescanned)
	row, ok := m.Stats().Snapshot().Get("exp")
	for what, got := range map[string]string{
		"worker create": created.URI, "worker describe": described.URI, "worker list": stores.Stores[0].URI,
		"master observe": observed.URI, "master rescan": rescanned.URI, "master stats row": row.URI,
	} {
		if got != want {
			t.Errorf("%s: uri %q, want %q", what, got, want)
		}
	}
	if !ok {
		t.Error("the rescan wrote no stats row")
	}
}
