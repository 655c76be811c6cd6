package coord

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// DefaultReadyTimeout bounds how long StartEmbedded waits for the member to serve.
const DefaultReadyTimeout = 60 * time.Second

// EmbeddedConfig describes an etcd member run inside this process: the single-node
// cluster of `lancectx serve`, or one member of a test cluster.
type EmbeddedConfig struct {
	// Dir is the member's data directory, e.g. <service data dir>/etcd; created
	// (0700) if missing. A restart with the same Dir resumes the same member.
	Dir string
	// Name is the member name (default "lancectx"); unique within a cluster.
	Name string
	// ClientURL and PeerURL are where the member listens; empty picks a free
	// loopback port. A member restarted with existing data must keep its PeerURL.
	ClientURL string
	PeerURL   string
	// InitialCluster lists every member as name=peerURL,... (default: this member
	// alone). It only matters on the first start; later starts read the membership
	// from Dir.
	InitialCluster string
	// ClusterToken distinguishes clusters bootstrapped on the same network
	// (default "lancectx").
	ClusterToken string
	// ReadyTimeout bounds the wait for the member to serve (default 60s; the caller's
	// context can end it sooner). A member of a multi-member cluster is ready only
	// once a quorum has started, so start members concurrently.
	ReadyTimeout time.Duration
	// Logger receives etcd's logs; default: errors only, JSON on stderr.
	Logger *zap.Logger
	// UnsafeNoFsync skips fsync: an acknowledged write can be lost on a crash. For
	// tests and throwaway clusters only.
	UnsafeNoFsync bool
}

// Embedded is a running embedded etcd member.
type Embedded struct {
	etcd      *embed.Etcd
	name      string
	dir       string
	clientURL string
	peerURL   string
	closeOnce sync.Once
}

// StartEmbedded starts an etcd member and returns once it serves clients, or with
// an error when it fails, ctx ends, or ReadyTimeout passes (the member is stopped
// then). Auto-compaction keeps one hour of history, so a long-running embedded
// cluster does not grow until etcd's space quota makes it read-only.
func StartEmbedded(ctx context.Context, cfg EmbeddedConfig) (*Embedded, error) {
	if cfg.Dir == "" {
		return nil, fmt.Errorf("%w: embedded etcd needs a data directory", ErrInvalidConfig)
	}
	if cfg.Name == "" {
		cfg.Name = "lancectx"
	}
	if cfg.ClusterToken == "" {
		cfg.ClusterToken = "lancectx"
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = DefaultReadyTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = embeddedLogger()
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("create embedded etcd dir: %w", err)
	}
	pickClient, pickPeer := cfg.ClientURL == "", cfg.PeerURL == ""
	// A free port found by listen-and-close can be taken again before etcd binds
	// it; try a few times before giving up.
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		c := cfg
		var err error
		if pickClient {
			if c.ClientURL, err = freeLoopbackURL(); err != nil {
				return nil, err
			}
		}
		if pickPeer {
			if c.PeerURL, err = freeLoopbackURL(); err != nil {
				return nil, err
			}
		}
		e, err := startEmbedded(ctx, c)
		if err == nil {
			return e, nil
		}
		lastErr = err
		if !(pickClient || pickPeer) || !isAddrInUse(err) || ctx.Err() != nil {
			break
		}
	}
	return nil, lastErr
}

func startEmbedded(ctx context.Context, cfg EmbeddedConfig) (*Embedded, error) {
	curl, err := url.Parse(cfg.ClientURL)
	if err != nil {
		return nil, fmt.Errorf("%w: embedded etcd client URL %q: %v", ErrInvalidConfig, cfg.ClientURL, err)
	}
	purl, err := url.Parse(cfg.PeerURL)
	if err != nil {
		return nil, fmt.Errorf("%w: embedded etcd peer URL %q: %v", ErrInvalidConfig, cfg.PeerURL, err)
	}
	ec := embed.NewConfig()
	ec.Name = cfg.Name
	ec.Dir = cfg.Dir
	ec.ListenClientUrls = []url.URL{*curl}
	ec.AdvertiseClientUrls = []url.URL{*curl}
	ec.ListenPeerUrls = []url.URL{*purl}
	ec.AdvertisePeerUrls = []url.URL{*purl}
	ec.InitialCluster = cfg.InitialCluster
	if ec.InitialCluster == "" {
		ec.InitialCluster = cfg.Name + "=" + cfg.PeerURL
	}
	ec.InitialClusterToken = cfg.ClusterToken
	ec.AutoCompactionMode = "periodic"
	ec.AutoCompactionRetention = "1h"
	ec.UnsafeNoFsync = cfg.UnsafeNoFsync
	ec.Logger = "zap"
	ec.LogLevel = "error"
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(cfg.Logger)

	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("start embedded etcd %q: %w", cfg.Name, err)
	}
	timer := time.NewTimer(cfg.ReadyTimeout)
	defer timer.Stop()
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedded etcd %q failed while starting: %w", cfg.Name, err)
	case <-ctx.Done():
		e.Server.Stop()
		e.Close()
		return nil, fmt.Errorf("start embedded etcd %q: %w", cfg.Name, ctx.Err())
	case <-timer.C:
		e.Server.Stop()
		e.Close()
		return nil, fmt.Errorf("start embedded etcd %q: not ready after %s", cfg.Name, cfg.ReadyTimeout)
	}
	return &Embedded{etcd: e, name: cfg.Name, dir: cfg.Dir, clientURL: cfg.ClientURL, peerURL: cfg.PeerURL}, nil
}

