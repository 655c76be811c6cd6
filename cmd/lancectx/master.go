package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/lancectx/lancectx/coord"
	"github.com/lancectx/lancectx/master"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/objstore/provider"
	"github.com/lancectx/lancectx/worker"
)

// controlFlags are the settings every master shares, in `lancectx master` and in
// `lancectx serve`: the loops' settings (one flag per environment variable of
// master.SettingsEnv, named after it), etcd and the task queue, the instance identity.
type controlFlags struct {
	set   master.Settings
	etcd  etcdClientFlags
	queue coord.QueueConfig

	masterID  string
	advertise string

	qLimit, qCooldownAfter, qMaxAttempts        int
	qTTL, qCooldownBase, qCooldownMax, qTimeout int64

	envErrs []error
}

// settingFlag is a pflag.Value over one master setting, in its environment unit.
type settingFlag struct {
	ev  master.EnvVar
	set *master.Settings
}

func (s settingFlag) String() string     { return s.ev.Get(s.set) }
func (s settingFlag) Set(v string) error { return s.ev.Set(s.set, v) }
func (s settingFlag) Type() string       { return s.ev.Unit }

// flagName turns an environment variable name into its flag: STATS_SCAN_INTERVAL_SECS
// -> stats-scan-interval-secs.
func flagName(env string) string { return strings.ToLower(strings.ReplaceAll(env, "_", "-")) }

func (cf *controlFlags) register(f *pflag.FlagSet) {
	set, err := master.ParseSettingsEnv(os.LookupEnv) // validated after the flags, in resolve
	if err != nil {
		cf.envErrs = append(cf.envErrs, err)
	}
	cf.set = set
	for _, ev := range master.SettingsEnv() {
		f.Var(settingFlag{ev: ev, set: &cf.set}, flagName(ev.Name), ev.Help+" (env "+ev.Name+")")
	}
	cf.etcd.register(f)

	q, err := coord.QueueConfigFromEnv()
	if err != nil {
		cf.envErrs = append(cf.envErrs, err)
		q = coord.DefaultQueueConfig()
	}
	cf.queue = q
	f.IntVar(&cf.qLimit, "task-history-limit", q.HistoryLimit, "finished tasks kept (env TASK_HISTORY_LIMIT)")
	f.Int64Var(&cf.qTTL, "task-history-ttl-secs", int64(q.HistoryTTL/time.Second), "finished tasks older than this are dropped; 0 keeps them up to the limit (env TASK_HISTORY_TTL_SECS)")
	f.IntVar(&cf.qCooldownAfter, "task-cooldown-after-failures", q.CooldownAfterFailures, "consecutive failures of a kind on a target that start a cooldown; 0 disables (env TASK_COOLDOWN_AFTER_FAILURES)")
	f.Int64Var(&cf.qCooldownBase, "task-cooldown-base-secs", int64(q.CooldownBase/time.Second), "first cooldown, doubling per further failure (env TASK_COOLDOWN_BASE_SECS)")
	f.Int64Var(&cf.qCooldownMax, "task-cooldown-max-secs", int64(q.CooldownMax/time.Second), "longest cooldown (env TASK_COOLDOWN_MAX_SECS)")
	f.Int64Var(&cf.qTimeout, "task-timeout-secs", int64(q.DefaultTimeout/time.Second), "deadline of a task whose kind sets none (env TASK_TIMEOUT_SECS)")
	f.IntVar(&cf.qMaxAttempts, "task-max-attempts", q.MaxAttempts, "claims of a task whose executor vanishes or overruns before it fails (env TASK_MAX_ATTEMPTS)")

	host, _ := os.Hostname()
	f.StringVar(&cf.masterID, "master-id", envOr("MASTER_ID", envOr("INSTANCE_ID", "")),
		"this master's identity in the cluster view and task claims, unique per running master and kept across its restarts "+
			"(e.g. the pod name): a restarted master takes over its earlier incarnation's leadership at once "+
			"(env MASTER_ID, else INSTANCE_ID; default "+host+"-<random>, new at every start; serve with its embedded etcd keeps one in <etcd-dir>/"+serveMasterIDFile+")")
	f.StringVar(&cf.advertise, "advertise-url", envOr("MASTER_ADVERTISE_URL", ""), "admin URL other masters show for this one (env MASTER_ADVERTISE_URL)")
}

