package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/lancectx/lancectx/auth"
	"github.com/lancectx/lancectx/coord"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/rollout"
	"github.com/lancectx/lancectx/wal"
	"github.com/lancectx/lancectx/worker"
)

// workerFlags are the settings of `lancectx worker`; every flag has an environment
// variable (the reference system's name where it had one).
type workerFlags struct {
	dataDir         string
	storageVersion  string
	listen          string
	workerID        string
	sealBytes       workerBytes
	sealInterval    time.Duration
	admissionWait   time.Duration
	groupLinger     time.Duration
	groupCommit     workerBytes
	inflight        int
	pendingMax      int
	mergeAfter      int
	mergeMaxGens    int
	mergeMaxBytes   workerBytes
	mergeMaxRows    int64
	mergeConc       int
	mergeInterval   time.Duration
	mergeMaxAge     time.Duration
	cacheCapacity   int
	maxBody         workerBytes
	keyCache        workerBytes
	ctxVecCache     workerBytes
	ctxTextCache    workerBytes
	ctxIndexCache   workerBytes
	sweepTempAge    time.Duration
	maxRecords      int
	listMaxRows     int
	maxPart         workerBytes
	requestTimeout  time.Duration
	flushTimeout    time.Duration
	shutdownTimeout time.Duration
	sec             securityFlags
	debug           debugFlags
	// adopt runs `lancectx adopt` on the data directory before serving.
	adopt  bool
	adoptF adoptFlags
	// etcd and advertise are flags of `lancectx worker` only (serve has its own etcd):
	// with etcd endpoints the worker registers itself for the cluster view.
	etcd      etcdClientFlags
	advertise string

	envErrs []error
}

// securityFlags are the authentication and TLS settings of every command that serves
// HTTP (worker, master, serve).
type securityFlags struct {
	cfg     auth.ServerConfig
	envErrs []error
}

func (sf *securityFlags) register(f *pflag.FlagSet) {
	f.StringVar(&sf.cfg.TokensFile, "api-tokens-file", envOr("LANCECTX_API_TOKENS_FILE", ""),
		`JSON file of the API tokens: {"tokens":[{"name":"trainer","token":"...","scopes":["read","write"]}],"internal_token":"..."}; `+
			"without it the API is open (env LANCECTX_API_TOKENS_FILE)")
	protect := false
	if v, ok := os.LookupEnv("LANCECTX_PROTECT_HEALTH_AND_METRICS"); ok && strings.TrimSpace(v) != "" {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			sf.envErrs = append(sf.envErrs, fmt.Errorf("LANCECTX_PROTECT_HEALTH_AND_METRICS=%q is not a boolean", v))
		}
		protect = b
	}
	f.BoolVar(&sf.cfg.ProtectHealthAndMetrics, "protect-health-and-metrics", protect,
		"require a token with the read scope (or the internal token) on /api/v1/health and /metrics, open otherwise (env LANCECTX_PROTECT_HEALTH_AND_METRICS)")
	f.StringVar(&sf.cfg.TLSCertFile, "tls-cert", envOr("LANCECTX_TLS_CERT", ""),
		"PEM certificate (chain) to serve HTTPS (TLS 1.2+) with; needs --tls-key (env LANCECTX_TLS_CERT)")
	f.StringVar(&sf.cfg.TLSKeyFile, "tls-key", envOr("LANCECTX_TLS_KEY", ""),
		"PEM private key of --tls-cert (env LANCECTX_TLS_KEY)")
}

// validate checks the flags without reading the files.
func (sf *securityFlags) validate() error {
	if len(sf.envErrs) > 0 {
		return fmt.Errorf("environment: %w", errors.Join(sf.envErrs...))
	}
	return sf.cfg.Validate()
}

// load reads the tokens file and the key pair; a failure is a configuration error
// (exit code 2).
func (sf *securityFlags) load(log *slog.Logger, reg prometheus.Registerer) (auth.Security, error) {
	sec, err := sf.cfg.Load(log, reg)
	if err != nil {
		return auth.Security{}, &exitError{code: 2, err: err}
	}
	return sec, nil
}

