package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/auth"
	"github.com/lancectx/lancectx/coord"
	"github.com/lancectx/lancectx/master"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/objstore/provider"
	"github.com/lancectx/lancectx/ui"
	"github.com/lancectx/lancectx/wal"
	"github.com/lancectx/lancectx/worker"
)

// Defaults of `lancectx serve`, the laptop setup.
const (
	serveDefaultDataDir = "./lancectx-data"
	serveDefaultListen  = "127.0.0.1:3000"
	// serveMasterIDFile, in the embedded etcd's directory, keeps the master's id
	// across restarts: etcd locks that directory, so one process at a time has it.
	serveMasterIDFile = "lancectx-master-id"
)

type serveFlags struct {
	wf      workerFlags
	ctl     controlFlags
	etcdDir string
}

func newServeCmd(store *storeFlags) *cobra.Command {
	sf := &serveFlags{}
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run everything in one process: an embedded etcd, one master and one worker over --data-dir",
		Long: `Run the whole system in one process, the laptop default: an embedded single-node etcd (in
--etcd-dir), one master and one worker over --data-dir, one HTTP server on --listen serving the
worker API (/api/v1/rollouts...), the master API (/api/v1/experiments, /api/v1/tasks,
/api/v1/cluster), a combined /api/v1/health and /metrics. With --etcd-endpoints (ETCD_ENDPOINTS) it
joins that etcd instead of starting one. Every worker and master flag applies; the stats scan runs
every --stats-scan-interval-secs (default 300: lower it to see new experiments sooner).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return sf.run(cmd.Context(), store) },
	}
	f := cmd.Flags()
	sf.wf.register(f)
	// serve's own defaults for the shared flags (the environment still wins).
	sf.wf.dataDir = envOr("LANCECTX_DATA_DIR", serveDefaultDataDir)
	sf.wf.listen = envOr("LANCECTX_LISTEN", serveDefaultListen)
	sf.wf.workerID = envOr("LANCECTX_WORKER_ID", envOr("INSTANCE_ID", "serve"))
	for name, def := range map[string]string{"data-dir": sf.wf.dataDir, "listen": sf.wf.listen, "worker-id": sf.wf.workerID} {
		if fl := f.Lookup(name); fl != nil {
			fl.DefValue = def
		}
	}
	sf.ctl.register(f)
	f.StringVar(&sf.etcdDir, "etcd-dir", envOr("LANCECTX_ETCD_DIR", ""),
		"data directory of the embedded etcd (env LANCECTX_ETCD_DIR; default <data-dir>/_etcd for a local data dir, ./lancectx-etcd otherwise)")
	return cmd
}

func (sf *serveFlags) run(ctx context.Context, store *storeFlags) error {
	if err := sf.wf.validate(); err != nil {
		return &exitError{code: 2, err: err}
	}
	if err := sf.ctl.resolve(false); err != nil {
		return &exitError{code: 2, err: err}
	}
	log := slog.Default()
	reg := newProcessRegistry()
	sec, err := sf.wf.sec.load(log, reg)
	if err != nil {
		return err
	}
	stopDebug, err := sf.wf.debug.start(log)
	if err != nil {
		return err
	}
	defer stopDebug()
	listen := sf.wf.listen
	if !sec.Auth.Enabled() {
		// An open API is reachable from this machine only: a laptop default must not
		// expose every store to the network.
		addr, changed, err := auth.LoopbackOnly(listen)
		if err != nil {
			return &exitError{code: 2, err: fmt.Errorf("--listen: %w", err)}
		}
		if changed {
			log.Warn("serve: no API tokens (--api-tokens-file): binding to loopback only instead of the requested address",
				"requested", listen, "listen", addr)
		} else {
			log.Info("serve: no API tokens (--api-tokens-file): the API is open, bound to loopback only", "listen", addr)
		}
		listen = addr
	}
	dataDir := sf.wf.dataDir
	etcdDir := sf.etcdDir
	if etcdDir == "" {
		etcdDir = "./lancectx-etcd"
		if !strings.Contains(dataDir, "://") || strings.HasPrefix(dataDir, "file://") {
			if u, err := objstore.ParseURI(dataDir); err == nil {
				etcdDir = filepath.Join(u.Path, "_etcd")
			}
		}
	}
	log.Info("serve: starting", append(append([]any{"data_dir", worker.MaskURI(dataDir), "listen", listen,
		"embedded_etcd", len(sf.ctl.etcd.cfg.Endpoints) == 0, "etcd_dir", etcdDir}, sf.ctl.summary()...), sec.Summary(sf.wf.sec.cfg)...)...)

	pc := store.cfg
	pc.Metrics, pc.Label = objstore.NewMetrics(reg), "data"
	data, err := provider.Open(ctx, dataDir, pc)
	if err != nil {
		return fmt.Errorf("open data dir %s: %w", worker.MaskURI(dataDir), err)
	}
	defer data.Close()
	if sf.wf.adopt {
		// Before the master loads its stats and the worker serves: adopted stores are
		// then served from the first request on.
		if err := adoptAtStart(ctx, log, data, dataDir, &sf.wf.adoptF); err != nil {
			return err
		}
	}

	ecfg := sf.ctl.etcd.cfg
	masterID := sf.ctl.masterID
	if len(ecfg.Endpoints) == 0 {
		if err := os.MkdirAll(etcdDir, 0o700); err != nil {
			return fmt.Errorf("etcd dir: %w", err)
		}
		emb, err := coord.StartEmbedded(ctx, coord.EmbeddedConfig{Dir: etcdDir})
		if err != nil {
			return fmt.Errorf("start embedded etcd in %s: %w", etcdDir, err)
		}
		defer emb.Close()
		ecfg.Endpoints = emb.Endpoints()
		log.Info("serve: embedded etcd ready", "endpoint", emb.ClientURL(), "dir", etcdDir)
		if masterID == "" {
			// A stable identity, so that a restart after a crash takes over the
			// leadership its earlier incarnation's lease still holds. Read only now
			// that the running etcd holds the directory's lock. (With an external
			// etcd the id is stable only when --master-id gives it: two serves
			// could share a data dir there.)
			idPath := filepath.Join(etcdDir, serveMasterIDFile)
			if masterID, err = master.LoadOrCreateInstanceID(idPath); err != nil {
				return err
			}
			log.Info("serve: master identity kept with the embedded etcd's data", "master_id", masterID, "file", idPath)
		}
	}
	ecfg.Metrics, ecfg.Logger = coord.NewMetrics(reg), log
	cli, err := coord.Connect(ctx, ecfg)
	if err != nil {
		return fmt.Errorf("connect to etcd: %w", err)
	}
	defer cli.Close()

	wcfg := sf.wf.config(store)
	wcfg.Store, wcfg.Registerer, wcfg.Gatherer, wcfg.Logger = data, reg, reg, log
	wcfg.MergeLocker = cli // one merge of a dataset at a time, this worker's and the master's alike
	w, err := worker.New(ctx, wcfg)
	if err != nil {
		return err
	}
	workerOpen := true
	closeWorker := func(cctx context.Context) {
		if workerOpen {
			workerOpen = false
			if err := w.Close(cctx); err != nil {
				log.Warn("serve: worker close", "err", err)
			}
		}
	}
	defer closeWorker(context.Background())

	q := sf.ctl.queue
	m, err := master.New(ctx, master.Config{Settings: sf.ctl.set, Data: data, DataURI: dataURI(dataDir), Coord: cli,
		Queue: &q, InstanceID: masterID, Address: sec.Scheme() + "://" + listen, Registerer: reg, Gatherer: reg,
		WALMetrics: w.WALMetrics(), // registered on reg by the worker: the master's merges count there too
		Logger:     log})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	m.Mount(mux)
	mux.Handle("GET /api/v1/health", combinedHealth(w, m))
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	ui.Mount(mux) // the web UI: the page at /, its assets under /ui/
	mux.Handle("/", w.Handler())

	var stopRegister func()
	return serveHTTP(ctx, log, listen, sec.Auth.Wrap(mux), sec.TLS, sf.wf.shutdownTimeout, func(rctx context.Context) {
		m.Start(rctx)
		info := coord.WorkerInfo{ID: wcfg.WorkerID, Endpoint: advertiseURL("", sec.Scheme(), listen), Shards: []string{wal.ShardIDFor(wcfg.WorkerID)}}
		stopRegister = registerServeWorker(rctx, log, cli, info)
	}, func(sctx context.Context) {
		if stopRegister != nil {
			stopRegister()
		}
		if err := m.Close(sctx); err != nil {
			log.Warn("serve: master close", "err", err)
		}
		closeWorker(sctx)
	})
}

// registerServeWorker registers the worker in etcd in the background, trying again until
// it succeeds or ctx ends: after a crash the earlier incarnation's registration stays
// until its lease ends, which the master's takeover at start (or the lease's TTL)
// brings about. The returned func stops trying and waits for the goroutine.
func registerServeWorker(ctx context.Context, log *slog.Logger, cli *coord.Client, info coord.WorkerInfo) func() {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		backoff := 100 * time.Millisecond
		start, warned := time.Now(), false
		for attempt := 1; ; attempt++ {
			rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
			err := cli.RegisterWorker(rctx, info)
			rcancel()
			if err == nil {
				if attempt > 1 {
					log.Info("serve: worker registered in etcd", "id", info.ID, "attempts", attempt)
				}
				return
			}
			if ctx.Err() != nil || errors.Is(err, coord.ErrClosed) {
				return
			}
			switch {
			case attempt == 1 && errors.Is(err, coord.ErrWorkerExists):
				// Expected after a crash, until the takeover or the TTL ends the old lease.
				log.Info("serve: worker id still registered under an earlier lease; retrying until it ends", "id", info.ID, "err", err)
			case attempt == 1 || !warned && time.Since(start) > 2*cli.LeaseTTL():
				warned = true
				log.Warn("serve: worker not registered in etcd yet (the cluster view does not list it); retrying until it is",
					"id", info.ID, "err", err)
			}
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			backoff = min(2*backoff, 5*time.Second)
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// serveHealth is the body of serve's /api/v1/health: the worker's checks and the
// master's in one list.
type serveHealth struct {
	Status   string            `json:"status"`
	WorkerID string            `json:"worker_id,omitempty"`
	MasterID string            `json:"master_id,omitempty"`
	Leader   bool              `json:"leader"`
	Checks   []api.HealthCheck `json:"checks"`
	Failing  []string          `json:"failing,omitempty"`
}

// combinedHealth answers 200 when every worker and master check is ok, else 503 naming
// the failing ones.
func combinedHealth(w *worker.Server, m *master.Master) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if _, err := api.Query(r); err != nil {
			api.WriteError(rw, err)
			return
		}
		rec := httptest.NewRecorder()
		w.Handler().ServeHTTP(rec, r)
		var wh api.HealthResponse
		resp := serveHealth{Status: api.HealthOK, MasterID: m.ID(), Leader: m.IsLeader()}
		if err := json.Unmarshal(rec.Body.Bytes(), &wh); err != nil {
			resp.Checks = append(resp.Checks, api.HealthCheck{Name: "worker", Status: api.HealthFailing,
				Message: fmt.Sprintf("worker health answered %d: %v", rec.Code, err)})
		} else {
			resp.WorkerID = wh.WorkerID
			for _, c := range wh.Checks {
				if !strings.HasPrefix(c.Name, "worker.") {
					c.Name = "worker." + c.Name
				}
				resp.Checks = append(resp.Checks, c)
			}
		}
		resp.Checks = append(resp.Checks, m.HealthChecks(time.Now())...)
		for _, c := range resp.Checks {
			if c.Status != api.HealthOK {
				resp.Status = api.HealthFailing
				resp.Failing = append(resp.Failing, c.Name)
			}
		}
		status := http.StatusOK
		if resp.Status != api.HealthOK {
			status = http.StatusServiceUnavailable
		}
		api.WriteJSON(rw, status, resp)
	})
}
