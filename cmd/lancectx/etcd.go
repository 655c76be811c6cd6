package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/lancectx/lancectx/coord"
)

// etcdFlags are the settings of `lancectx etcd`: one member of an etcd cluster run as
// its own process, for a test or a throwaway cluster on one machine. Production runs a
// real etcd; the flags follow etcd's own names so the two read alike.
type etcdFlags struct {
	name         string
	dataDir      string
	clientURL    string
	peerURL      string
	cluster      string
	clusterState string
	token        string
	readyTimeout time.Duration
	noFsync      bool
}

func newEtcdCmd() *cobra.Command {
	ef := &etcdFlags{}
	cmd := &cobra.Command{
		Use:   "etcd",
		Short: "Run one embedded etcd member (a local or test cluster; production runs a real etcd)",
		Long: `Run one etcd member in this process, e.g. three of them for a local three-member cluster:

  lancectx etcd --name e1 --data-dir d1 --client-url http://127.0.0.1:2379 --peer-url http://127.0.0.1:2380 \
    --initial-cluster e1=http://127.0.0.1:2380,e2=http://127.0.0.1:2382,e3=http://127.0.0.1:2384

Start the members of a new cluster together: each is ready only once a quorum runs. A member
restarted on its data directory rejoins with the membership recorded there (--initial-cluster is
then ignored) and must keep its --peer-url. SIGTERM stops the member cleanly (a leader hands its
leadership over first); SIGKILL is a crash, which the others survive while a quorum remains.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return ef.run(cmd.Context()) },
	}
	ef.register(cmd.Flags())
	return cmd
}

func (ef *etcdFlags) register(f *pflag.FlagSet) {
	f.StringVar(&ef.name, "name", envOr("LANCECTX_ETCD_NAME", "lancectx"), "member name, unique in the cluster (env LANCECTX_ETCD_NAME)")
	f.StringVar(&ef.dataDir, "data-dir", envOr("LANCECTX_ETCD_DATA_DIR", ""), "member data directory; a restart on it resumes the member (env LANCECTX_ETCD_DATA_DIR)")
	f.StringVar(&ef.clientURL, "client-url", envOr("LANCECTX_ETCD_CLIENT_URL", "http://127.0.0.1:2379"), "URL the member serves clients on (env LANCECTX_ETCD_CLIENT_URL)")
	f.StringVar(&ef.peerURL, "peer-url", envOr("LANCECTX_ETCD_PEER_URL", "http://127.0.0.1:2380"), "URL the member talks to its peers on; keep it across restarts (env LANCECTX_ETCD_PEER_URL)")
	f.StringVar(&ef.cluster, "initial-cluster", envOr("LANCECTX_ETCD_INITIAL_CLUSTER", ""), "every member as name=peer-url,...; default this member alone; only read when the data directory is new (env LANCECTX_ETCD_INITIAL_CLUSTER)")
	f.StringVar(&ef.clusterState, "initial-cluster-state", envOr("LANCECTX_ETCD_INITIAL_CLUSTER_STATE", "new"), "new: bootstrap a cluster with --initial-cluster; existing: restart a member on its data directory (env LANCECTX_ETCD_INITIAL_CLUSTER_STATE)")
	f.StringVar(&ef.token, "cluster-token", envOr("LANCECTX_ETCD_CLUSTER_TOKEN", "lancectx"), "token that tells clusters bootstrapped on one network apart (env LANCECTX_ETCD_CLUSTER_TOKEN)")
	f.DurationVar(&ef.readyTimeout, "ready-timeout", coord.DefaultReadyTimeout, "how long to wait for the member to serve (a quorum must start within it)")
	f.BoolVar(&ef.noFsync, "unsafe-no-fsync", false, "skip fsync: survives a process kill, not a machine crash; for tests only")
}

// validate checks the flags and returns the member's configuration.
func (ef *etcdFlags) validate() (coord.EmbeddedConfig, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if strings.TrimSpace(ef.dataDir) == "" {
		bad("--data-dir is required")
	}
	if ef.name == "" || strings.ContainsAny(ef.name, "=, \t\r\n") {
		bad("--name %q: want a non-empty name without '=', ',' or spaces", ef.name)
	}
	for _, u := range []struct{ flag, v string }{{"--client-url", ef.clientURL}, {"--peer-url", ef.peerURL}} {
		if err := checkMemberURL(u.v); err != nil {
			bad("%s %q: %v", u.flag, u.v, err)
		}
	}
	if ef.cluster != "" {
		found := false
		for _, m := range strings.Split(ef.cluster, ",") {
			name, peer, ok := strings.Cut(strings.TrimSpace(m), "=")
			if !ok || name == "" {
				bad("--initial-cluster: %q is not name=peer-url", m)
				continue
			}
			if err := checkMemberURL(peer); err != nil {
				bad("--initial-cluster: member %s: %v", name, err)
			}
			if name == ef.name {
				found = true
				if peer != ef.peerURL {
					bad("--initial-cluster names %s at %s but --peer-url is %s", name, peer, ef.peerURL)
				}
			}
		}
		if !found {
			bad("--initial-cluster does not name this member (%s)", ef.name)
		}
	}
	switch ef.clusterState {
	case "new", "existing":
	default:
		bad("--initial-cluster-state %q: want new or existing", ef.clusterState)
	}
	if ef.readyTimeout <= 0 {
		bad("--ready-timeout must be positive")
	}
	if err := errors.Join(errs...); err != nil {
		return coord.EmbeddedConfig{}, err
	}
	if ef.clusterState == "existing" && !hasMemberData(ef.dataDir) {
		// Joining a running cluster as a new member needs a `member add` first and a
		// start in state "existing", which coord.StartEmbedded does not offer (it always
		// bootstraps a new cluster from an empty directory).
		return coord.EmbeddedConfig{}, fmt.Errorf("--initial-cluster-state existing: %s holds no member data; adding a new member to a running cluster is not supported, restart an existing member on its data directory instead", ef.dataDir)
	}
	if ef.clusterState == "new" && hasMemberData(ef.dataDir) {
		slog.Info("etcd: the data directory holds a member already; restarting it with the membership recorded there", "data_dir", ef.dataDir)
	}
	return coord.EmbeddedConfig{Dir: ef.dataDir, Name: ef.name, ClientURL: ef.clientURL, PeerURL: ef.peerURL,
		InitialCluster: ef.cluster, ClusterToken: ef.token, ReadyTimeout: ef.readyTimeout, UnsafeNoFsync: ef.noFsync}, nil
}

func checkMemberURL(v string) error {
	u, err := url.Parse(v)
	if err != nil {
		return err
	}
	if u.Scheme != "http" {
		return errors.New("want http://host:port (the embedded member serves no TLS)")
	}
	if u.Hostname() == "" || u.Port() == "" {
		return errors.New("want http://host:port with an explicit port")
	}
	if u.Path != "" && u.Path != "/" {
		return errors.New("a member URL has no path")
	}
	return nil
}

// hasMemberData reports whether dir holds an etcd member already (its WAL directory).
func hasMemberData(dir string) bool {
	entries, err := os.ReadDir(filepath.Join(dir, "member", "wal"))
	return err == nil && len(entries) > 0
}

func (ef *etcdFlags) run(ctx context.Context) error {
	cfg, err := ef.validate()
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	log := slog.Default()
	log.Info("etcd: starting", "name", cfg.Name, "data_dir", cfg.Dir, "client_url", cfg.ClientURL, "peer_url", cfg.PeerURL,
		"initial_cluster", cfg.InitialCluster, "initial_cluster_state", ef.clusterState, "cluster_token", cfg.ClusterToken,
		"unsafe_no_fsync", cfg.UnsafeNoFsync)
	e, err := coord.StartEmbedded(ctx, cfg)
	if err != nil {
		return err
	}
	log.Info("etcd: ready", "name", e.Name(), "client_url", e.ClientURL(), "peer_url", e.PeerURL(), "leader", e.IsLeader())
	select {
	case <-ctx.Done():
		log.Info("etcd: stopping")
		_ = e.Close()
		log.Info("etcd: stopped")
		return nil
	case err := <-e.Err():
		e.Kill()
		if err == nil {
			err = errors.New("the member stopped")
		}
		return fmt.Errorf("etcd member %s: %w", e.Name(), err)
	}
}
