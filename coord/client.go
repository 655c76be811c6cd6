package coord

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
)

// Client is this process's connection to etcd: one client, one lease (Session) at a
// time, and the locks, leaderships, claims and worker registrations held under it.
// It is safe for concurrent use. Close it to release everything at once.
type Client struct {
	cli      *clientv3.Client
	prefix   string
	ttlSecs  int
	metrics  *Metrics
	log      *slog.Logger
	instance string // random per Client: tells our own stale registrations from another process's

	// bgCtx is the lifetime of background goroutines; Close cancels it.
	bgCtx    context.Context
	bgCancel context.CancelFunc
	wg       sync.WaitGroup

	// sessGate admits one session creation at a time; it is a channel so that a
	// waiter can give up with its context.
	sessGate chan struct{}
	// guards gives each lock name and election role one holder per process; see
	// Lock for why.
	guards keyedGuard

	// mu covers the fields below; it is never held across a request to etcd.
	mu struct {
		sync.Mutex
		sess    *Session
		closed  bool
		workers map[string]WorkerInfo
	}
}

// Session is one lease of the process, kept alive in the background. Everything a
// Client holds (locks, leadership, claims, worker registrations) is attached to the
// current session's lease and ends when it is lost.
type Session struct {
	s *concurrency.Session
}

// Done is closed when the lease is lost: expired, revoked, or no longer renewable
// (etcd unreachable for a lease TTL). The Client then starts a new session.
func (s *Session) Done() <-chan struct{} { return s.s.Done() }

// Ctx is cancelled when Done is closed; derive work that must stop with the lease from it.
func (s *Session) Ctx() context.Context { return s.s.Ctx() }

// Lease is the etcd lease ID keys of this session are attached to.
func (s *Session) Lease() clientv3.LeaseID { return s.s.Lease() }

func (s *Session) alive() bool {
	select {
	case <-s.s.Done():
		return false
	default:
		return true
	}
}

// Connect dials etcd, checks that it answers under the prefix (authentication
// included), and creates the process's session. ctx bounds the whole call, which
// also stops after cfg.DialTimeout if etcd is unreachable.
func Connect(ctx context.Context, cfg Config) (*Client, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(true); err != nil {
		return nil, err
	}
	tc, err := cfg.TLS.tlsConfig()
	if err != nil {
		return nil, err
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            cfg.Endpoints,
		DialTimeout:          cfg.DialTimeout,
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 3 * time.Second,
		Username:             cfg.Username,
		Password:             cfg.Password,
		TLS:                  tc,
		Logger:               errorLogger(),
		// gRPC's default reconnect backoff grows to two minutes; a control plane
		// should notice a healed partition or a restarted member within seconds.
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
			MinConnectTimeout: cfg.DialTimeout,
		})},
	})
	if err != nil {
		return nil, fmt.Errorf("connect to etcd %v: %w", cfg.Endpoints, err)
	}
	pctx, cancel := context.WithTimeout(ctx, cfg.DialTimeout)
	_, err = cli.Get(pctx, cfg.Prefix+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	cancel()
	if err != nil {
		cli.Close()
		return nil, fmt.Errorf("connect to etcd %v: %w", cfg.Endpoints, err)
	}
	m := cfg.Metrics
	if m == nil {
		m = NewMetrics(nil)
	}
	lg := cfg.Logger
	if lg == nil {
		lg = slog.Default()
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	c := &Client{
		cli:      cli,
		prefix:   cfg.Prefix,
		ttlSecs:  int(cfg.LeaseTTL / time.Second),
		metrics:  m,
		log:      lg.With("component", "coord"),
		instance: hex.EncodeToString(rnd[:]),
		sessGate: make(chan struct{}, 1),
	}
	c.bgCtx, c.bgCancel = context.WithCancel(context.Background())
	c.mu.workers = make(map[string]WorkerInfo)
	c.guards.m = make(map[string]*guardSlot)
	if _, err := c.Session(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Etcd returns the underlying etcd client, for transactions fenced with
// Lock.IsOwner, Leadership.IsLeader or Claim.IsOwner. Keys written through it should
// live under Prefix.
func (c *Client) Etcd() *clientv3.Client { return c.cli }

// Prefix returns the key prefix every key of this Client lives under.
func (c *Client) Prefix() string { return c.prefix }

// LeaseTTL returns the lease TTL of the process's sessions.
func (c *Client) LeaseTTL() time.Duration { return time.Duration(c.ttlSecs) * time.Second }

// key joins parts under the prefix.
func (c *Client) key(parts ...string) string {
	return c.prefix + "/" + strings.Join(parts, "/")
}

// Session returns the live session, creating one if the last was lost. ctx bounds
// the wait for a concurrent creation and the lease grant.
func (c *Client) Session(ctx context.Context) (*Session, error) {
	if s, err := c.liveSession(); s != nil || err != nil {
		return s, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	select {
	case c.sessGate <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-c.sessGate }()
	if s, err := c.liveSession(); s != nil || err != nil {
		return s, err
	}
	return c.newSession(ctx)
}

func (c *Client) liveSession() (*Session, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.mu.closed {
		return nil, ErrClosed
	}
	if c.mu.sess != nil && c.mu.sess.alive() {
		return c.mu.sess, nil
	}
	return nil, nil
}

// newSession grants a lease with a bounded request (concurrency.NewSession would
// grant it under the client's lifetime context, which never times out) and starts
// its keep-alive. The caller holds sessGate.
func (c *Client) newSession(ctx context.Context) (*Session, error) {
	gctx, cancel := context.WithTimeout(ctx, requestTimeout)
	resp, err := c.cli.Grant(gctx, int64(c.ttlSecs))
	cancel()
	if err != nil {
		return nil, fmt.Errorf("grant etcd lease: %w", err)
	}
	cs, err := concurrency.NewSession(c.cli, concurrency.WithTTL(c.ttlSecs), concurrency.WithLease(resp.ID))
	if err != nil {
		rctx, cancel := context.WithTimeout(c.bgCtx, requestTimeout)
		_, _ = c.cli.Revoke(rctx, resp.ID)
		cancel()
		return nil, fmt.Errorf("keep etcd lease alive: %w", err)
	}
	s := &Session{s: cs}
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		cs.Orphan()
		rctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		_, _ = c.cli.Revoke(rctx, resp.ID)
		cancel()
		return nil, ErrClosed
	}
	c.mu.sess = s
	c.mu.Unlock()
	c.wg.Add(1)
	go c.monitorSession(s)
	return s, nil
}

// monitorSession waits for the session to end. A loss (not Close) is counted and
// logged, and a new session is created right away so that the worker registration
// comes back without waiting for the next caller.
func (c *Client) monitorSession(s *Session) {
	defer c.wg.Done()
	select {
	case <-c.bgCtx.Done():
		return
	case <-s.Done():
	}
	if c.bgCtx.Err() != nil {
		return
	}
	c.metrics.sessionLosses.Inc()
	c.log.Warn("etcd session lost; locks, leadership and task claims held under it have ended",
		"lease", fmt.Sprintf("%x", int64(s.Lease())), "lease_ttl", c.LeaseTTL())
	backoff := 200 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(c.bgCtx, requestTimeout)
		ns, err := c.Session(ctx)
		cancel()
		if err == nil {
			c.log.Info("new etcd session after a loss", "lease", fmt.Sprintf("%x", int64(ns.Lease())))
			c.reregisterWorkers(ns)
			return
		}
		if errors.Is(err, ErrClosed) || c.bgCtx.Err() != nil {
			return
		}
		c.log.Warn("create etcd session", "err", err, "retry_in", backoff)
		if !sleepCtx(c.bgCtx, backoff) {
			return
		}
		backoff = min(2*backoff, c.LeaseTTL())
	}
}

// Close revokes the lease, so every lock, leadership, claim and worker registration
// of this process ends now rather than a TTL later, then closes the etcd client and
// waits for background goroutines. Close is idempotent.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return nil
	}
	c.mu.closed = true
	sess := c.mu.sess
	c.mu.Unlock()
	c.bgCancel()
	var err error
	if sess != nil && sess.alive() {
		sess.s.Orphan()
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		if _, rerr := c.cli.Revoke(ctx, sess.Lease()); rerr != nil {
			err = fmt.Errorf("revoke etcd lease: %w", rerr)
		}
		cancel()
	}
	if cerr := c.cli.Close(); cerr != nil && !errors.Is(cerr, context.Canceled) {
		err = errors.Join(err, fmt.Errorf("close etcd client: %w", cerr))
	}
	c.wg.Wait()
	return err
}

