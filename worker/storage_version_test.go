package worker

import (
	"context"
	"errors"
	"path/filepath"
	"testing"

	"github.com/lancectx/lancectx/lance"
)

func TestWorkerCreatesStoresInItsDataStorageVersion(t *testing.T) {
	for _, v := range []string{"", "2.0", "2.1"} {
		tw := newTestWorker(t, "", func(c *Config) { c.DataStorageVersion = v })
		tw.createStore("s")
		ds, err := lance.Open(context.Background(), filepath.Join(tw.dir, "s.rollout.lance"))
		if err != nil {
			t.Fatal(err)
		}
		want := v
		if want == "" {
			want = lance.DefaultDataStorageVersion
		}
		if got := ds.DataStorageVersion(); got != want {
			t.Errorf("DataStorageVersion %q: store created in %q", v, got)
		}
	}
	_, err := New(context.Background(), Config{DataDir: t.TempDir(), WorkerID: "w", DataStorageVersion: "2.2"})
	if !errors.Is(err, lance.ErrStorageVersion) {
		t.Fatalf("a worker writing 2.2: %v", err)
	}
}