// resolve applies the flags and validates everything, naming what is wrong.
func (cf *controlFlags) resolve(needEndpoints bool) error {
	if len(cf.envErrs) > 0 {
		return fmt.Errorf("environment: %w", errors.Join(cf.envErrs...))
	}
	if err := cf.etcd.resolve(); err != nil {
		return err
	}
	if needEndpoints && len(cf.etcd.cfg.Endpoints) == 0 {
		return errors.New("ETCD_ENDPOINTS (--etcd-endpoints) is required to run the master")
	}
	var errs []error
	q := &cf.queue
	q.HistoryLimit, q.CooldownAfterFailures, q.MaxAttempts = cf.qLimit, cf.qCooldownAfter, cf.qMaxAttempts
	for _, d := range []struct {
		name string
		v    int64
		dst  *time.Duration
	}{{"task-history-ttl-secs", cf.qTTL, &q.HistoryTTL}, {"task-cooldown-base-secs", cf.qCooldownBase, &q.CooldownBase},
		{"task-cooldown-max-secs", cf.qCooldownMax, &q.CooldownMax}, {"task-timeout-secs", cf.qTimeout, &q.DefaultTimeout}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("--%s must not be negative", d.name))
		}
		*d.dst = time.Duration(d.v) * time.Second
	}
	if err := q.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := cf.set.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// summary is the effective configuration as log attributes, secrets masked.
func (cf *controlFlags) summary() []any {
	q := cf.queue
	out := []any{"etcd", cf.etcd.cfg.String(), "master_id", cf.masterID, "advertise_url", cf.advertise,
		"task_history_limit", q.HistoryLimit, "task_history_ttl", q.HistoryTTL.String(),
		"task_cooldown_after_failures", q.CooldownAfterFailures, "task_cooldown_base", q.CooldownBase.String(),
		"task_cooldown_max", q.CooldownMax.String(), "task_timeout", q.DefaultTimeout.String(), "task_max_attempts", q.MaxAttempts}
	return append(out, cf.set.Summary()...)
}

// dataURI is the data directory in the canonical form every URI is reported in
// (objstore.CanonicalURI: file:///abs for paths, credentials dropped), for logs.
func dataURI(dir string) string { return objstore.CanonicalURI(dir) }

// etcdClientFlags are the etcd client settings of every command that talks to etcd
// (master, serve with an external etcd, worker registering itself).
type etcdClientFlags struct {
	cfg       coord.Config
	endpoints string
	leaseTTL  int
	envErrs   []error
}

func (ef *etcdClientFlags) register(f *pflag.FlagSet) {
	etcd, err := coord.ConfigFromEnv()
	if err != nil {
		ef.envErrs = append(ef.envErrs, err)
	}
	ef.cfg = etcd
	f.StringVar(&ef.endpoints, "etcd-endpoints", strings.Join(etcd.Endpoints, ","), "comma-separated etcd endpoints (env ETCD_ENDPOINTS)")
	f.StringVar(&ef.cfg.Prefix, "etcd-prefix", etcd.Prefix, "key prefix shared by the masters and workers of one deployment (env ETCD_PREFIX)")
	f.IntVar(&ef.leaseTTL, "etcd-lease-ttl-secs", int(etcd.LeaseTTL/time.Second), "lease of this process: locks, leadership, claims and its registration end this long after it stops (env ETCD_LEASE_TTL_SECS, at least 5)")
	f.StringVar(&ef.cfg.Username, "etcd-username", etcd.Username, "etcd user (env ETCD_USERNAME)")
	f.StringVar(&ef.cfg.Password, "etcd-password", etcd.Password, "etcd password; prefer the environment (env ETCD_PASSWORD)")
	f.StringVar(&ef.cfg.TLS.CAFile, "etcd-ca-cert", etcd.TLS.CAFile, "CA of the etcd servers (env ETCD_CA_CERT)")
	f.StringVar(&ef.cfg.TLS.CertFile, "etcd-client-cert", etcd.TLS.CertFile, "client certificate for etcd (env ETCD_CLIENT_CERT)")
	f.StringVar(&ef.cfg.TLS.KeyFile, "etcd-client-key", etcd.TLS.KeyFile, "client key for etcd (env ETCD_CLIENT_KEY)")
	// The password is masked in the help text.
	if p := f.Lookup("etcd-password"); p != nil && p.DefValue != "" {
		p.DefValue = "***"
	}
}

