package worker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/internal/oracle"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/rollout"
	"github.com/lancectx/lancectx/wal"
)

// ciCrashIterations keeps the default run short; the acceptance run is
// -crash-iterations=50 (or LANCECTX_CRASH_ITERATIONS=50).
const ciCrashIterations = 15

func crashIterationCount(t *testing.T) int {
	if *crashIterations > 0 {
		return *crashIterations
	}
	if v := os.Getenv("LANCECTX_CRASH_ITERATIONS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("LANCECTX_CRASH_ITERATIONS=%q", v)
		}
		return n
	}
	return ciCrashIterations
}

// workerProc is a `lancectx worker` subprocess.
type workerProc struct {
	cmd  *exec.Cmd
	url  string
	logs *tailBuffer
	done chan error
	// exited is closed once the process is reaped.
	exited chan struct{}
}

// tailBuffer keeps the last lines a process logged, for failure messages.
type tailBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (b *tailBuffer) add(l string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(b.lines, l)
	if len(b.lines) > 40 {
		b.lines = b.lines[len(b.lines)-40:]
	}
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.lines, "\n")
}

// startWorkerProc runs the worker binary on dir and waits until it listens.
func startWorkerProc(t *testing.T, bin, dir string, args ...string) *workerProc {
	t.Helper()
	all := append([]string{"worker", "--data-dir", "file://" + dir, "--listen", "127.0.0.1:0", "--worker-id", "crash-worker",
		"--shutdown-timeout", "20s"}, args...)
	cmd := exec.Command(bin, all...)
	cmd.Env = os.Environ()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &workerProc{cmd: cmd, logs: &tailBuffer{}, done: make(chan error, 1), exited: make(chan struct{})}
	// A test that fails with the worker running must not leave it writing into the
	// temporary directory being removed.
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.exited
	})
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			p.logs.add(line)
			var m struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal([]byte(line), &m) == nil && m.Msg == "worker: listening" {
				addr <- m.Addr
			}
		}
		_, _ = io.Copy(io.Discard, stderr)
		p.done <- cmd.Wait()
		close(p.exited)
	}()
	select {
	case a := <-addr:
		p.url = "http://" + a
	case err := <-p.done:
		t.Fatalf("worker exited before listening: %v\n%s", err, p.logs)
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("worker did not listen within 30 s\n%s", p.logs)
	}
	return p
}

func (p *workerProc) kill9() {
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop sends SIGTERM and waits for a clean exit.
func (p *workerProc) stop(t *testing.T) {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("worker exited with %v after SIGTERM\n%s", err, p.logs)
		}
	case <-time.After(60 * time.Second):
		_ = p.cmd.Process.Kill()
		t.Fatalf("worker did not stop within 60 s of SIGTERM\n%s", p.logs)
	}
}

// crashKind is what the crash test does differently per store kind.
type crashKind struct {
	kind       string // dataset suffix
	createPath string
	createBody string
	appendPath string // without the query
	// mergePath is the merge route, without the query; "" when the kind has none
	// (datagen): the background loop merges under load and the final merge runs in
	// process, on the stopped worker's shard.
	mergePath string
	getPath   string // record path prefix, the id appended
	// flushQuery is the query of a flushing append ("" when every append seals).
	flushQuery string
	// keyColumn is the base table's key column ("id" when empty).
	keyColumn  string
	appendBody func(iter, c, n int, ids []string, content []string) []byte
	listIDs    func(t *testing.T, base string) []string
}

var rolloutCrash = crashKind{
	kind:       "rollout",
	createPath: "/api/v1/rollouts", createBody: `{"name":"crash"}`,
	appendPath: "/api/v1/rollouts/crash/records", mergePath: "/api/v1/internal/merge-wal/crash",
	getPath: "/api/v1/rollouts/crash/records/", flushQuery: "?flush=true",
	appendBody: func(iter, c, n int, ids, content []string) []byte {
		batch := make([]rollout.AddRecord, len(ids))
		for k, id := range ids {
			batch[k] = rollout.AddRecord{ID: id, RolloutID: fmt.Sprintf("r%d", c), SequenceOrder: int32(n), Content: strp(content[k])}
		}
		b, _ := json.Marshal(map[string]any{"records": batch})
		return b
	},
	listIDs: func(t *testing.T, base string) []string {
		var out []string
		for _, r := range listAllHTTP(t, base, "crash", "", 10_000) {
			out = append(out, r.ID)
		}
		return out
	},
}

