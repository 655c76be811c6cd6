package adopt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lancectx/lancectx/internal/oracle"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/worker"
)

func TestMain(m *testing.M) {
	code := m.Run()
	templates.mu.Lock()
	for _, dir := range templates.dirs {
		_ = os.RemoveAll(filepath.Dir(dir))
	}
	templates.mu.Unlock()
	os.Exit(code)
}

func quietLogger() *slog.Logger {
	if os.Getenv("LANCECTX_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// fixtureSpec is fixture.json of lancecontext-fixture.mjs.
type fixtureSpec struct {
	StorageVersion string `json:"storage_version"`
	Generations    int    `json:"generations"`
	Stores         []struct {
		Name       string            `json:"name"`
		Kind       string            `json:"kind"`
		Registered bool              `json:"registered"`
		Pending    int               `json:"pending_generations"`
		BaseRows   int               `json:"base_rows"`
		Expected   map[string]string `json:"expected"`
	} `json:"stores"`
}

// templates caches one fixture per argument list: building one runs LanceDB (seconds);
// each test gets its own copy.
var templates struct {
	mu   sync.Mutex
	dirs map[string]string
}

func moduleRoot(t testing.TB) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the working directory")
		}
		dir = parent
	}
}

// buildFixture returns a fresh copy of the lance-context fixture built with args (e.g.
// "--storage-version", "2.0"). It fails (never skips) without node and LanceDB.
func buildFixture(t testing.TB, args ...string) (string, fixtureSpec) {
	t.Helper()
	key := strings.Join(args, " ")
	templates.mu.Lock()
	defer templates.mu.Unlock()
	if templates.dirs == nil {
		templates.dirs = map[string]string{}
	}
	src, ok := templates.dirs[key]
	if !ok {
		node, err := exec.LookPath("node")
		if err != nil {
			t.Fatalf("the fixture needs node (Node.js 20+) on PATH: %v", err)
		}
		interop := filepath.Join(moduleRoot(t), "tests", "interop")
		if _, err := os.Stat(filepath.Join(interop, "node_modules", "@lancedb", "lancedb")); err != nil {
			t.Fatalf("LanceDB not installed: run `npm ci --prefix tests/interop` (%v)", err)
		}
		root, err := os.MkdirTemp("", "lancecontext-fixture-")
		if err != nil {
			t.Fatal(err)
		}
		src = filepath.Join(root, "data")
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, node, append([]string{filepath.Join(interop, "lancecontext-fixture.mjs"), src}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			_ = os.RemoveAll(root)
			t.Fatalf("build the fixture: %v\n%s", err, out)
		}
		templates.dirs[key] = src
	}
	dst := filepath.Join(t.TempDir(), "data")
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	buf, err := os.ReadFile(filepath.Join(dst, "fixture.json"))
	if err != nil {
		t.Fatal(err)
	}
	var spec fixtureSpec
	if err := json.Unmarshal(buf, &spec); err != nil {
		t.Fatal(err)
	}
	return dst, spec
}