func newWorkerCmd(store *storeFlags) *cobra.Command {
	wf := &workerFlags{}
	cmd := &cobra.Command{
		Use:   "worker",
		Short: "Run the data plane: the HTTP API of the rollout stores in a data directory",
		Long: `Run a worker: rollout stores under --data-dir (one Lance dataset each, {name}.rollout.lance),
appends made durable through this worker's WAL shard (UUIDv5 of --worker-id) and merged into the
base tables in the background, reads from consistent snapshots. SIGTERM stops accepting requests,
drains those in flight (up to --shutdown-timeout) and seals every open shard.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return wf.run(cmd.Context(), store)
		},
	}
	wf.register(cmd.Flags())
	wf.etcd.register(cmd.Flags())
	cmd.Flags().StringVar(&wf.advertise, "advertise-url", wf.envStr("", "LANCECTX_ADVERTISE_URL"),
		"base URL the cluster view shows for this worker (env LANCECTX_ADVERTISE_URL; default the scheme and --listen, a wildcard host as 127.0.0.1)")
	return cmd
}

func (wf *workerFlags) register(f *pflag.FlagSet) {
	host, _ := os.Hostname()
	f.StringVar(&wf.dataDir, "data-dir", wf.envStr("./lance-data", "LANCECTX_DATA_DIR"),
		"data directory URI: a path, file:///path, s3://bucket/prefix, az://container/prefix, mem:// (env LANCECTX_DATA_DIR)")
	f.StringVar(&wf.listen, "listen", wf.envStr(":3000", "LANCECTX_LISTEN"), "HTTP listen address (env LANCECTX_LISTEN)")
	f.StringVar(&wf.storageVersion, "data-storage-version", wf.envStr(lance.DefaultDataStorageVersion, "LANCECTX_DATA_STORAGE_VERSION"),
		"Lance data file format of the stores created: 2.0 or 2.1 (LanceDB 0.31's default); existing stores keep theirs (env LANCECTX_DATA_STORAGE_VERSION)")
	f.StringVar(&wf.workerID, "worker-id", wf.envStr(host, "LANCECTX_WORKER_ID", "INSTANCE_ID"),
		"stable worker identity, e.g. the StatefulSet pod name; its WAL shard in every dataset derives from it (env LANCECTX_WORKER_ID or INSTANCE_ID; default the hostname)")
	wf.sealBytes = workerBytes(wf.envBytes(wal.DefaultSealBytes, "LANCECTX_WAL_SEAL_BYTES"))
	f.Var(&wf.sealBytes, "wal-seal-bytes", "seal the memtable into a generation at this size, e.g. 8MiB (env LANCECTX_WAL_SEAL_BYTES)")
	f.DurationVar(&wf.sealInterval, "wal-seal-interval", wf.envDuration(wal.DefaultSealInterval, "LANCECTX_WAL_SEAL_INTERVAL"),
		"seal the memtable when its oldest row is this old: the longest time an acked row is invisible to other workers (env LANCECTX_WAL_SEAL_INTERVAL)")
	f.DurationVar(&wf.admissionWait, "wal-admission-wait", wf.envDuration(wal.DefaultAdmissionWait, "LANCECTX_WAL_ADMISSION_WAIT"),
		"how long an append that finds its store's unsealed rows at their cap waits for sealing to catch up before a 503 "+
			"(env LANCECTX_WAL_ADMISSION_WAIT)")
	f.DurationVar(&wf.groupLinger, "wal-group-commit-linger", wf.envDuration(wal.DefaultGroupCommitLinger, "LANCECTX_WAL_GROUP_COMMIT_LINGER"),
		"while several clients append to a store, how long a group commit waits for more appends before its WAL entry is written "+
			"(fewer, larger entries: less CPU per row); a lone client never waits; 0 turns it off (env LANCECTX_WAL_GROUP_COMMIT_LINGER)")
	wf.groupCommit = workerBytes(wf.envBytes(wal.DefaultGroupCommitMaxBytes, "LANCECTX_WAL_GROUP_COMMIT_BYTES"))
	f.Var(&wf.groupCommit, "wal-group-commit-bytes", "largest WAL entry (one group commit) (env LANCECTX_WAL_GROUP_COMMIT_BYTES)")
	f.IntVar(&wf.inflight, "wal-inflight-entries", wf.envInt(0, "LANCECTX_WAL_INFLIGHT_ENTRIES"),
		"WAL entry puts in flight per shard; 0 = 1 on file:// and mem://, 4 on cloud stores (env LANCECTX_WAL_INFLIGHT_ENTRIES)")
	f.IntVar(&wf.pendingMax, "wal-pending-max-generations", wf.envInt(wal.DefaultMaxPendingGenerations, "ROLLOUT_WAL_PENDING_MAX_GENERATIONS"),
		"pending (sealed, unmerged) generations of a dataset at which appends get 503 with Retry-After (env ROLLOUT_WAL_PENDING_MAX_GENERATIONS)")
	f.IntVar(&wf.mergeAfter, "merge-after-generations", wf.envInt(wal.DefaultMergeAfterGenerations, "ROLLOUT_MERGE_AFTER_GENERATIONS"),
		"merge a store's own shard in the background once it has this many sealed generations; 0 = never (env ROLLOUT_MERGE_AFTER_GENERATIONS)")
	f.IntVar(&wf.mergeMaxGens, "merge-max-generations", wf.envInt(wal.DefaultMergeMaxGenerations, "ROLLOUT_MERGE_MAX_GENERATIONS"),
		"generations per merge pass (env ROLLOUT_MERGE_MAX_GENERATIONS)")
	wf.mergeMaxBytes = workerBytes(wf.envBytes(wal.DefaultMergeMaxBytes, "ROLLOUT_MERGE_MAX_BYTES"))
	f.Var(&wf.mergeMaxBytes, "merge-max-bytes", "generation bytes per merge pass (env ROLLOUT_MERGE_MAX_BYTES)")
	f.Int64Var(&wf.mergeMaxRows, "merge-max-rows", int64(wf.envInt(wal.DefaultMergeMaxRows, "LANCECTX_MERGE_MAX_ROWS")),
		"keys per merge pass, which is what a merge holds in memory (env LANCECTX_MERGE_MAX_ROWS)")
	f.IntVar(&wf.mergeConc, "merge-concurrency", wf.envInt(worker.DefaultMergeConcurrency, "ROLLOUT_MERGE_CONCURRENCY"),
		"merges running at once in this worker, background and requested (env ROLLOUT_MERGE_CONCURRENCY)")
	f.DurationVar(&wf.mergeMaxAge, "merge-max-age", wf.envDuration(worker.DefaultMergeMaxAge, "MERGE_WAL_MAX_AGE_SECS", "LANCECTX_MERGE_MAX_AGE"),
		"merge a store's own shard once its oldest sealed generation is this old, however few there are; 0 = never (env MERGE_WAL_MAX_AGE_SECS)")
	f.DurationVar(&wf.mergeInterval, "merge-interval", wf.envDuration(worker.DefaultMergeInterval, "LANCECTX_MERGE_INTERVAL"),
		"how often the merge loop looks for stores due for a merge (env LANCECTX_MERGE_INTERVAL)")
	f.IntVar(&wf.cacheCapacity, "store-cache-capacity", wf.envInt(worker.DefaultStoreCacheCapacity, "LANCECTX_STORE_CACHE_CAPACITY", "ROLLOUT_CACHE_CAPACITY"),
		"open stores (one WAL shard each) kept resident; the least recently used is sealed and closed beyond it (env LANCECTX_STORE_CACHE_CAPACITY or ROLLOUT_CACHE_CAPACITY)")
	f.DurationVar(&wf.sweepTempAge, "sweep-temp-age", wf.envDuration(worker.DefaultSweepTempAge, "LANCECTX_SWEEP_TEMP_AGE"),
		"at start, remove temp files of uploads older than this from a local data directory (left by killed processes); 0 turns the sweep off (env LANCECTX_SWEEP_TEMP_AGE)")
	wf.keyCache = workerBytes(wf.envBytes(worker.DefaultKeyCacheBytes, "LANCECTX_KEY_CACHE_BYTES"))
	f.Var(&wf.keyCache, "key-cache-bytes", "memory for the id-column indexes that answer GET .../records/{id} without scanning "+
		"the table; 0 turns them off (env LANCECTX_KEY_CACHE_BYTES)")
	wf.ctxVecCache = workerBytes(wf.envBytes(worker.DefaultContextVectorCacheBytes, "LANCECTX_CONTEXT_VECTOR_CACHE_BYTES"))
	wf.ctxTextCache = workerBytes(wf.envBytes(worker.DefaultContextTextIndexCacheBytes, "LANCECTX_CONTEXT_TEXT_INDEX_CACHE_BYTES"))
	f.Var(&wf.ctxTextCache, "context-text-index-cache-bytes", "memory for the decoded full-text index segments that context retrieves "+
		"keep between queries, all stores together; 0 keeps none (env LANCECTX_CONTEXT_TEXT_INDEX_CACHE_BYTES)")
	wf.ctxIndexCache = workerBytes(wf.envBytes(worker.DefaultContextIndexCacheBytes, "LANCECTX_CONTEXT_INDEX_CACHE_BYTES"))
	f.Var(&wf.ctxIndexCache, "context-index-cache-bytes", "memory for the decoded partitions of context stores' vector indexes that "+
		"searches keep between queries, all stores together; an index that fits is read whole by its first search; 0 keeps none "+
		"(env LANCECTX_CONTEXT_INDEX_CACHE_BYTES)")
	f.Var(&wf.ctxVecCache, "context-vector-cache-bytes", "memory for the decoded base-table vectors that exact context searches "+
		"keep between queries, all stores together; 0 turns it off (env LANCECTX_CONTEXT_VECTOR_CACHE_BYTES)")
	f.IntVar(&wf.listMaxRows, "list-max-rows", wf.envInt(worker.DefaultListMaxRows, "ROLLOUT_LIST_MAX_ROWS"),
		"most rows one answer of GET .../records holds: without a limit it returns every matching row up to this, "+
			"and past it a 400 that says to page or use the Arrow route (env ROLLOUT_LIST_MAX_ROWS)")
	wf.maxBody = workerBytes(wf.envBytes(rollout.DefaultMaxBodyBytes, "LANCECTX_MAX_BODY_BYTES"))
	f.Var(&wf.maxBody, "max-body-bytes", "largest append request body (env LANCECTX_MAX_BODY_BYTES)")
	f.IntVar(&wf.maxRecords, "max-records", wf.envInt(rollout.DefaultMaxRecords, "LANCECTX_MAX_RECORDS"),
		"most records in one append request (env LANCECTX_MAX_RECORDS)")
	wf.maxPart = workerBytes(wf.envBytes(0, "LANCECTX_MAX_PART_BYTES"))
	f.Var(&wf.maxPart, "max-part-bytes", "largest single payload; 0 = --max-body-bytes (env LANCECTX_MAX_PART_BYTES)")
	f.DurationVar(&wf.requestTimeout, "request-timeout", wf.envDuration(worker.DefaultRequestTimeout, "LANCECTX_REQUEST_TIMEOUT"),
		"deadline of a request that does not stream its answer (env LANCECTX_REQUEST_TIMEOUT)")
	f.DurationVar(&wf.flushTimeout, "flush-timeout", wf.envDuration(worker.DefaultFlushTimeout, "LANCECTX_FLUSH_TIMEOUT"),
		"how long ?flush=true waits for the seal (env LANCECTX_FLUSH_TIMEOUT)")
	f.DurationVar(&wf.shutdownTimeout, "shutdown-timeout", wf.envDuration(30*time.Second, "LANCECTX_SHUTDOWN_TIMEOUT"),
		"on SIGTERM, how long to drain requests and then to seal the open shards (env LANCECTX_SHUTDOWN_TIMEOUT)")
	wf.sec.register(f)
	wf.debug.register(f)
	f.BoolVar(&wf.adopt, "adopt", wf.envBool("LANCECTX_ADOPT"),
		"before serving, adopt the stores of a lance-context data directory as `lancectx adopt` does (env LANCECTX_ADOPT); "+
			"run it on one process of a fleet")
	wf.adoptF.register(f, "adopt-")
}

// envBool reads a boolean environment variable (unset, empty or unparsable: false;
// unparsable is reported by validate).
func (wf *workerFlags) envBool(key string) bool {
	v := strings.TrimSpace(os.Getenv(key))
	if v == "" {
		return false
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		wf.envErrs = append(wf.envErrs, fmt.Errorf("%s=%q is not a boolean", key, v))
	}
	return b
}

// connectEtcd connects the worker to etcd (bounded by its own deadline). The worker
// uses the connection for its registration in the cluster view and for the datasets'
// merge locks (worker.Config.MergeLocker).
func connectEtcd(ctx context.Context, ecfg coord.Config) (*coord.Client, error) {
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	return coord.Connect(cctx, ecfg)
}

// registerWorker registers info under cli's lease (which also ends the registration if
// the process dies). The returned func unregisters, bounded by its own deadline.
func registerWorker(ctx context.Context, log *slog.Logger, cli *coord.Client, info coord.WorkerInfo) (func(), error) {
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := cli.RegisterWorker(cctx, info); err != nil {
		return nil, err
	}
	log.Info("worker: registered in etcd", "id", info.ID, "endpoint", info.Endpoint)
	return func() {
		uctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := cli.UnregisterWorker(uctx, info.ID); err != nil {
			log.Warn("worker: unregister from etcd (its lease ends it anyway)", "err", err)
		}
	}, nil
}

// advertiseURL is the URL other processes are shown for a server listening on addr:
// the flag when set, else scheme://addr with a wildcard host made 127.0.0.1.
func advertiseURL(flag, scheme, addr string) string {
	if flag != "" {
		return strings.TrimRight(flag, "/")
	}
	if host, port, err := net.SplitHostPort(addr); err == nil && (host == "" || host == "0.0.0.0" || host == "::") {
		addr = net.JoinHostPort("127.0.0.1", port)
	}
	return scheme + "://" + addr
}

// validate checks what worker.New would silently default.
func (wf *workerFlags) validate() error {
	if len(wf.envErrs) > 0 {
		return fmt.Errorf("environment: %w", errors.Join(wf.envErrs...))
	}
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(strings.TrimSpace(wf.dataDir) != "", "--data-dir is required")
	if _, err := lance.ParseDataStorageVersion(wf.storageVersion); err != nil {
		errs = append(errs, fmt.Errorf("--data-storage-version (env LANCECTX_DATA_STORAGE_VERSION): %w", err))
	}
	check(strings.TrimSpace(wf.workerID) != "", "--worker-id is required (no hostname to default to)")
	check(wf.listen != "", "--listen is required")
	check(wf.sealBytes > 0, "--wal-seal-bytes must be positive")
	check(wf.sealInterval > 0, "--wal-seal-interval must be positive")
	check(wf.admissionWait > 0, "--wal-admission-wait must be positive")
	check(wf.groupLinger >= 0, "--wal-group-commit-linger must not be negative")
	check(wf.groupCommit > 0, "--wal-group-commit-bytes must be positive")
	check(wf.inflight >= 0, "--wal-inflight-entries must not be negative")
	check(wf.pendingMax > 0, "--wal-pending-max-generations must be positive")
	check(wf.mergeAfter >= 0, "--merge-after-generations must not be negative")
	check(wf.mergeAfter == 0 || wf.mergeAfter < wf.pendingMax,
		"--merge-after-generations (%d) must be below --wal-pending-max-generations (%d), or appends stop before merges start", wf.mergeAfter, wf.pendingMax)
	check(wf.mergeMaxGens > 0, "--merge-max-generations must be positive")
	check(wf.mergeMaxBytes > 0, "--merge-max-bytes must be positive")
	check(wf.mergeMaxRows > 0, "--merge-max-rows must be positive")
	check(wf.mergeConc > 0, "--merge-concurrency must be positive")
	check(wf.mergeInterval > 0, "--merge-interval must be positive")
	check(wf.mergeMaxAge >= 0, "--merge-max-age must not be negative")
	check(wf.cacheCapacity > 0, "--store-cache-capacity must be positive")
	check(wf.sweepTempAge >= 0, "--sweep-temp-age must not be negative")
	check(wf.listMaxRows > 0, "--list-max-rows must be positive")
	check(wf.maxBody > 0, "--max-body-bytes must be positive")
	check(wf.maxRecords > 0, "--max-records must be positive")
	check(wf.maxPart >= 0, "--max-part-bytes must not be negative")
	check(wf.requestTimeout > 0, "--request-timeout must be positive")
	check(wf.flushTimeout > 0, "--flush-timeout must be positive")
	check(wf.shutdownTimeout > 0, "--shutdown-timeout must be positive")
	check(wf.adoptF.concurrency > 0, "--adopt-concurrency must be positive")
	if wf.adoptF.envErr != nil {
		errs = append(errs, fmt.Errorf("environment: %w", wf.adoptF.envErr))
	}
	if err := wf.sec.validate(); err != nil {
		errs = append(errs, err)
	}
	if err := wf.etcd.resolve(); err != nil {
		errs = append(errs, fmt.Errorf("etcd: %w", err))
	}
	return errors.Join(errs...)
}

func (wf *workerFlags) config(store *storeFlags) worker.Config {
	mergeAfter := wf.mergeAfter
	if mergeAfter == 0 {
		mergeAfter = -1 // off, as in the reference (worker.Config reads 0 as the default)
	}
	cfg := worker.Config{
		DataDir:               wf.dataDir,
		StoreConfig:           store.cfg,
		WorkerID:              wf.workerID,
		DataStorageVersion:    wf.storageVersion,
		SealBytes:             int64(wf.sealBytes),
		SealInterval:          wf.sealInterval,
		AdmissionWait:         wf.admissionWait,
		GroupCommitLinger:     offIfZero(wf.groupLinger),
		GroupCommitMaxBytes:   int64(wf.groupCommit),
		MaxInflightEntries:    wf.inflight,
		MaxPendingGenerations: wf.pendingMax,
		MergeAfterGenerations: mergeAfter,
		Merge:                 wal.MergeOptions{MaxGenerations: wf.mergeMaxGens, MaxBytes: int64(wf.mergeMaxBytes), MaxRows: wf.mergeMaxRows},
		MergeConcurrency:      wf.mergeConc,
		MergeInterval:         wf.mergeInterval,
		MergeMaxAge:           offIfZero(wf.mergeMaxAge),
		StoreCacheCapacity:    wf.cacheCapacity,
		MaxBodyBytes:          int64(wf.maxBody),
		KeyCacheBytes:         offIfZero(int64(wf.keyCache)),
		SweepTempAge:          offIfZero(wf.sweepTempAge),
		ListMaxRows:           wf.listMaxRows,
		MaxRecords:            wf.maxRecords,
		MaxPartBytes:          int64(wf.maxPart),
		RequestTimeout:        wf.requestTimeout,
		FlushTimeout:          wf.flushTimeout,
		CloseTimeout:          wf.shutdownTimeout,
		Logger:                slog.Default(),
	}
	cfg.ContextVectorCacheBytes = offIfZero(int64(wf.ctxVecCache))
	cfg.ContextTextIndexCacheBytes = offIfZero(int64(wf.ctxTextCache))
	cfg.ContextIndexCacheBytes = offIfZero(int64(wf.ctxIndexCache))
	return cfg
}

func (wf *workerFlags) run(ctx context.Context, store *storeFlags) error {
	if err := wf.validate(); err != nil {
		return &exitError{code: 2, err: err}
	}
	cfg := wf.config(store)
	log := slog.Default()
	reg := newProcessRegistry()
	cfg.Registerer, cfg.Gatherer = reg, reg
	sec, err := wf.sec.load(log, reg)
	if err != nil {
		return err
	}
	stopDebug, err := wf.debug.start(log)
	if err != nil {
		return err
	}
	defer stopDebug()
	var etcd *coord.Client
	if len(wf.etcd.cfg.Endpoints) > 0 {
		ecfg := wf.etcd.cfg
		ecfg.Metrics, ecfg.Logger = coord.NewMetrics(reg), log
		if etcd, err = connectEtcd(ctx, ecfg); err != nil {
			// The data plane does not need etcd: appends and reads go on; merges are
			// then exclusive within this process only.
			log.Warn("worker: etcd unreachable at start: not registered in the cluster view, and merges take no fleet-wide merge lock",
				"err", err)
			etcd = nil
		} else {
			defer etcd.Close()
			cfg.MergeLocker = etcd
		}
	}
	if wf.adopt {
		data, err := openDataDir(ctx, store, wf.dataDir)
		if err != nil {
			return err
		}
		err = adoptAtStart(ctx, log, data, wf.dataDir, &wf.adoptF)
		_ = data.Close()
		if err != nil {
			return err
		}
	}
	w, err := worker.New(ctx, cfg)
	if err != nil {
		return err
	}
	log.Info("worker: starting", append(append([]any{"listen", wf.listen, "shutdown_timeout", wf.shutdownTimeout.String()},
		w.Config().Summary()...), sec.Summary(wf.sec.cfg)...)...)
	if !sec.Auth.Enabled() {
		log.Warn("worker: the API is open: no --api-tokens-file, so anyone who can reach the listen address can read, write "+
			"and delete every store", "listen", wf.listen)
	}
	ln, err := net.Listen("tcp", wf.listen)
	if err != nil {
		_ = w.Close(context.Background())
		return fmt.Errorf("listen on %s: %w", wf.listen, err)
	}
	srv := newHTTPServer(log, sec.Auth.Wrap(w.Handler()), sec.TLS)
	serveErr := make(chan error, 1)
	go func() { serveErr <- serve(srv, ln) }()
	log.Info("worker: listening", "addr", ln.Addr().String(), "scheme", sec.Scheme())
	if etcd != nil {
		unregister, err := registerWorker(ctx, log, etcd, coord.WorkerInfo{ID: cfg.WorkerID,
			Endpoint: advertiseURL(wf.advertise, sec.Scheme(), ln.Addr().String()), Shards: []string{wal.ShardIDFor(cfg.WorkerID)}})
		if err != nil {
			log.Warn("worker: not registered in etcd (the cluster view will not list it; the data plane does not need etcd)", "err", err)
		} else {
			defer unregister()
		}
	}
	select {
	case err = <-serveErr:
		log.Error("worker: HTTP server stopped", "err", err)
	case <-ctx.Done():
		log.Info("worker: shutting down: draining requests", "timeout", wf.shutdownTimeout.String())
	}
	sctx, cancel := context.WithTimeout(context.Background(), wf.shutdownTimeout)
	defer cancel()
	if serr := srv.Shutdown(sctx); serr != nil {
		log.Warn("worker: requests still running at the drain deadline; closing their connections", "err", serr)
		_ = srv.Close()
	}
	cctx, ccancel := context.WithTimeout(context.Background(), wf.shutdownTimeout)
	defer ccancel()
	if cerr := w.Close(cctx); cerr != nil {
		log.Warn("worker: close", "err", cerr)
	}
	log.Info("worker: stopped")
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

func (wf *workerFlags) lookup(keys ...string) (string, string, bool) {
	for _, k := range keys {
		if v, ok := os.LookupEnv(k); ok && v != "" {
			return k, v, true
		}
	}
	return "", "", false
}

func (wf *workerFlags) envStr(def string, keys ...string) string {
	if _, v, ok := wf.lookup(keys...); ok {
		return v
	}
	return def
}

func (wf *workerFlags) envInt(def int, keys ...string) int {
	k, v, ok := wf.lookup(keys...)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		wf.envErrs = append(wf.envErrs, fmt.Errorf("%s=%q is not an integer", k, v))
		return def
	}
	return n
}

func (wf *workerFlags) envBytes(def int64, keys ...string) int64 {
	k, v, ok := wf.lookup(keys...)
	if !ok {
		return def
	}
	n, err := parseWorkerBytes(v)
	if err != nil {
		wf.envErrs = append(wf.envErrs, fmt.Errorf("%s: %w", k, err))
		return def
	}
	return n
}

func (wf *workerFlags) envDuration(def time.Duration, keys ...string) time.Duration {
	k, v, ok := wf.lookup(keys...)
	if !ok {
		return def
	}
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil {
		// The reference's *_SECS style: a bare number of seconds.
		if n, nerr := strconv.ParseFloat(strings.TrimSpace(v), 64); nerr == nil {
			return time.Duration(n * float64(time.Second))
		}
		wf.envErrs = append(wf.envErrs, fmt.Errorf("%s=%q is not a duration (e.g. 2s, 500ms)", k, v))
		return def
	}
	return d
}

// workerBytes is a byte size flag: a plain number of bytes or a number with a unit
// (KiB, MiB, GiB, TiB; KB, MB, GB, TB are powers of ten).
type workerBytes int64

func (b *workerBytes) String() string { return strconv.FormatInt(int64(*b), 10) }
func (b *workerBytes) Type() string   { return "bytes" }
func (b *workerBytes) Set(s string) error {
	n, err := parseWorkerBytes(s)
	if err != nil {
		return err
	}
	*b = workerBytes(n)
	return nil
}

func parseWorkerBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
		{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if rest, ok := strings.CutSuffix(t, u.suffix); ok {
			t, mult = strings.TrimSpace(rest), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > (1<<62)/mult {
		return 0, fmt.Errorf("%q is not a byte size (e.g. 8388608, 8MiB)", s)
	}
	return n * mult, nil
}

// offIfZero maps a flag where 0 means off to a worker.Config field where 0 means the
// default and a negative value means off (--key-cache-bytes, --sweep-temp-age).
func offIfZero[T int64 | time.Duration](flag T) T {
	if flag == 0 {
		return -1
	}
	return flag
}