var genericCrash = crashKind{
	kind:       "generic",
	createPath: "/api/v1/generic",
	createBody: `{"name":"crash","schema":{"columns":[{"name":"id","type":"string"},{"name":"writer","type":"int32","nullable":false},` +
		`{"name":"seq","type":"int64"},{"name":"text","type":"string","large":true},{"name":"emb","type":"fixed_size_list","size":4}]}}`,
	appendPath: "/api/v1/generic/crash/rows", mergePath: "/api/v1/generic/crash/merge-wal",
	getPath: "/api/v1/generic/crash/rows/", flushQuery: "?flush=true",
	appendBody: func(iter, c, n int, ids, content []string) []byte {
		rows := make([]map[string]any, len(ids))
		for k, id := range ids {
			rows[k] = map[string]any{"id": id, "writer": c, "seq": n, "text": content[k], "emb": []float32{1, 2, 3, float32(k)}}
		}
		b, _ := json.Marshal(map[string]any{"rows": rows})
		return b
	},
	listIDs: func(t *testing.T, base string) []string {
		return rowIDs(t, listRowsHTTP(t, base, "crash", "", 10_000))
	},
}

// datagenCrash appends FIELD_APPEND events with blob values: one item per writer
// and iteration, every item under one root (so that one root dump lists the log);
// the ids are the event ids, item_seq counts the writer's events.
var datagenCrash = crashKind{
	kind:       "datagen",
	createPath: "/api/v1/datagen", createBody: `{"name":"crash"}`,
	appendPath: "/api/v1/datagen/crash/events",
	getPath:    "/api/v1/datagen/crash/blobs/",
	keyColumn:  "event_id",
	appendBody: func(iter, c, n int, ids, content []string) []byte {
		evs := make([]map[string]any, len(ids))
		for k, id := range ids {
			evs[k] = map[string]any{"event_id": id, "item_id": fmt.Sprintf("i%02d-c%d", iter, c), "root_item_id": "crashroot",
				"item_seq": n*len(ids) + k, "checkpoint_id": fmt.Sprintf("cp-%d", n), "event_type": "FIELD_APPEND",
				"step_name": "gen", "step_kind": "leaf", "step_index": 0, "attempt": 0, "run_id": "run-1", "writer_epoch": "w1",
				"field_name": "out", "field_type": "bytes", "codec_version": 1, "schema_version": 1,
				"value": map[string]any{"kind": "blob", "bytes": []byte(content[k]), "size": len(content[k])}}
		}
		b, _ := json.Marshal(map[string]any{"events": evs})
		return b
	},
	listIDs: func(t *testing.T, base string) []string {
		var out api.ListDatagenEventsResponse
		doHTTP(t, base, "GET", "/api/v1/datagen/crash/roots/crashroot/events", "", nil).want(t, http.StatusOK, &out)
		ids := make([]string, len(out.Events))
		for i, ev := range out.Events {
			ids[i] = ev.EventID
		}
		return ids
	},
}

// TestCrashKill9 runs crashKill9 on a rollout store.
func TestCrashKill9(t *testing.T) { crashKill9(t, rolloutCrash) }

// TestCrashKill9Generic runs crashKill9 on a generic store.
func TestCrashKill9Generic(t *testing.T) { crashKill9(t, genericCrash) }

// TestCrashKill9Datagen runs crashKill9 on a datagen store.
func TestCrashKill9Datagen(t *testing.T) { crashKill9(t, datagenCrash) }

