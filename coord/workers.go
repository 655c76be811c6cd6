package coord

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// WorkerInfo is a worker's entry in the registry (P/workers/<id>), attached to the
// worker process's lease: it disappears a lease TTL after the worker dies.
type WorkerInfo struct {
	// ID is the worker's stable identity (its WAL shard identity derives from it).
	ID string `json:"id"`
	// Endpoint is the worker's base URL, e.g. "http://worker-0.workers:8080".
	Endpoint string `json:"endpoint"`
	// Shards lists the WAL shard of the worker in stores created before incarnations
	// (wal.ShardIDFor); in every other store it is wal.ShardID(ID, its incarnation).
	Shards []string `json:"shards,omitempty"`
	// StartedAt is when the worker process started (default: registration time).
	StartedAt time.Time `json:"started_at"`
}

// workerRecord is what is stored: the info plus the registering Client's instance,
// so that a process can recognise and replace its own registration left under an
// earlier lease.
type workerRecord struct {
	WorkerInfo
	Instance string `json:"instance"`
}

// RegisterWorker publishes info under the process's lease and keeps it published:
// when the session is lost and replaced, the registration is written again under
// the new lease. Calling it again with the same ID updates the entry. It returns
// ErrWorkerExists when another live process holds the ID, which means two workers
// were given the same identity.
func (c *Client) RegisterWorker(ctx context.Context, info WorkerInfo) error {
	if err := validName("worker id", info.ID); err != nil {
		return err
	}
	if strings.TrimSpace(info.Endpoint) == "" {
		return fmt.Errorf("%w: worker %q has no endpoint", ErrInvalidArgument, info.ID)
	}
	if info.StartedAt.IsZero() {
		info.StartedAt = time.Now().UTC()
	}
	info.Shards = slices.Clone(info.Shards)
	for attempt := 0; ; attempt++ {
		sess, err := c.Session(ctx)
		if err != nil {
			return fmt.Errorf("register worker %q: %w", info.ID, err)
		}
		c.mu.Lock()
		c.mu.workers[info.ID] = info
		c.mu.Unlock()
		err = c.putWorker(ctx, sess, info)
		// A lease lost between Session and the put: try once more on the new one.
		if err != nil && !sess.alive() && attempt == 0 {
			continue
		}
		if err != nil {
			c.mu.Lock()
			delete(c.mu.workers, info.ID)
			c.mu.Unlock()
			return fmt.Errorf("register worker %q: %w", info.ID, err)
		}
		return nil
	}
}

func (c *Client) putWorker(ctx context.Context, sess *Session, info WorkerInfo) error {
	k := c.key("workers", info.ID)
	val, err := json.Marshal(workerRecord{WorkerInfo: info, Instance: c.instance})
	if err != nil {
		return err
	}
	put := clientv3.OpPut(k, string(val), clientv3.WithLease(sess.Lease()))
	for attempt := 0; attempt < 4; attempt++ {
		resp, err := c.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(k), "=", 0)).
			Then(put).Else(clientv3.OpGet(k)).Commit()
		if err != nil {
			return err
		}
		if resp.Succeeded {
			return nil
		}
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 {
			continue
		}
		var rec workerRecord
		_ = json.Unmarshal(kvs[0].Value, &rec)
		if clientv3.LeaseID(kvs[0].Lease) != sess.Lease() && rec.Instance != c.instance {
			return fmt.Errorf("%w: %q is registered at %s by another process", ErrWorkerExists, info.ID, rec.Endpoint)
		}
		// Ours, under this or an earlier lease: replace it.
		resp, err = c.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(k), "=", kvs[0].ModRevision)).
			Then(put).Commit()
		if err != nil {
			return err
		}
		if resp.Succeeded {
			return nil
		}
	}
	return fmt.Errorf("register worker %q: %w", info.ID, ErrConflict)
}

// reregisterWorkers writes every registration of this process under a new session.
func (c *Client) reregisterWorkers(sess *Session) {
	c.mu.Lock()
	infos := slices.Collect(maps.Values(c.mu.workers))
	c.mu.Unlock()
	for _, info := range infos {
		ctx, cancel := context.WithTimeout(c.bgCtx, requestTimeout)
		err := c.putWorker(ctx, sess, info)
		cancel()
		if err != nil {
			c.log.Warn("re-register worker after session loss", "worker", info.ID, "err", err)
		}
	}
}

