package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/ctxstore"
)

// TestContextVectorCacheLoadsOnce: two searches that miss the cache of decoded vectors
// for the same store and base version at the same time decode it once. The first
// miss's decode is held until the second search has joined it (onJoin), so the two are
// concurrent by construction; both answer the exact top k, and the cache counts one
// load. A search after a merge (a new base version) loads again, once.
func TestContextVectorCacheLoadsOnce(t *testing.T) {
	const dim, n, k = 8, 300, 5
	tw := newTestWorker(t, "", nil)
	tw.cxCreate("s", dim, "l2")
	rng := rand.New(rand.NewPCG(21, 22))
	live := map[string][]float32{}
	var recs []api.AddContextRecord
	for i := range n {
		id := fmt.Sprintf("r%03d", i)
		live[id] = randVec(rng, dim)
		recs = append(recs, cxRec(id, "run", live[id], ""))
	}
	tw.cxAdd("s", recs...)
	tw.cxMerge("s")
	dist, _ := ctxstore.DistanceFor("l2")

	c := tw.srv.cxVecs
	joined := make(chan struct{}, 16)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The hooks are set once, before any search (the server's goroutines read them).
	c.onJoin = func() { joined <- struct{}{} }
	c.beforeLoad = func() {
		// Hold the decode until another search waits for it (or the test's deadline:
		// then the second search did not join, and the load count below says so).
		select {
		case <-joined:
		case <-ctx.Done():
		}
	}
	search := func(q []float32) ([]string, error) {
		lim := k
		body, _ := json.Marshal(api.SearchContextRequest{Query: q, Limit: &lim})
		req, err := http.NewRequestWithContext(ctx, "POST", tw.url+"/api/v1/contexts/s/search", bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", api.ContentTypeJSON)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("%d %s", resp.StatusCode, b)
		}
		var out api.SearchContextResponse
		if err := json.Unmarshal(b, &out); err != nil {
			return nil, err
		}
		return searchIDs(out.Results), nil
	}
	burst := func(what string) {
		t.Helper()
		type answer struct {
			q   []float32
			ids []string
			err error
		}
		done := make(chan answer, 2)
		for range 2 {
			q := randVec(rng, dim)
			go func() {
				ids, err := search(q)
				done <- answer{q, ids, err}
			}()
		}
		for range 2 {
			a := <-done
			if a.err != nil {
				t.Fatalf("%s: %v", what, a.err)
			}
			if want := exactTopK(live, dist, a.q, k); fmt.Sprint(a.ids) != fmt.Sprint(want) {
				t.Fatalf("%s: %v, exact %v", what, a.ids, want)
			}
		}
	}
	burst("first burst")
	if got := c.loads.Load(); got != 1 {
		t.Fatalf("two concurrent misses of one version decoded %d times, want 1", got)
	}
	// Hits do not load. The answer's embeddings come from the cache: the stored ones.
	for _, r := range tw.cxSearch("s", api.SearchContextRequest{Query: randVec(rng, dim), Limit: intp(k)}) {
		if !slices.Equal(r.Record.Embedding, live[r.Record.ID]) {
			t.Fatalf("%s: embedding %v, stored %v", r.Record.ID, r.Record.Embedding, live[r.Record.ID])
		}
	}
	if got := c.loads.Load(); got != 1 {
		t.Fatalf("a hit decoded: %d loads", got)
	}
	// A new base version: one more load for the next burst.
	extra := randVec(rng, dim)
	live["x"] = extra
	tw.cxAdd("s", cxRec("x", "run", extra, ""))
	tw.cxMerge("s")
	burst("after a merge")
	if got := c.loads.Load(); got != 2 {
		t.Fatalf("after a merge: %d loads, want 2", got)
	}
}