// resolve applies the flags; the configuration is validated when it has endpoints.
func (ef *etcdClientFlags) resolve() error {
	if len(ef.envErrs) > 0 {
		return fmt.Errorf("environment: %w", errors.Join(ef.envErrs...))
	}
	ef.cfg.Endpoints = nil
	for _, ep := range strings.Split(ef.endpoints, ",") {
		if ep = strings.TrimSpace(ep); ep != "" {
			ef.cfg.Endpoints = append(ef.cfg.Endpoints, ep)
		}
	}
	ef.cfg.LeaseTTL = time.Duration(ef.leaseTTL) * time.Second
	if len(ef.cfg.Endpoints) > 0 {
		return ef.cfg.Validate()
	}
	return nil
}

type masterCmdFlags struct {
	ctl             controlFlags
	dataDir         string
	host            string
	port            int
	shutdownTimeout time.Duration
	sec             securityFlags
	debug           debugFlags
}

func newMasterCmd(store *storeFlags) *cobra.Command {
	mf := &masterCmdFlags{}
	cmd := &cobra.Command{
		Use:   "master",
		Short: "Run a master: the control plane of a data directory (run N replicas over one etcd prefix)",
		Long: `Run a master: every replica executes maintenance tasks from the etcd queue (TASK_CONCURRENCY at
a time) and serves the admin API from its in-memory stats snapshot; the elected planner leader
also runs the stats scan (one _stats version per round), the merge-WAL, compaction and cleanup
sweeps, and _stats maintenance, each loop with its own interval and deadline. Every setting has a
flag and an environment variable (the reference system's names); the effective configuration is
printed at start with secrets masked. SIGTERM drains requests, resigns the leadership and stops.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return mf.run(cmd.Context(), store) },
	}
	f := cmd.Flags()
	f.StringVar(&mf.dataDir, "data-dir", envOr("DATA_DIR", envOr("LANCECTX_DATA_DIR", "./lance-data")),
		"data directory URI shared with the workers (env DATA_DIR or LANCECTX_DATA_DIR)")
	f.StringVar(&mf.host, "host", envOr("MASTER_HOST", "0.0.0.0"), "admin API host (env MASTER_HOST)")
	port, perr := strconv.Atoi(envOr("MASTER_PORT", "8090"))
	if perr != nil {
		mf.ctl.envErrs = append(mf.ctl.envErrs, fmt.Errorf("MASTER_PORT=%q is not a port", os.Getenv("MASTER_PORT")))
		port = 8090
	}
	f.IntVar(&mf.port, "port", port, "admin API port (env MASTER_PORT)")
	f.DurationVar(&mf.shutdownTimeout, "shutdown-timeout", 30*time.Second, "on SIGTERM, how long to drain requests and stop running tasks")
	mf.ctl.register(f)
	mf.sec.register(f)
	mf.debug.register(f)
	return cmd
}

func (mf *masterCmdFlags) run(ctx context.Context, store *storeFlags) error {
	if err := mf.ctl.resolve(true); err != nil {
		return &exitError{code: 2, err: err}
	}
	if mf.port <= 0 || mf.port > 65535 {
		return &exitError{code: 2, err: fmt.Errorf("--port %d is not a port", mf.port)}
	}
	if err := mf.sec.validate(); err != nil {
		return &exitError{code: 2, err: err}
	}
	log := slog.Default()
	listen := net.JoinHostPort(mf.host, strconv.Itoa(mf.port))
	reg := newProcessRegistry()
	sec, err := mf.sec.load(log, reg)
	if err != nil {
		return err
	}
	stopDebug, err := mf.debug.start(log)
	if err != nil {
		return err
	}
	defer stopDebug()
	log.Info("master: starting", append(append([]any{"data_dir", worker.MaskURI(mf.dataDir), "listen", listen,
		"store_faults", store.cfg.Faults}, mf.ctl.summary()...), sec.Summary(mf.sec.cfg)...)...)
	if !sec.Auth.Enabled() {
		log.Warn("master: the admin API is open: no --api-tokens-file, so anyone who can reach the listen address can "+
			"read the cluster state and queue maintenance tasks", "listen", listen)
	}
	pc := store.cfg
	pc.Metrics, pc.Label = objstore.NewMetrics(reg), "data"
	data, err := provider.Open(ctx, mf.dataDir, pc)
	if err != nil {
		return fmt.Errorf("open data dir %s: %w", worker.MaskURI(mf.dataDir), err)
	}
	defer data.Close()
	ecfg := mf.ctl.etcd.cfg
	ecfg.Metrics, ecfg.Logger = coord.NewMetrics(reg), log
	cli, err := coord.Connect(ctx, ecfg)
	if err != nil {
		return fmt.Errorf("connect to etcd: %w", err)
	}
	defer cli.Close()
	q := mf.ctl.queue
	m, err := master.New(ctx, master.Config{Settings: mf.ctl.set, Data: data, DataURI: dataURI(mf.dataDir), Coord: cli,
		Queue: &q, InstanceID: mf.ctl.masterID, Address: mf.ctl.advertise, Registerer: reg, Gatherer: reg, Logger: log})
	if err != nil {
		return err
	}
	return serveHTTP(ctx, log, listen, sec.Auth.Wrap(m.Handler()), sec.TLS, mf.shutdownTimeout, func(rctx context.Context) {
		m.Start(rctx)
	}, func(sctx context.Context) {
		if err := m.Close(sctx); err != nil {
			log.Warn("master: close", "err", err)
		}
	})
}

// newHTTPServer is the HTTP server of every command: h behind header and idle
// timeouts (bodies are bounded by the handlers' request deadlines), HTTPS when
// tlsCfg is set.
func newHTTPServer(log *slog.Logger, h http.Handler, tlsCfg *tls.Config) *http.Server {
	return &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		MaxHeaderBytes: 1 << 20, TLSConfig: tlsCfg, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
}

// serve serves srv on ln, over TLS when srv has a TLS configuration.
func serve(srv *http.Server, ln net.Listener) error {
	if srv.TLSConfig != nil {
		return srv.ServeTLS(ln, "", "")
	}
	return srv.Serve(ln)
}

// serveHTTP listens, starts (after the listener is up), serves h until ctx ends, then
// drains requests and stops (both bounded by timeout).
func serveHTTP(ctx context.Context, log *slog.Logger, listen string, h http.Handler, tlsCfg *tls.Config, timeout time.Duration,
	start func(context.Context), stop func(context.Context)) error {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", listen, err)
	}
	srv := newHTTPServer(log, h, tlsCfg)
	serveErr := make(chan error, 1)
	go func() { serveErr <- serve(srv, ln) }()
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	start(runCtx)
	scheme := "http"
	if tlsCfg != nil {
		scheme = "https"
	}
	log.Info("listening", "addr", ln.Addr().String(), "scheme", scheme)
	select {
	case err = <-serveErr:
		log.Error("HTTP server stopped", "err", err)
	case <-ctx.Done():
		log.Info("shutting down: draining requests", "timeout", timeout.String())
	}
	sctx, scancel := context.WithTimeout(context.Background(), timeout)
	defer scancel()
	if serr := srv.Shutdown(sctx); serr != nil {
		log.Warn("requests still running at the drain deadline; closing their connections", "err", serr)
		_ = srv.Close()
	}
	cctx, ccancel := context.WithTimeout(context.Background(), timeout)
	defer ccancel()
	stop(cctx)
	cancel()
	log.Info("stopped")
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