// UnregisterWorker removes the registration of id made by this process, at once
// (Close does the same for all of them by revoking the lease).
func (c *Client) UnregisterWorker(ctx context.Context, id string) error {
	c.mu.Lock()
	_, ok := c.mu.workers[id]
	delete(c.mu.workers, id)
	c.mu.Unlock()
	if !ok {
		return nil
	}
	sess, err := c.liveSession()
	if err != nil || sess == nil {
		return err // no live lease: the key is gone or going
	}
	k := c.key("workers", id)
	_, err = c.cli.Txn(ctx).If(clientv3.Compare(clientv3.LeaseValue(k), "=", sess.Lease())).
		Then(clientv3.OpDelete(k)).Commit()
	if err != nil {
		return fmt.Errorf("unregister worker %q: %w", id, err)
	}
	return nil
}

// ListWorkers returns the registered workers, ordered by ID.
func (c *Client) ListWorkers(ctx context.Context) ([]WorkerInfo, error) {
	ws, _, err := c.listWorkers(ctx)
	if err != nil {
		return nil, err
	}
	return sortedWorkers(ws), nil
}

func (c *Client) listWorkers(ctx context.Context) (map[string]WorkerInfo, int64, error) {
	resp, err := c.cli.Get(ctx, c.key("workers")+"/", clientv3.WithPrefix())
	if err != nil {
		return nil, 0, fmt.Errorf("list workers: %w", err)
	}
	ws := make(map[string]WorkerInfo, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		if w, ok := decodeWorker(kv.Value); ok {
			ws[string(kv.Key)] = w
		}
	}
	return ws, resp.Header.Revision, nil
}

func decodeWorker(b []byte) (WorkerInfo, bool) {
	var rec workerRecord
	if err := json.Unmarshal(b, &rec); err != nil || rec.ID == "" {
		return WorkerInfo{}, false
	}
	return rec.WorkerInfo, true
}

func sortedWorkers(ws map[string]WorkerInfo) []WorkerInfo {
	out := slices.Collect(maps.Values(ws))
	slices.SortFunc(out, func(a, b WorkerInfo) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// WatchWorkers sends the full list of registered workers now and after every change
// until ctx ends or the Client closes, then closes the channel. Changes that arrive
// while the reader is busy are coalesced: the reader always gets the latest list.
func (c *Client) WatchWorkers(ctx context.Context) <-chan []WorkerInfo {
	out := make(chan []WorkerInfo)
	ctx, stop := mergeCtx(ctx, c.bgCtx)
	c.goTracked(func() {
		defer close(out)
		defer stop()
		for ctx.Err() == nil {
			lctx, cancel := context.WithTimeout(ctx, requestTimeout)
			ws, rev, err := c.listWorkers(lctx)
			cancel()
			if err != nil {
				if !sleepCtx(ctx, 500*time.Millisecond) {
					return
				}
				continue
			}
			if !c.followWorkers(ctx, out, ws, rev) {
				return
			}
		}
	})
	return out
}

// followWorkers delivers ws, then applies watch events from rev+1 and delivers the
// latest list whenever the reader is ready. It returns false when ctx ended and
// true when the watch broke and the list must be read again.
func (c *Client) followWorkers(ctx context.Context, out chan<- []WorkerInfo, ws map[string]WorkerInfo, rev int64) bool {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wch := c.cli.Watch(wctx, c.key("workers")+"/", clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	snap, pending := sortedWorkers(ws), true
	for {
		var send chan<- []WorkerInfo
		if pending {
			send = out
		}
		select {
		case <-ctx.Done():
			return false
		case send <- snap:
			pending = false
		case wr, ok := <-wch:
			if !ok || wr.Err() != nil {
				return ctx.Err() == nil && sleepCtx(ctx, 200*time.Millisecond)
			}
			for _, ev := range wr.Events {
				switch ev.Type {
				case mvccpb.PUT:
					if w, ok := decodeWorker(ev.Kv.Value); ok {
						ws[string(ev.Kv.Key)] = w
					}
				case mvccpb.DELETE:
					delete(ws, string(ev.Kv.Key))
				}
			}
			if len(wr.Events) > 0 {
				snap, pending = sortedWorkers(ws), true
			}
		}
	}
}
