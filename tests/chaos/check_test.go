//go:build chaos

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/lancectx/lancectx/internal/oracle"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/wal"
)

// finalMerges seals and merges everything: each worker flushes and merges its own
// shard of every dataset (which also replays what a killed incarnation left in its
// WAL), then a master runs optimize (merge_wal -> compact -> cleanup) on each.
func (s *suite) finalMerges(ctx context.Context) {
	t0 := time.Now()
	for _, w := range s.c.workers {
		for _, ds := range s.datasets {
			if err := s.mergeOwnShard(ctx, w, ds); err != nil {
				s.failf("final merge-wal of %s on %s: %v", ds, w.id, err)
			}
		}
	}
	t1 := time.Now()
	var wg sync.WaitGroup
	for _, ds := range s.datasets {
		wg.Go(func() {
			if err := s.optimize(ctx, ds); err != nil {
				s.failf("final optimize of %s: %v", ds, err)
			}
		})
	}
	wg.Wait()
	s.t.Logf("final merges: every shard flushed and merged by its worker in %s, optimize chains done in %s",
		t1.Sub(t0).Round(time.Millisecond), time.Since(t1).Round(time.Millisecond))
}

func (s *suite) mergeOwnShard(ctx context.Context, w *node, ds string) error {
	var last string
	for attempt := 0; attempt < 60; attempt++ {
		status, body, err := s.post(ctx, w.url+"/api/v1/internal/merge-wal/"+ds+"?flush=true", nil, 60*time.Second)
		switch {
		case err != nil:
			last = err.Error()
		case status == http.StatusOK:
			var mr struct {
				Pending int `json:"pending"`
			}
			if err := json.Unmarshal(body, &mr); err != nil {
				return fmt.Errorf("merge-wal answer %.300s: %w", body, err)
			}
			if mr.Pending == 0 {
				return nil
			}
			last = fmt.Sprintf("%d generations pending", mr.Pending)
			continue
		case status >= 500 || status == http.StatusTooManyRequests:
			last = fmt.Sprintf("%d %.300s", status, body)
		default:
			return fmt.Errorf("merge-wal: %d %.300s", status, body)
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("pending generations left after 60 merges: %s", last)
}

// optimize asks a master for the optimize chain of ds and waits until its tasks are
// done; a chain that failed (an injected fault that outlived the retries) is asked
// for again, a few times.
func (s *suite) optimize(ctx context.Context, ds string) error {
	var last error
	for round := 0; round < 5; round++ {
		m := s.c.masters[round%len(s.c.masters)]
		status, body, err := s.post(ctx, m.url+"/api/v1/experiments/"+ds+"/optimize", nil, 15*time.Second)
		if err != nil || status != http.StatusAccepted {
			last = fmt.Errorf("POST optimize on %s: %v %d %.300s", m.id, err, status, body)
			time.Sleep(time.Second)
			continue
		}
		var chain struct {
			Chain []string `json:"chain"` // the chain's task ids, in order
		}
		if err := json.Unmarshal(body, &chain); err != nil || len(chain.Chain) != 3 {
			return fmt.Errorf("optimize answer %.300s: %v", body, err)
		}
		var failed []string
		for _, id := range chain.Chain {
			final, err := s.waitTask(ctx, m.url, id, 3*time.Minute)
			if err != nil {
				return err
			}
			if final.State != "done" {
				failed = append(failed, fmt.Sprintf("%s %s: %s %s", final.Kind, final.ID, final.State, final.Error))
			}
		}
		if len(failed) == 0 {
			return nil
		}
		last = fmt.Errorf("optimize round %d: %s", round, strings.Join(failed, "; "))
		s.t.Logf("%v (asking again)", last)
	}
	return last
}

func (s *suite) waitTask(ctx context.Context, base, id string, within time.Duration) (task, error) {
	deadline := time.Now().Add(within)
	var tk task
	for {
		err := s.getJSON(ctx, base+"/api/v1/tasks/"+id, &tk)
		if err == nil && (tk.State == "done" || tk.State == "failed") {
			return tk, nil
		}
		if time.Now().After(deadline) {
			return tk, fmt.Errorf("task %s (%s %s) not finished within %s: state %s, err %v", id, tk.Kind, tk.Target, within, tk.State, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func (s *suite) post(ctx context.Context, url string, body []byte, timeout time.Duration) (int, []byte, error) {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, url, strings.NewReader(string(body)))
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// listIDs reads every record id of ds through a worker's API, page by page.
func (s *suite) listIDs(ctx context.Context, base, ds string) (map[string]int, error) {
	out := map[string]int{}
	const limit = 10000
	for offset := 0; ; offset += limit {
		var page struct {
			Records []struct {
				ID string `json:"id"`
			} `json:"records"`
			HasMore bool `json:"has_more"`
		}
		url := fmt.Sprintf("%s/api/v1/rollouts/%s/records?limit=%d&offset=%d", base, ds, limit, offset)
		var err error
		for attempt := 0; attempt < 10; attempt++ {
			if err = s.getJSON(ctx, url, &page); err == nil {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		if err != nil {
			return nil, err
		}
		for _, r := range page.Records {
			out[r.ID]++
		}
		if !page.HasMore {
			return out, nil
		}
	}
}

// checkRows compares what the clients acked with what the system holds: through
// each worker's API, in the base table by wal.Audit, and read by LanceDB.
func (s *suite) checkRows(ctx context.Context) {
	l := s.load.ledger
	data, err := objstore.NewFile(s.c.dataDir)
	if err != nil {
		s.failf("open data dir: %v", err)
		return
	}
	defer data.Close()
	orc := oracle.New(s.t)
	orc.Timeout = 5 * time.Minute
	for _, ds := range s.datasets {
		l.mu.Lock()
		acked := l.acked[ds]
		sent := l.sent[ds]
		l.mu.Unlock()
		want := len(acked)
		compare := func(where string, got map[string]int) {
			var dups, missing, unknown []string
			nd := 0
			for id, n := range got {
				if n > 1 {
					dups = append(dups, fmt.Sprintf("%s x%d", id, n))
					nd += n - 1
				}
				if !sent[id] {
					unknown = append(unknown, id)
				}
			}
			for id := range acked {
				if got[id] == 0 {
					missing = append(missing, id)
				}
			}
			s.fig.mu.Lock()
			s.fig.duplicates[where+"/"+ds] = nd
			s.fig.mu.Unlock()
			if len(dups)+len(missing)+len(unknown) > 0 || len(got) != want {
				sort.Strings(dups)
				sort.Strings(missing)
				s.failf("%s, %s: %d distinct ids (want %d acked); %d duplicated %v; %d acked ids missing %v; %d never sent %v",
					where, ds, len(got), want, len(dups), head(dups), len(missing), head(missing), len(unknown), head(unknown))
			}
		}
		for _, w := range s.c.workers {
			got, err := s.listIDs(ctx, w.url, ds)
			if err != nil {
				s.failf("list %s on %s: %v", ds, w.id, err)
				continue
			}
			compare("api-"+w.id, got)
		}
		rep, err := wal.Audit(ctx, objstore.Prefixed(data, ds+".rollout.lance"), "id")
		if err != nil {
			s.failf("audit %s: %v", ds, err)
		} else {
			s.fig.mu.Lock()
			s.fig.duplicates["audit/"+ds] = int(rep.Duplicates)
			s.fig.mu.Unlock()
			if rep.Duplicates != 0 || rep.BaseRows != int64(want) || rep.Pending.Generations != 0 {
				s.failf("audit %s: base version %d holds %d rows (want %d), %d duplicates %v, %d pending generations",
					ds, rep.BaseVersion, rep.BaseRows, want, rep.Duplicates, head(rep.DuplicateKeys), rep.Pending.Generations)
			}
		}
		path := filepath.Join(s.c.dataDir, ds+".rollout.lance")
		n, err := orc.Count(path, "", 0)
		if err != nil {
			s.failf("LanceDB count %s: %v", ds, err)
		} else if n != int64(want) {
			s.failf("LanceDB counts %d rows in %s, want %d", n, ds, want)
		}
		rows, err := orc.Read(path, oracle.ReadOptions{Columns: []string{"id"}})
		if err != nil {
			s.failf("LanceDB read %s: %v", ds, err)
			continue
		}
		got := map[string]int{}
		for _, line := range rows {
			var r struct {
				ID string `json:"id"`
			}
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				s.failf("LanceDB row %q: %v", line, err)
				break
			}
			got[r.ID]++
		}
		compare("lancedb", got)
		s.t.Logf("%s: %d acked ids, each once through both workers' API, in the base table (version %d) and read by LanceDB",
			ds, want, rep.BaseVersion)
	}
	s.garbage(ctx, data)
}

func head(xs []string) []string {
	if len(xs) > 10 {
		return xs[:10]
	}
	return xs
}

// overdueGrace is how long a running task may sit past its deadline before it counts
// as stuck: its executor's lease must expire and the leader's recoverer (every 2 s)
// must see it.
const overdueGrace = leaseTTL + 2*time.Second + 3*time.Second

// checkTasks asserts that no task is running past its deadline (plus the recovery
// grace) and reports the queue's states.
func (s *suite) checkTasks(ctx context.Context) {
	tasks, err := s.listTasks(ctx, s.c.masters[0].url, "")
	if err != nil {
		s.failf("list tasks: %v", err)
		return
	}
	now := time.Now()
	counts := map[string]int{}
	for _, tk := range tasks {
		counts[tk.Kind+"/"+tk.State]++
		if tk.State == "running" && !tk.Deadline.IsZero() && now.Sub(tk.Deadline) > overdueGrace {
			s.failf("task %s (%s %s) is running %s past its deadline, claimed by %s", tk.ID, tk.Kind, tk.Target,
				now.Sub(tk.Deadline).Round(time.Millisecond), tk.ClaimedBy)
		}
	}
	var parts []string
	for k, n := range counts {
		parts = append(parts, fmt.Sprintf("%s=%d", k, n))
	}
	sort.Strings(parts)
	s.fig.mu.Lock()
	s.fig.usage = append(s.fig.usage, fmt.Sprintf("tasks in the queue history (%d): %s", len(tasks), strings.Join(parts, " ")))
	s.fig.mu.Unlock()
}

// garbage reports, per dataset, the data files no retained version references and
// the temp files of uploads cut off by a kill, as they are after the final cleanup.
// They cost storage, not correctness, so they are reported rather than asserted.
func (s *suite) garbage(ctx context.Context, data objstore.Store) {
	for _, ds := range s.datasets {
		d, err := lance.OpenStore(ctx, objstore.Prefixed(data, ds+".rollout.lance"))
		if err != nil {
			s.failf("open %s: %v", ds, err)
			continue
		}
		vs, err := d.Versions(ctx)
		if err != nil {
			s.failf("versions of %s: %v", ds, err)
			continue
		}
		ref := map[string]bool{}
		for _, v := range vs {
			dv, err := d.Checkout(ctx, v.Version)
			if err != nil {
				continue // removed by a cleanup meanwhile
			}
			for _, f := range dv.Fragments() {
				for _, df := range f.GetFiles() {
					ref[df.GetPath()] = true
				}
			}
		}
		ents, err := os.ReadDir(filepath.Join(s.c.dataDir, ds+".rollout.lance", "data"))
		if err != nil {
			s.failf("list data of %s: %v", ds, err)
			continue
		}
		var unref, tmp int
		var bytes int64
		for _, e := range ents {
			switch {
			case strings.HasPrefix(e.Name(), ".tmp"):
				tmp++
			case !ref[e.Name()]:
				unref++
				if info, err := e.Info(); err == nil {
					bytes += info.Size()
				}
			}
		}
		s.fig.mu.Lock()
		s.fig.usage = append(s.fig.usage, fmt.Sprintf("storage after the final cleanup, %s: %d versions kept referencing %d data files; %d unreferenced data files (%.1f MiB) and %d upload temp files left in data/",
			ds, len(vs), len(ref), unref, float64(bytes)/(1<<20), tmp))
		s.fig.mu.Unlock()
	}
}
