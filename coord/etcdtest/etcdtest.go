// Package etcdtest runs embedded etcd clusters for tests: one member or several,
// with members that can be stopped and restarted, and TCP proxies in front of the
// client ports that can cut a client off (a partition, or a paused process as far
// as etcd can tell).
package etcdtest

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/lancectx/lancectx/coord"
)

// Cluster is an embedded etcd cluster whose members clients reach through proxies.
type Cluster struct {
	members []*Member
}

// Member is one etcd member of a Cluster.
type Member struct {
	cfg   coord.EmbeddedConfig
	proxy *Proxy

	mu   sync.Mutex
	etcd *coord.Embedded // nil while stopped
}

// Start starts a single-member cluster that is stopped when the test ends.
func Start(t testing.TB) *Cluster { return StartCluster(t, 1) }

// StartCluster starts an n-member cluster that is stopped when the test ends.
// Clients registered for cleanup after it are closed before it stops.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("etcdtest: cluster of %d members", n)
	}
	c := &Cluster{}
	t.Cleanup(c.stopAll)
	// A free port found by listen-and-close can be taken by another test before etcd
	// binds it: start again on new ports (and new directories) when that happens.
	for attempt := 1; ; attempt++ {
		err := c.startMembers(t, n)
		if err == nil {
			break
		}
		if attempt >= 3 || !strings.Contains(err.Error(), "address already in use") {
			t.Fatalf("etcdtest: start cluster: %v", err)
		}
		c.stopAll()
		c.members = nil
	}
	for _, m := range c.members {
		u, _ := url.Parse(m.cfg.ClientURL)
		p, err := newProxy(u.Host)
		if err != nil {
			t.Fatalf("etcdtest: %v", err)
		}
		m.proxy = p
	}
	return c
}

// startMembers creates n members on free ports and starts them together.
func (c *Cluster) startMembers(t testing.TB, n int) error {
	var initial []string
	token := fmt.Sprintf("etcdtest-%d", time.Now().UnixNano())
	for i := 0; i < n; i++ {
		cu, pu := freeURL(t), freeURL(t)
		name := fmt.Sprintf("m%d", i)
		initial = append(initial, name+"="+pu)
		c.members = append(c.members, &Member{cfg: coord.EmbeddedConfig{
			Dir:           t.TempDir(),
			Name:          name,
			ClientURL:     cu,
			PeerURL:       pu,
			ClusterToken:  token,
			ReadyTimeout:  30 * time.Second,
			UnsafeNoFsync: true,
		}})
	}
	for _, m := range c.members {
		m.cfg.InitialCluster = strings.Join(initial, ",")
	}
	// Members become ready only once a quorum runs, so start them together.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var g errgroup.Group
	for _, m := range c.members {
		g.Go(func() error { return m.start(ctx) })
	}
	return g.Wait()
}

func (c *Cluster) stopAll() {
	for _, m := range c.members {
		if m.proxy != nil {
			m.proxy.Close()
		}
	}
	// Followers first, so that the raft leader, stopped last, has nobody to hand
	// its leadership to and stops at once.
	for _, m := range c.members {
		if !m.IsLeader() {
			m.stop()
		}
	}
	for _, m := range c.members {
		m.stop()
	}
}

// Endpoints returns the client endpoints (through the proxies) of every member.
func (c *Cluster) Endpoints() []string {
	out := make([]string, len(c.members))
	for i, m := range c.members {
		out[i] = m.Endpoint()
	}
	return out
}

// Members returns the members in creation order.
func (c *Cluster) Members() []*Member { return c.members }

