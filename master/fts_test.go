package master

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/lancectx/lancectx/ctxstore/fts"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/storekind"
	"github.com/lancectx/lancectx/wal"
)

// TestIndexTaskBuildsTheTextIndex: an index task asked for through the admin API
// builds the full-text index beside the vector index (every row covered); rows merged
// later make the store due for the sweep again, and the next task covers them with a
// second segment.
func TestIndexTaskBuildsTheTextIndex(t *testing.T) {
	dir := t.TempDir()
	data, err := objstore.NewFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	wurl := kindsWorker(t, dir, data)
	post(t, wurl+"/api/v1/contexts", `{"name":"mem","embedding_dim":8}`, 201)
	addContextRecords(t, wurl, "mem", clusteredRecords("a", 0, 200, 8, 3), 50)
	c := newCluster(t, data)
	set := fastSettings()
	set.CompactionInterval, set.ContextIndexInterval, set.CleanupInterval = 0, 0, 0
	set.ContextIndexMinRows = 100
	m := c.start(set, func(cfg *Config) { cfg.DataURI = "file://" + dir })
	ctx := context.Background()
	st := objstore.Prefixed(data, storekind.Context.DatasetDir("mem"))
	merged := func(rows int64) func() bool {
		return func() bool {
			ds, err := lance.OpenStore(ctx, st)
			return err == nil && ds.CountRows() == rows
		}
	}
	coverage := func() (unindexed, indexed int64, due bool) {
		t.Helper()
		ds, err := lance.OpenStore(ctx, st)
		if err != nil {
			t.Fatal(err)
		}
		man, err := fts.ReadManifest(ctx, st)
		if err != nil {
			t.Fatal(err)
		}
		unindexed, indexed = fts.Unindexed(man, ds, wal.Incarnation(ds))
		due, err = m.textIndexDue(ctx, ds)
		if err != nil {
			t.Fatal(err)
		}
		return unindexed, indexed, due
	}
	runTask := func(wantDetail string) {
		t.Helper()
		got := runIndexTask(t, m, "context/mem")
		if got.State != "done" || !strings.Contains(got.Detail, wantDetail) {
			t.Fatalf("index task: %s %q, want done with %q", got.State, got.Detail, wantDetail)
		}
	}
	waitFor(t, 60*time.Second, "the merges of the four generations", merged(200))
	if u, i, due := coverage(); u != 200 || i != 0 || !due {
		t.Fatalf("before any task: %d unindexed, %d indexed, due %t", u, i, due)
	}
	runTask("text index build on version")
	if u, i, due := coverage(); u != 0 || i != 200 || due {
		t.Fatalf("after the task: %d unindexed, %d indexed, due %t", u, i, due)
	}
	runTask("text index noop")

	addContextRecords(t, wurl, "mem", clusteredRecords("b", 0, 50, 8, 4), 25) // two generations: a merge is due at two
	waitFor(t, 60*time.Second, "the merge of the new generation", merged(250))
	if u, i, due := coverage(); u != 50 || i != 200 || !due {
		t.Fatalf("after an append: %d unindexed, %d indexed, due %t", u, i, due)
	}
	runTask("text index build on version")
	man, err := fts.ReadManifest(ctx, st)
	if err != nil || len(man.Segments) != 2 || man.Segments[0].Docs+man.Segments[1].Docs != 250 {
		t.Fatalf("manifest %+v %v, want two segments of 250 documents", man, err)
	}
}
