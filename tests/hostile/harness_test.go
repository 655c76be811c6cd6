package hostile

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/auth"
	"github.com/lancectx/lancectx/coord"
	"github.com/lancectx/lancectx/coord/etcdtest"
	"github.com/lancectx/lancectx/master"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/rollout/rollouttest"
	"github.com/lancectx/lancectx/wal"
	"github.com/lancectx/lancectx/worker"
)

// The tokens of the stack.
const (
	tokRW       = "rw-token-0123456789abcdef"
	tokRead     = "read-token-0123456789abcdef"
	tokWrite    = "write-token-0123456789abcdef"
	tokInternal = "internal-token-0123456789abcdef"
	tokWrong    = "wrong-token-0123456789abcdef"
)

const tokensJSON = `{"tokens":[` +
	`{"name":"trainer","token":"` + tokRW + `","scopes":["read","write"]},` +
	`{"name":"dashboard","token":"` + tokRead + `","scopes":["read"]},` +
	`{"name":"producer","token":"` + tokWrite + `","scopes":["write"]}],` +
	`"internal_token":"` + tokInternal + `"}`

// store is the rollout store (and experiment) the corpus aims at.
const store = "demo"

func testLogger() *slog.Logger {
	lvl := slog.LevelError + 4 // silent: the corpus makes the handlers log warnings on purpose
	if v := os.Getenv("LANCECTX_TEST_LOG"); v != "" {
		_ = lvl.UnmarshalText([]byte(v))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl}))
}

// stackOptions tune a stack for one test.
type stackOptions struct {
	// workerTimeout and masterTimeout are the request deadlines (0: 30 s).
	workerTimeout time.Duration
	masterTimeout time.Duration
	// headerTimeout is the server's ReadHeaderTimeout (0: 10 s, as the commands).
	headerTimeout time.Duration
	// log replaces the (silent) test logger.
	log *slog.Logger
}

// stack is `lancectx serve` in-process: a worker and a master over one FileStore data
// directory and an embedded etcd, behind the auth middleware, served over real HTTP
// the way the command serves them (the master's routes, the worker's for everything
// else, /metrics of the shared registry).
type stack struct {
	t       testing.TB
	dir     string
	data    objstore.Store
	worker  *worker.Server
	master  *master.Master
	etcd    *clientv3.Client
	prefix  string
	srv     *httptest.Server
	url     string
	reg     *prometheus.Registry
	limits  rollouttest.Limits
	tokens  *auth.Tokens
	taskID  string // a queued task
	authLog *slog.Logger
	closers []func()
}