// Endpoints returns the client URLs, for Config.Endpoints.
func (e *Embedded) Endpoints() []string { return []string{e.clientURL} }

// ClientURL returns the URL the member serves clients on.
func (e *Embedded) ClientURL() string { return e.clientURL }

// PeerURL returns the URL the member talks to its peers on.
func (e *Embedded) PeerURL() string { return e.peerURL }

// Name returns the member name.
func (e *Embedded) Name() string { return e.name }

// Dir returns the member's data directory.
func (e *Embedded) Dir() string { return e.dir }

// IsLeader reports whether this member is the raft leader of its cluster.
func (e *Embedded) IsLeader() bool {
	return e.etcd.Server.Leader() == e.etcd.Server.MemberID()
}

// Err delivers a fatal error of the running member; it is closed after Close.
func (e *Embedded) Err() <-chan error { return e.etcd.Err() }

// Close stops the member and waits for it. Client requests in flight get up to
// etcd's request timeout to finish; close clients first for a quick stop. Close is
// idempotent.
func (e *Embedded) Close() error {
	e.closeOnce.Do(e.etcd.Close)
	return nil
}

// Kill stops the member abruptly, without handing its raft leadership to another
// member first: a crash, for failover tests. Close is the normal way to stop.
func (e *Embedded) Kill() {
	e.closeOnce.Do(func() {
		e.etcd.Server.HardStop()
		e.etcd.Close()
	})
}

func freeLoopbackURL() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("pick a free loopback port: %w", err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		return "", fmt.Errorf("pick a free loopback port: %w", err)
	}
	return "http://" + addr, nil
}

func isAddrInUse(err error) bool {
	return err != nil && (errors.Is(err, syscall.EADDRINUSE) || strings.Contains(err.Error(), "address already in use"))
}

// embeddedLogger is the default logger of an embedded member: errors only, minus
// the ones etcd logs for its own listeners closing during a normal shutdown.
func embeddedLogger() *zap.Logger {
	lg := errorLogger()
	return lg.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core { return shutdownNoiseFilter{c} }))
}

// shutdownNoiseFilter drops "setting up serving ... failed" entries whose error
// only says that a server or listener was closed, which etcd logs at error level
// every time it stops.
type shutdownNoiseFilter struct{ zapcore.Core }

func (f shutdownNoiseFilter) With(fields []zapcore.Field) zapcore.Core {
	return shutdownNoiseFilter{f.Core.With(fields)}
}

func (f shutdownNoiseFilter) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if f.Enabled(e.Level) {
		return ce.AddCore(e, f)
	}
	return ce
}

func (f shutdownNoiseFilter) Write(e zapcore.Entry, fields []zapcore.Field) error {
	if strings.HasPrefix(e.Message, "setting up serving from embedded etcd failed") {
		for _, fl := range fields {
			if err, ok := fl.Interface.(error); ok && fl.Key == "error" && isClosedError(err) {
				return nil
			}
		}
	}
	return f.Core.Write(e, fields)
}

func isClosedError(err error) bool {
	if errors.Is(err, net.ErrClosed) || errors.Is(err, http.ErrServerClosed) {
		return true
	}
	msg := err.Error()
	return strings.Contains(msg, "server closed") || strings.Contains(msg, "use of closed network connection") ||
		strings.Contains(msg, "server is stopping")
}

// errorLogger is the default logger of etcd's server and client: errors only, so
// that a healthy process is quiet.
func errorLogger() *zap.Logger {
	zc := zap.NewProductionConfig()
	zc.Level = zap.NewAtomicLevelAt(zapcore.ErrorLevel)
	zc.Sampling = nil
	lg, err := zc.Build()
	if err != nil {
		return zap.NewNop()
	}
	return lg
}
