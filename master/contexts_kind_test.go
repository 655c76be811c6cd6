package master

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/internal/oracle"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/storekind"
	"github.com/lancectx/lancectx/wal"
)

// TestMasterMergesAContextStore: the master picks the context kind up from the kind
// table: its scan observes a context store, its merge trigger merges the store's
// generations into a base table LanceDB reads, and the worker's search still finds
// every record afterwards.
func TestMasterMergesAContextStore(t *testing.T) {
	dir := t.TempDir()
	data, err := objstore.NewFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	wurl := kindsWorker(t, dir, data)
	ctx := context.Background()
	post(t, wurl+"/api/v1/contexts", `{"name":"mem","embedding_dim":3,"distance_metric":"dot"}`, 201)
	const gens, perGen = 3, 4
	for g := 0; g < gens; g++ {
		var recs []string
		for i := 0; i < perGen; i++ {
			recs = append(recs, fmt.Sprintf(`{"id":"c-%d-%d","run_id":"r","text_payload":"note %d","embedding":[%d,%d,1]}`, g, i, i, g, i))
		}
		post(t, wurl+"/api/v1/contexts/mem/records", `{"records":[`+strings.Join(recs, ",")+`]}`, 201)
	}
	cxDir := storekind.Context.DatasetDir("mem")
	if p, err := wal.PendingGenerations(ctx, objstore.Prefixed(data, cxDir)); err != nil || p.Generations != gens {
		t.Fatalf("context pending before the master: %+v %v", p, err)
	}
	c := newCluster(t, data)
	set := fastSettings()
	set.MinFragments = 1000
	set.CleanupInterval = 0
	m := c.start(set, func(cfg *Config) { cfg.DataURI = "file://" + dir })
	waitFor(t, 60*time.Second, "the master to merge the context store and scan it", func() bool {
		r, ok := m.Stats().Snapshot().Lookup("context", "mem")
		return ok && r.Kind == "context" && r.PendingWALGenerations == 0 && r.RowCount == gens*perGen
	})
	n, err := oracle.New(t).Count(filepath.Join(dir, cxDir), "", 0)
	if err != nil || n != gens*perGen {
		t.Fatalf("LanceDB counts %d rows (%v), want %d", n, err, gens*perGen)
	}
	var out api.SearchContextResponse
	b := post(t, wurl+"/api/v1/contexts/mem/search", `{"query":[0,0,1],"limit":100}`, 200)
	if err := json.NewDecoder(bytes.NewReader(b)).Decode(&out); err != nil || len(out.Results) != gens*perGen {
		t.Fatalf("search after the master's merge: %d results (%v)", len(out.Results), err)
	}
}