// crashKill9 runs `lancectx worker` as a subprocess on a FileStore data dir and
// kills it with SIGKILL at random moments while clients append batches of unique ids
// (some with ?flush=true, some repeated as client retries) and merges run (through
// the merge-wal route and the background loop), with tiny seal thresholds so seals
// happen all the time; then it restarts the worker and goes on. Afterwards every
// acknowledged id is readable exactly once through the API, and after a final
// merge the base table, read by LanceDB, holds exactly the ids the API lists.
func crashKill9(t *testing.T, ck crashKind) {
	if ck.keyColumn == "" {
		ck.keyColumn = "id"
	}
	bin := lancectxBinary(t)
	iterations := crashIterationCount(t)
	dir := t.TempDir()
	args := []string{"--wal-seal-bytes", "24KiB", "--wal-seal-interval", "40ms", "--merge-after-generations", "4",
		"--merge-interval", "30ms", "--merge-max-generations", "5", "--log-level", "info"}
	rng := rand.New(rand.NewPCG(7, uint64(time.Now().UnixNano())))
	acked := map[string]bool{}
	var mu sync.Mutex
	sent := map[string]bool{}
	start := time.Now()
	for iter := range iterations {
		p := startWorkerProc(t, bin, dir, args...)
		if iter == 0 {
			doHTTP(t, p.url, "POST", ck.createPath, api.ContentTypeJSON, []byte(ck.createBody)).want(t, http.StatusCreated, nil)
		}
		client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		var acks, merges int
		for c := range 4 {
			seed := rng.Uint64()
			wg.Go(func() {
				r := rand.New(rand.NewPCG(seed, uint64(c)))
				type sentBatch struct {
					ids  []string
					body []byte
				}
				var mine []sentBatch
				for n := 0; ctx.Err() == nil; n++ {
					ids, content := make([]string, 5), make([]string, 5)
					for k := range ids {
						ids[k] = fmt.Sprintf("i%02d-c%d-%04d-%d", iter, c, n, k)
						content[k] = strings.Repeat("x", 200+r.IntN(800))
					}
					batch := sentBatch{ids, ck.appendBody(iter, c, n, ids, content)}
					if len(mine) > 0 && r.IntN(6) == 0 {
						batch = mine[r.IntN(len(mine))] // a client retry of an acked batch
					}
					path := ck.appendPath
					if r.IntN(8) == 0 {
						path += ck.flushQuery
					}
					body := batch.body
					mu.Lock()
					for _, id := range batch.ids {
						sent[id] = true
					}
					mu.Unlock()
					req, _ := http.NewRequestWithContext(ctx, "POST", p.url+path, bytes.NewReader(body))
					req.Header.Set("Content-Type", api.ContentTypeJSON)
					resp, err := client.Do(req)
					if err != nil {
						continue // killed, or backpressure below
					}
					var ar struct {
						Count   int  `json:"count"`
						Durable bool `json:"durable"`
					}
					raw, rerr := io.ReadAll(resp.Body)
					resp.Body.Close()
					derr := errors.Join(rerr, json.Unmarshal(raw, &ar))
					if resp.StatusCode != http.StatusCreated || derr != nil {
						if resp.StatusCode != http.StatusServiceUnavailable && derr == nil && ctx.Err() == nil {
							t.Errorf("append answered %d: %s", resp.StatusCode, raw)
						}
						continue
					}
					if ar.Count != len(batch.ids) || !ar.Durable {
						t.Errorf("append of %d rows answered count %d durable %t", len(batch.ids), ar.Count, ar.Durable)
					}
					mu.Lock()
					for _, id := range batch.ids {
						acked[id] = true
					}
					acks++
					mu.Unlock()
					mine = append(mine, batch)
				}
			})
		}
		mseed := rng.Uint64()
		wg.Go(func() {
			r := rand.New(rand.NewPCG(mseed, 99))
			for ctx.Err() == nil && ck.mergePath != "" {
				// Pacing, not synchronisation: merges at random moments are the load.
				time.Sleep(time.Duration(30+r.IntN(120)) * time.Millisecond)
				req, _ := http.NewRequestWithContext(ctx, "POST", p.url+ck.mergePath, nil)
				if resp, err := client.Do(req); err == nil {
					resp.Body.Close()
					mu.Lock()
					merges++
					mu.Unlock()
				}
			}
		})
		// The behaviour under test: a kill at a random moment of the load.
		time.Sleep(time.Duration(150+rng.IntN(550)) * time.Millisecond)
		p.kill9()
		cancel()
		wg.Wait()
		client.CloseIdleConnections()
		t.Logf("iteration %d: %d acked appends, %d merge requests before SIGKILL", iter, acks, merges)
	}
	t.Logf("%d kills in %s; %d ids acked", iterations, time.Since(start).Round(time.Millisecond), len(acked))

	// Recovery: every acked id exactly once through the API.
	p := startWorkerProc(t, bin, dir, args...)
	checkListedAt := func(stage, base string) map[string]bool {
		listed := map[string]bool{}
		for _, id := range ck.listIDs(t, base) {
			if listed[id] {
				t.Fatalf("%s: id %s listed twice", stage, id)
			}
			if !sent[id] {
				t.Fatalf("%s: id %s was never sent", stage, id)
			}
			listed[id] = true
		}
		for id := range acked {
			if !listed[id] {
				t.Fatalf("%s: acked id %s is lost (%d acked, %d listed)\n%s", stage, id, len(acked), len(listed), p.logs)
			}
		}
		return listed
	}
	checkListed := func(stage string) map[string]bool { return checkListedAt(stage, p.url) }
	checkListed("after restart")
	n := 0
	for id := range acked {
		if n++; n > 20 {
			break
		}
		doHTTP(t, p.url, "GET", ck.getPath+id, "", nil).want(t, http.StatusOK, nil)
	}
	var listed map[string]bool
	if ck.mergePath != "" {
		for {
			var mw api.MergeWALResponse
			doHTTP(t, p.url, "POST", ck.mergePath+"?flush=true", "", nil).want(t, http.StatusOK, &mw)
			if mw.Pending == 0 {
				break
			}
		}
		listed = checkListed("after the final merge")
	}
	p.stop(t)

	// The graceful stop sealed the shard: no WAL entry is left to replay.
	// (.tmp-put-* files are FileStore uploads cut off by a SIGKILL; maintenance sweeps
	// them with FileStore.SweepTemp.)
	entries, _ := filepath.Glob(filepath.Join(dir, "crash."+ck.kind+".lance", "_wal", "*", "entries", "[0-9]*"))
	if len(entries) != 0 {
		ms, _ := filepath.Glob(filepath.Join(dir, "crash."+ck.kind+".lance", "_wal", "*", "manifest", "[0-9]*"))
		sort.Strings(ms)
		m, _ := os.ReadFile(ms[0]) // the newest version sorts first
		t.Fatalf("%d WAL entries left after a graceful stop: %v\nnewest manifest %s\nworker log tail:\n%s", len(entries), entries, m, p.logs)
	}
	if ck.mergePath == "" {
		// No merge route: the same worker (its id owns the shard) merges in process.
		tw := newTestWorker(t, dir, func(c *Config) { c.WorkerID = "crash-worker" })
		k, err := tw.srv.kindNamed(ck.kind)
		if err != nil {
			t.Fatal(err)
		}
		for {
			mw, err := tw.srv.mergeWAL(t.Context(), k, "crash", true)
			if err != nil {
				t.Fatal(err)
			}
			if mw.Pending == 0 {
				break
			}
		}
		listed = checkListedAt("after the final merge", tw.url)
		tw.close()
	}
	data, err := objstore.NewFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := wal.Audit(t.Context(), objstore.Prefixed(data, "crash."+ck.kind+".lance"), ck.keyColumn)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Duplicates != 0 || rep.Pending.Generations != 0 || rep.BaseRows != int64(len(listed)) {
		t.Fatalf("audit: %+v, API lists %d", rep, len(listed))
	}
	rows, err := oracle.New(t).Read(filepath.Join(dir, "crash."+ck.kind+".lance"), oracle.ReadOptions{Columns: []string{ck.keyColumn}})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, l := range rows {
		var r map[string]any
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		id, ok := r[ck.keyColumn].(string)
		if !ok || seen[id] || !listed[id] {
			t.Fatalf("LanceDB reads id %v twice or unlisted", r[ck.keyColumn])
		}
		seen[id] = true
	}
	if len(seen) != len(listed) {
		t.Fatalf("LanceDB reads %d rows, the API lists %d", len(seen), len(listed))
	}
	t.Logf("%d ids acked, %d rows in the base table (acked or durable-but-unacked), LanceDB agrees", len(acked), len(listed))
}
