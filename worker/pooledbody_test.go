package worker

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/rollout"
)

// TestConcurrentJSONAppendsKeepTheirValues appends from many clients at once, each
// body with its own values, so the pooled body buffers the JSON route decodes in place
// are reused all the time; every row read back must hold exactly what its request
// sent (a buffer handed back before the batch was built, or before the answer with
// the ids was written, would show up here as another request's bytes).
func TestConcurrentJSONAppendsKeepTheirValues(t *testing.T) {
	tw := newTestWorker(t, "", nil)
	tw.createStore("pool")
	const clients, appends, rows = 8, 12, 5
	want := map[string]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for c := range clients {
		wg.Go(func() {
			for a := range appends {
				recs := make([]rollout.AddRecord, rows)
				for r := range recs {
					id := fmt.Sprintf("c%d-a%d-r%d", c, a, r)
					// Values of different lengths per client, so a stale buffer
					// cannot happen to hold the same bytes.
					content := strings.Repeat(string(rune('a'+c)), 50+37*c+r) + id
					recs[r] = rollout.AddRecord{ID: id, RolloutID: fmt.Sprintf("c%d-a%d", c, a), Content: &content,
						PolicyVersion: strp("p-" + id), Role: []string{"user", "assistant", "tool"}[r%3]}
					mu.Lock()
					want[id] = content
					mu.Unlock()
				}
				resp := doHTTP(t, tw.url, "POST", "/api/v1/rollouts/pool/records", api.ContentTypeJSON, jsonBody(t, recs))
				var out api.AppendResponse
				if resp.status != http.StatusCreated {
					errs <- fmt.Errorf("append: %s", resp)
					return
				}
				if err := json.Unmarshal(resp.body, &out); err != nil {
					errs <- err
					return
				}
				for r, id := range out.IDs {
					if id != recs[r].ID {
						errs <- fmt.Errorf("answer id %d is %q, want %q", r, id, recs[r].ID)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got := tw.listAll("pool", "", 1000)
	if len(got) != len(want) {
		t.Fatalf("read %d records, appended %d", len(got), len(want))
	}
	for _, r := range got {
		if r.Content == nil || *r.Content != want[r.ID] {
			t.Fatalf("record %s: content %v, want %.40q...", r.ID, deref(r.Content), want[r.ID])
		}
		if r.PolicyVersion == nil || *r.PolicyVersion != "p-"+r.ID {
			t.Fatalf("record %s: policy_version %q", r.ID, deref(r.PolicyVersion))
		}
	}
}