// WaitLeader returns the member that leads the raft group, waiting up to timeout
// for an election; nil if none was elected in time.
func (c *Cluster) WaitLeader(timeout time.Duration) *Member {
	deadline := time.Now().Add(timeout)
	for {
		for _, m := range c.members {
			if m.IsLeader() {
				return m
			}
		}
		if time.Now().After(deadline) {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (m *Member) start(ctx context.Context) error {
	e, err := coord.StartEmbedded(ctx, m.cfg)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.etcd = e
	m.mu.Unlock()
	return nil
}

func (m *Member) stop() {
	m.mu.Lock()
	e := m.etcd
	m.etcd = nil
	m.mu.Unlock()
	if e != nil {
		_ = e.Close()
	}
}

// Name returns the member's name.
func (m *Member) Name() string { return m.cfg.Name }

// Endpoint returns the client URL through the member's proxy: what clients use.
func (m *Member) Endpoint() string { return m.proxy.URL() }

// ClientURL returns the member's own client URL, for a client that needs its own
// proxy (NewProxy) to be cut off alone.
func (m *Member) ClientURL() string { return m.cfg.ClientURL }

// IsLeader reports whether the member runs and leads the raft group.
func (m *Member) IsLeader() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.etcd != nil && m.etcd.IsLeader()
}

// Stop cuts the member's client connections (so that it stops at once rather than
// waiting out open watches) and kills it like a crashed node: a raft leader does
// not hand its leadership over, the others elect a new one.
func (m *Member) Stop() {
	m.proxy.Partition()
	m.mu.Lock()
	e := m.etcd
	m.etcd = nil
	m.mu.Unlock()
	if e != nil {
		e.Kill()
	}
}

// Restart starts a stopped member again with its data and URLs, and reconnects
// its proxy.
func (m *Member) Restart(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.start(ctx); err != nil {
		t.Fatalf("etcdtest: restart %s: %v", m.cfg.Name, err)
	}
	m.proxy.Heal()
}

// Proxy forwards TCP connections to an etcd client port until it is partitioned.
type Proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu struct {
		sync.Mutex
		conns       map[net.Conn]struct{}
		partitioned bool
		closed      bool
	}
}

// NewProxy starts a proxy to targetURL (an etcd client URL) that is closed when the
// test ends. Point one client at it to cut that client off alone.
func NewProxy(t testing.TB, targetURL string) *Proxy {
	t.Helper()
	u, err := url.Parse(targetURL)
	if err != nil {
		t.Fatalf("etcdtest: proxy target %q: %v", targetURL, err)
	}
	p, err := newProxy(u.Host)
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	t.Cleanup(p.Close)
	return p
}

func newProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("proxy listen: %w", err)
	}
	p := &Proxy{ln: ln, target: target}
	p.mu.conns = make(map[net.Conn]struct{})
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// URL returns the proxy's client URL.
func (p *Proxy) URL() string { return "http://" + p.ln.Addr().String() }

// Partition closes every proxied connection and refuses new ones until Heal: to the
// client, etcd is unreachable; to etcd, the client has gone silent.
func (p *Proxy) Partition() {
	p.mu.Lock()
	p.mu.partitioned = true
	conns := p.mu.conns
	p.mu.conns = make(map[net.Conn]struct{})
	p.mu.Unlock()
	for c := range conns {
		_ = c.Close()
	}
}

// Heal accepts and forwards connections again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.mu.partitioned = false
	p.mu.Unlock()
}

// Close stops the proxy and closes its connections.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.mu.closed {
		p.mu.Unlock()
		return
	}
	p.mu.closed = true
	p.mu.Unlock()
	_ = p.ln.Close()
	p.Partition()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		refuse := p.mu.partitioned || p.mu.closed
		p.mu.Unlock()
		if refuse {
			_ = in.Close()
			continue
		}
		out, err := net.DialTimeout("tcp", p.target, 2*time.Second)
		if err != nil {
			_ = in.Close()
			continue
		}
		p.mu.Lock()
		if p.mu.partitioned || p.mu.closed {
			p.mu.Unlock()
			_ = in.Close()
			_ = out.Close()
			continue
		}
		p.mu.conns[in] = struct{}{}
		p.mu.conns[out] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(in, out)
		go p.pipe(out, in)
	}
}

// pipe copies src to dst; when either side ends, both close.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	_ = src.Close()
	_ = dst.Close()
	p.mu.Lock()
	delete(p.mu.conns, src)
	delete(p.mu.conns, dst)
	p.mu.Unlock()
}

func freeURL(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("etcdtest: free port: %v", err)
	}
	defer l.Close()
	return "http://" + l.Addr().String()
}