// closeWithoutRevoke simulates a crash for tests: the lease is left to expire.
func (c *Client) closeWithoutRevoke() {
	c.mu.Lock()
	if c.mu.closed {
		c.mu.Unlock()
		return
	}
	c.mu.closed = true
	c.mu.Unlock()
	c.bgCancel()
	_ = c.cli.Close()
	c.wg.Wait()
}

// goTracked runs f on a goroutine that Close waits for.
func (c *Client) goTracked(f func()) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f()
	}()
}

// keyedGuard is a per-key in-process mutex that waits with a context.
type keyedGuard struct {
	mu sync.Mutex
	m  map[string]*guardSlot
}

type guardSlot struct {
	ch   chan struct{}
	refs int
}

// acquire returns once the caller holds key, with a release func to call exactly
// once, or with ctx's error; if !wait it returns errBusy at once when key is held.
func (g *keyedGuard) acquire(ctx context.Context, key string, wait bool) (func(), error) {
	g.mu.Lock()
	s := g.m[key]
	if s == nil {
		s = &guardSlot{ch: make(chan struct{}, 1)}
		g.m[key] = s
	}
	s.refs++
	g.mu.Unlock()
	var err error
	select {
	case s.ch <- struct{}{}:
	default:
		if !wait {
			err = errBusy
		} else {
			select {
			case s.ch <- struct{}{}:
			case <-ctx.Done():
				err = ctx.Err()
			}
		}
	}
	if err != nil {
		g.unref(key, s)
		return nil, err
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			<-s.ch
			g.unref(key, s)
		})
	}, nil
}

// errBusy is keyedGuard's answer to a non-waiting acquire of a held key.
var errBusy = errors.New("coord: held by another holder in this process")

func (g *keyedGuard) unref(key string, s *guardSlot) {
	g.mu.Lock()
	s.refs--
	if s.refs == 0 {
		delete(g.m, key)
	}
	g.mu.Unlock()
}

// sleepCtx waits d or until ctx ends; it reports whether the full wait elapsed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// validName checks a lock name, election role, task kind, worker or executor id:
// they become key segments and metric labels.
func validName(what, s string) error {
	if s == "" || len(s) > 128 {
		return fmt.Errorf("%w: %s %q: want 1 to 128 characters", ErrInvalidArgument, what, s)
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch >= 'a' && ch <= 'z', ch >= 'A' && ch <= 'Z', ch >= '0' && ch <= '9', ch == '_':
		case (ch == '.' || ch == '-' || ch == ':') && i > 0:
		default:
			return fmt.Errorf("%w: %s %q: want [A-Za-z0-9_][A-Za-z0-9._:-]*", ErrInvalidArgument, what, s)
		}
	}
	return nil
}
