package coord

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// WithTestLeaseTTL returns cfg with lease TTL ttl, lowering the 5s floor to 1s:
// lease-expiry tests then take seconds. Only tests can do this.
func WithTestLeaseTTL(cfg Config, ttl time.Duration) Config {
	cfg.minLeaseTTL = time.Second
	cfg.LeaseTTL = ttl
	return cfg
}

// Crash closes the client without revoking its lease, like a process that died:
// everything it held lingers until the lease expires.
func (c *Client) Crash() { c.closeWithoutRevoke() }

// LockWaiters is the number of holders and waiters of the named lock in this process
// (0 when none): a test waits for it to reach 2 to know a second in-process holder
// is waiting for the first.
func (c *Client) LockWaiters(name string) int {
	c.guards.mu.Lock()
	defer c.guards.mu.Unlock()
	if s := c.guards.m["lock\x00"+name]; s != nil {
		return s.refs
	}
	return 0
}

// OnWatch makes the client call fn with the key of every etcd watch it opens from
// now on (waiting Claims, lock and election waits): a test waits for the watch to
// know a waiter is waiting. Call it before the client is shared with goroutines.
func (c *Client) OnWatch(fn func(key string)) {
	c.cli.Watcher = watchSpy{Watcher: c.cli.Watcher, fn: fn}
}

type watchSpy struct {
	clientv3.Watcher
	fn func(key string)
}

func (w watchSpy) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	w.fn(key)
	return w.Watcher.Watch(ctx, key, opts...)
}
