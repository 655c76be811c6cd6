package worker

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/internal/oracle"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/rollout"
)

// TestStoreCacheChurn: with room for two resident stores, concurrent appends to
// four keep evicting and reopening them; every acked row stays readable, and no
// process ever held two shards of one dataset (a second shard would fence the
// first: no fencing, no reopen retries).
func TestStoreCacheChurn(t *testing.T) {
	tw := newTestWorker(t, "", func(c *Config) { c.StoreCacheCapacity = 2 })
	names := []string{"c0", "c1", "c2", "c3"}
	for _, n := range names {
		tw.createStore(n)
	}
	var mu sync.Mutex
	acked := map[string][]string{}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 15 {
				name := names[(g+i)%len(names)]
				id := fmt.Sprintf("g%d-%d", g, i)
				r := tw.do("POST", "/api/v1/rollouts/"+name+"/records", api.ContentTypeJSON, jsonBody(t, []rollout.AddRecord{rec(id, "r")}))
				if r.status != http.StatusCreated {
					t.Errorf("append %s to %s: %s", id, name, r)
					return
				}
				mu.Lock()
				acked[name] = append(acked[name], id)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if n := tw.srv.rollouts.stores.resident(); n > 2 {
		t.Fatalf("%d resident stores, capacity 2", n)
	}
	for _, n := range names {
		got := sorted(ids(tw.listAll(n, "", 100)))
		if want := sorted(acked[n]); !slices.Equal(got, want) {
			t.Fatalf("store %s lists %v, acked %v", n, got, want)
		}
	}
	m := string(tw.do("GET", "/metrics", "", nil).body)
	for _, want := range []string{"rollout_wal_fenced_total 0", "rollout_append_reopen_retries_total 0"} {
		if !strings.Contains(m, want) {
			t.Fatalf("metrics lack %q", want)
		}
	}
	if !strings.Contains(m, `rollout_store_closes_total{reason="evicted",result="ok"}`) {
		t.Fatal("no eviction happened")
	}
}

// TestConcurrentOpenOneShard: many first requests for one store open it once.
func TestConcurrentOpenOneShard(t *testing.T) {
	tw := newTestWorker(t, "", nil)
	tw.createStore("once")
	tw.close()
	tw = newTestWorker(t, tw.dir, nil)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			tw.do("POST", "/api/v1/rollouts/once/records", api.ContentTypeJSON,
				jsonBody(t, []rollout.AddRecord{rec(fmt.Sprint("id-", i), "r")})).want(t, http.StatusCreated, nil)
		})
	}
	wg.Wait()
	m := string(tw.do("GET", "/metrics", "", nil).body)
	for _, want := range []string{`rollout_store_opens_total{result="ok"} 1`, "rollout_wal_fenced_total 0"} {
		if !strings.Contains(m, want) {
			t.Fatalf("metrics lack %q", want)
		}
	}
	if got := len(tw.listAll("once", "", 100)); got != 16 {
		t.Fatalf("%d records", got)
	}
}

// TestRestartReplaysAckedRows: rows acked but never sealed (the worker stopped
// without closing its shards, as a crash would) are readable after a restart, by a
// reader only: opening the store replays them.
func TestRestartReplaysAckedRows(t *testing.T) {
	tw := newTestWorker(t, "", nil)
	tw.createStore("rp")
	tw.appendJSON("rp", false, rec("u1", "r"), rec("u2", "r"))
	// Abandon the worker: no Close, so nothing is sealed.
	tw.http.Close()
	tw.once.Do(func() {})
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = tw.srv.Close(ctx)
	})
	tw2 := newTestWorker(t, tw.dir, nil)
	if got := sorted(ids(tw2.listAll("rp", "", 100))); !slices.Equal(got, []string{"u1", "u2"}) {
		t.Fatalf("after restart: %v", got)
	}
}

// TestSchemaEvolution: a store whose dataset predates the claim-check columns gets
// them on open (no rewrite); new rows carry them, old rows read them as null, and
// LanceDB reads the result.
func TestSchemaEvolution(t *testing.T) {
	dir := t.TempDir()
	data, err := objstore.NewFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	newer := map[string]bool{rollout.ColModelInputString: true, rollout.ColModelOutputString: true, rollout.ColRationale: true,
		rollout.ColProblemText: true, rollout.ColUserMetadata: true, rollout.ColRelationships: true, rollout.ColMetadata: true}
	var fields []arrow.Field
	for _, f := range rollout.Schema().Fields() {
		if !newer[f.Name] {
			fields = append(fields, f)
		}
	}
	old := arrow.NewSchema(fields, nil)
	oldRec, err := rollout.ToBatch([]rollout.AddRecord{{ID: "old-1", RolloutID: "r", ProblemID: "r", Role: "assistant",
		ContentType: "text/plain", CreatedAt: time.Now()}}, old)
	if err != nil {
		t.Fatal(err)
	}
	rdr, err := array.NewRecordReader(old, []arrow.RecordBatch{oldRec})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lance.WriteStore(t.Context(), objstore.Prefixed(data, "legacy.rollout.lance"), rdr, lance.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	rdr.Release()
	oldRec.Release()
	// A registry entry of that time: no incarnation (its table has none either).
	legacyEntry := `{"name":"legacy","kind":"rollout","dataset":"legacy.rollout.lance","created_at":"2026-11-01T00:00:00Z"}`
	if err := objstore.PutBytes(t.Context(), data, "_registry/rollout/legacy.json", []byte(legacyEntry)); err != nil {
		t.Fatal(err)
	}

	tw := newTestWorker(t, dir, nil)
	tw.appendJSON("legacy", true, rollout.AddRecord{ID: "new-1", RolloutID: "r", ModelInputString: strp("prompt"),
		Metadata: []byte(`{"a":[1]}`)})
	got := map[string]rollout.Record{}
	for _, r := range tw.listAll("legacy", "", 100) {
		got[r.ID] = r
	}
	if len(got) != 2 || got["old-1"].ModelInputString != nil || got["new-1"].ModelInputString == nil ||
		*got["new-1"].ModelInputString != "prompt" || string(got["new-1"].Metadata) != `{"a":[1]}` {
		t.Fatalf("records after evolution: %+v", got)
	}
	tw.do("POST", "/api/v1/internal/merge-wal/legacy?flush=true", "", nil).want(t, http.StatusOK, nil)
	rows, err := oracle.New(t).Read(filepath.Join(dir, "legacy.rollout.lance"), oracle.ReadOptions{Columns: []string{"id", "model_input_string"}})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(rows)
	want := []string{`{"id":"new-1","model_input_string":"prompt"}`, `{"id":"old-1","model_input_string":null}`}
	if !slices.Equal(rows, want) {
		t.Fatalf("LanceDB reads %v, want %v", rows, want)
	}
}