func newStack(t testing.TB, opts stackOptions) *stack {
	t.Helper()
	ctx := context.Background()
	corpus, err := rollouttest.BadRequests()
	if err != nil {
		t.Fatal(err)
	}
	s := &stack{t: t, dir: t.TempDir(), reg: prometheus.NewRegistry(), limits: corpus.Limits,
		prefix: fmt.Sprintf("/hostile-%d", time.Now().UnixNano())}
	t.Cleanup(s.close)
	if s.data, err = objstore.NewFile(s.dir); err != nil {
		t.Fatal(err)
	}
	if opts.workerTimeout == 0 {
		opts.workerTimeout = 30 * time.Second
	}
	if opts.masterTimeout == 0 {
		opts.masterTimeout = 30 * time.Second
	}
	if opts.headerTimeout == 0 {
		opts.headerTimeout = 10 * time.Second
	}
	log := opts.log
	if log == nil {
		log = testLogger()
	}
	s.authLog = log
	s.worker, err = worker.New(ctx, worker.Config{DataDir: "file://" + s.dir, Store: s.data, WorkerID: "hostile",
		SealInterval: time.Hour, MergeAfterGenerations: -1, MaxBodyBytes: corpus.Limits.MaxBodyBytes,
		MaxRecords: corpus.Limits.MaxRecords, MaxPartBytes: corpus.Limits.MaxPartBytes, RequestTimeout: opts.workerTimeout,
		Registerer: s.reg, Gatherer: s.reg, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	s.closers = append(s.closers, func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.worker.Close(cctx); err != nil {
			t.Errorf("close worker: %v", err)
		}
	})

	ec := etcdtest.Start(t)
	cli, err := coord.Connect(ctx, coord.Config{Endpoints: ec.Endpoints(), Prefix: s.prefix, LeaseTTL: coord.MinLeaseTTL,
		DialTimeout: 30 * time.Second, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	s.etcd = cli.Etcd()
	set := master.DefaultSettings()
	// No loop runs: everything that changes the data directory or the queue comes from
	// a request, so a change after a refused request is the request's.
	set.StatsScanInterval, set.StatsRefreshInterval, set.MergeWALInterval = 0, 0, 0
	set.CompactionInterval, set.CleanupInterval, set.StatsMaintenanceEveryNScans, set.TaskConcurrency = 0, 0, 0, 0
	set.RequestTimeout = opts.masterTimeout
	s.master, err = master.New(ctx, master.Config{Settings: set, Data: s.data, DataURI: "file://" + s.dir, Coord: cli,
		InstanceID: "hostile-master", Registerer: s.reg, Gatherer: s.reg, WALMetrics: wal.NewMetrics(nil), Logger: log})
	if err != nil {
		_ = cli.Close()
		t.Fatal(err)
	}
	mctx, mcancel := context.WithCancel(ctx)
	s.master.Start(mctx)
	s.closers = append(s.closers, func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.master.Close(cctx); err != nil {
			t.Errorf("close master: %v", err)
		}
		mcancel()
		_ = cli.Close()
	})

	if s.tokens, err = auth.ParseTokens([]byte(tokensJSON), ""); err != nil {
		t.Fatal(err)
	}
	authn := s.auth()
	mux := http.NewServeMux()
	s.master.Mount(mux)
	mux.Handle("GET /api/v1/health", s.worker.Handler())
	mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	mux.Handle("/", s.worker.Handler())
	s.srv = httptest.NewUnstartedServer(authn.Wrap(mux))
	// As the commands configure their servers (cmd/lancectx newHTTPServer).
	s.srv.Config.ReadHeaderTimeout = opts.headerTimeout
	s.srv.Config.IdleTimeout = 2 * time.Minute
	s.srv.Config.MaxHeaderBytes = 1 << 20
	s.srv.Config.ErrorLog = slog.NewLogLogger(log.Handler(), slog.LevelWarn)
	s.srv.Start()
	s.url = s.srv.URL
	// The HTTP server closes first (LIFO would close it last).
	s.closers = append([]func(){s.srv.Close}, s.closers...)
	return s
}

// auth is the middleware of the stack's servers (one metric family on its registry).
func (s *stack) auth() *auth.Authenticator {
	return auth.New(auth.Options{Tokens: s.tokens, Registerer: s.reg, Logger: s.authLog})
}

// serveAlone serves h (the worker's or the master's own handler) behind the stack's
// middleware, as `lancectx worker` and `lancectx master` do; it returns the base URL.
func (s *stack) serveAlone(h http.Handler) string {
	srv := httptest.NewServer(s.auth().Wrap(h))
	s.closers = append([]func(){srv.Close}, s.closers...)
	return srv.URL
}

func (s *stack) close() {
	for _, c := range s.closers {
		c()
	}
	s.closers = nil
}

// seed gives the store base rows, a pending generation and unsealed rows, and the
// queue one task: a request that wrongly reached the WAL, a seal, a merge, the
// registry or the queue shows in the state.
func (s *stack) seed() {
	t := s.t
	t.Helper()
	s.must("POST", "/api/v1/rollouts", tokRW, `{"name":"`+store+`"}`, http.StatusCreated, nil)
	recs := `{"records":[` +
		`{"id":"seed-1","rollout_id":"r1","role":"user","content":"hello","dataset":"train","include_in_training":true},` +
		`{"id":"seed-2","rollout_id":"r1","role":"assistant","content":"world","reward":1.0,"dataset":"train"},` +
		`{"id":"seed-blob","rollout_id":"r2","role":"tool","binary_payload":"eHl6"}]}`
	s.must("POST", "/api/v1/rollouts/"+store+"/records?flush=true", tokRW, recs, http.StatusCreated, nil)
	s.must("POST", "/api/v1/internal/merge-wal/"+store, tokInternal, "", http.StatusOK, nil)
	s.must("POST", "/api/v1/rollouts/"+store+"/records?flush=true", tokRW,
		`{"records":[{"id":"seed-3","rollout_id":"r3","role":"user","content":"pending generation"}]}`, http.StatusCreated, nil)
	s.must("POST", "/api/v1/rollouts/"+store+"/records", tokRW,
		`{"records":[{"id":"seed-4","rollout_id":"r3","role":"user","content":"unsealed"}]}`, http.StatusCreated, nil)
	var task api.Task
	s.must("POST", "/api/v1/tasks", tokRW, `{"kind":"compact","target":"`+store+`"}`, http.StatusAccepted, &task)
	s.taskID = task.ID
}

// do sends one request with a bearer token (none when tok is empty).
func (s *stack) do(method, target, tok, contentType string, body []byte) (*http.Response, []byte) {
	s.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, s.url+target, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, b
}

func (s *stack) must(method, target, tok, body string, status int, out any) {
	s.t.Helper()
	var b []byte
	ct := ""
	if body != "" {
		b, ct = []byte(body), api.ContentTypeJSON
	}
	resp, got := s.do(method, target, tok, ct, b)
	if resp.StatusCode != status {
		s.t.Fatalf("%s %s: %d, want %d: %s", method, target, resp.StatusCode, status, got)
	}
	if out != nil {
		if err := json.Unmarshal(got, out); err != nil {
			s.t.Fatalf("%s %s: decode %T: %v", method, target, out, err)
		}
	}
}

// state is every object of the data directory (with a digest of its content) and
// every key of the deployment's etcd prefix but the leases' (with its value): what
// "the request changed nothing" is checked against.
func (s *stack) state() map[string]string {
	s.t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(s.dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(s.dir, p)
		sum := sha256.Sum256(b)
		out["data/"+filepath.ToSlash(rel)] = hex.EncodeToString(sum[:8])
		return nil
	})
	if err != nil {
		s.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := s.etcd.Get(ctx, s.prefix+"/", clientv3.WithPrefix())
	if err != nil {
		s.t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		k := strings.TrimPrefix(string(kv.Key), s.prefix)
		if volatileKey(k) {
			continue
		}
		sum := sha256.Sum256(kv.Value)
		out["etcd"+k] = hex.EncodeToString(sum[:8])
	}
	return out
}

// volatileKey: the election and worker-registry keys belong to the processes'
// sessions, not to requests.
func volatileKey(k string) bool {
	return strings.HasPrefix(k, "/election/") || strings.HasPrefix(k, "/workers/")
}

func diffState(before, after map[string]string) string {
	var d []string
	for k, v := range after {
		if bv, ok := before[k]; !ok {
			d = append(d, "+"+k)
		} else if bv != v {
			d = append(d, "~"+k)
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			d = append(d, "-"+k)
		}
	}
	sort.Strings(d)
	return strings.Join(d, " ")
}