func openDir(t testing.TB, dir string) objstore.Store {
	t.Helper()
	st, err := objstore.NewFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// runAdopt runs an adoption of dir and returns its summary and reports by store name.
func runAdopt(t testing.TB, dir string, hook func(store, step string) error) (Summary, map[string]StoreReport) {
	t.Helper()
	reps := map[string]StoreReport{}
	sum, err := Run(t.Context(), Options{Data: openDir(t, dir), DataURI: "file://" + dir, Concurrency: 3, Logger: quietLogger(), Hook: hook,
		Report: func(r StoreReport) {
			if _, dup := reps[r.Kind+"/"+r.Name]; dup {
				t.Errorf("store %s/%s reported twice", r.Kind, r.Name)
			}
			reps[r.Kind+"/"+r.Name] = r
		}})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Found != len(reps) {
		t.Errorf("summary found %d stores, %d reported", sum.Found, len(reps))
	}
	return sum, reps
}

// checkLanceDB reads a store with LanceDB: every expected id exactly once, with its
// newest content, and nothing else.
func checkLanceDB(t testing.TB, o *oracle.Oracle, path string, expected map[string]string) {
	t.Helper()
	rows, err := o.Read(path, oracle.ReadOptions{Columns: []string{"id", "content"}})
	if err != nil {
		t.Fatalf("LanceDB read of %s: %v", filepath.Base(path), err)
	}
	if err := sameRows(rows, expected); err != nil {
		t.Errorf("LanceDB read of %s: %v", filepath.Base(path), err)
	}
}

// sameRows compares JSON rows {"id","content"} with the expected id -> content.
func sameRows(rows []string, expected map[string]string) error {
	seen := map[string]int{}
	var errs []error
	for _, line := range rows {
		var r struct {
			ID      string  `json:"id"`
			Content *string `json:"content"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return fmt.Errorf("row %s: %w", line, err)
		}
		seen[r.ID]++
		want, ok := expected[r.ID]
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("unexpected row %s", line))
		case r.Content == nil || *r.Content != want:
			errs = append(errs, fmt.Errorf("row %s: content %v, want %q", r.ID, deref(r.Content), want))
		}
	}
	for id, n := range seen {
		if n > 1 {
			errs = append(errs, fmt.Errorf("id %s appears %d times", id, n))
		}
	}
	for id := range expected {
		if seen[id] == 0 {
			errs = append(errs, fmt.Errorf("id %s is missing", id))
		}
	}
	if len(errs) > 5 {
		errs = append(errs[:5], fmt.Errorf("... and %d more", len(errs)-5))
	}
	return errors.Join(errs...)
}

func deref(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}

// testWorker is the real worker served over HTTP on the data directory.
type testWorker struct {
	srv  *worker.Server
	url  string
	stop func()
}

func startWorker(t testing.TB, dir string) *testWorker {
	t.Helper()
	st := openDir(t, dir)
	s, err := worker.New(context.Background(), worker.Config{DataDir: "file://" + dir, Store: st, WorkerID: "adopt-test",
		SealInterval: time.Hour, MergeAfterGenerations: -1, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s.Handler())
	var once sync.Once
	stop := func() {
		once.Do(func() {
			hs.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := s.Close(ctx); err != nil {
				t.Errorf("close the worker: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return &testWorker{srv: s, url: hs.URL, stop: stop}
}

// writeWALEntry writes a reference WAL entry (an Arrow IPC stream) with rows rows; 0
// rows is a fence sentinel.
func writeWALEntry(t testing.TB, path string, rows int) {
	t.Helper()
	sch := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String}},
		func() *arrow.Metadata { m := arrow.NewMetadata([]string{"writer_epoch"}, []string{"1"}); return &m }())
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, ipc.WithSchema(sch))
	if rows > 0 {
		b := array.NewStringBuilder(memory.DefaultAllocator)
		for i := range rows {
			b.Append(fmt.Sprintf("unflushed-%d", i))
		}
		col := b.NewArray()
		rec := array.NewRecordBatch(sch, []arrow.Array{col}, int64(rows))
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		col.Release()
		b.Release()
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (w *testWorker) do(t testing.TB, method, path, body string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, w.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// listRecords lists every record of a store through the API, as JSON rows {"id","content"}.
func (w *testWorker) listRecords(t testing.TB, name string) []string {
	t.Helper()
	status, body := w.do(t, "GET", "/api/v1/rollouts/"+name+"/records", "")
	if status != http.StatusOK {
		t.Fatalf("list %s: %d %s", name, status, body)
	}
	var out struct {
		Records []struct {
			ID      string  `json:"id"`
			Content *string `json:"content"`
		} `json:"records"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatal(err)
	}
	rows := make([]string, len(out.Records))
	for i, r := range out.Records {
		b, _ := json.Marshal(map[string]any{"id": r.ID, "content": r.Content})
		rows[i] = string(b)
	}
	return rows
}
