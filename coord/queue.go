package coord

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Queue is the etcd task queue shared by every master: enqueue with dedupe and
// dependencies, claim by compare-and-swap with a leased claim and a per-target
// lock, completion fenced by the claim, recovery of orphans, failure cooldowns and
// bounded history. See doc.go for the keys.
type Queue struct {
	c   *Client
	cfg QueueConfig
}

// NewQueue returns the queue of c's prefix with cfg (validated).
func NewQueue(c *Client, cfg QueueConfig) (*Queue, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Queue{c: c, cfg: cfg}, nil
}

// Enqueue creates a task, or returns the queued or running task of the same kind
// and target (created false) when spec has no dependencies: a burst of identical
// requests becomes one task. A task with dependencies is always created; it waits
// until they are all done, and fails at once if one has failed.
//
// Unless spec.IgnoreCooldown, a kind and target in a failure cooldown get a task
// whose NotBefore is the end of the cooldown (and Failures the count), so the
// backoff is visible in the record and the task takes no executor until then.
// With IgnoreCooldown (a manual request), a deduplicated task that is backing off
// is made ready at once.
func (q *Queue) Enqueue(ctx context.Context, spec TaskSpec) (Task, bool, error) {
	if err := spec.validate(); err != nil {
		return Task{}, false, err
	}
	id, err := newTaskID()
	if err != nil {
		return Task{}, false, err
	}
	t := Task{
		ID:          id,
		Kind:        spec.Kind,
		Target:      spec.Target,
		State:       StateQueued,
		Waiting:     len(spec.DependsOn) > 0,
		MaxAttempts: spec.MaxAttempts,
		Timeout:     spec.Timeout,
		Payload:     spec.Payload,
		RetryOf:     spec.RetryOf,
		CreatedAt:   time.Now().UTC(),
	}
	if spec.NotBefore.After(t.CreatedAt) {
		t.NotBefore = spec.NotBefore.UTC()
	}
	if t.MaxAttempts == 0 {
		t.MaxAttempts = q.cfg.MaxAttempts
	}
	if t.Timeout == 0 {
		t.Timeout = q.cfg.DefaultTimeout
	}
	for _, d := range spec.DependsOn {
		if !slices.Contains(t.DependsOn, d) {
			t.DependsOn = append(t.DependsOn, d)
		}
	}
	fail := func(err error) (Task, bool, error) {
		return Task{}, false, fmt.Errorf("enqueue %s %q: %w", t.Kind, t.Target, err)
	}
	// The transaction assumes the kind and target have no failure record (cdMod 0)
	// and checks it; when one exists the task is rebuilt from it and written again.
	// That saves a read on the common path.
	ck, dk := q.cooldownKey(t.Kind, t.Target), q.dedupeKey(t.Kind, t.Target)
	var cdMod int64
	for attempt := 0; attempt < 6; attempt++ {
		val, err := json.Marshal(&t)
		if err != nil {
			return Task{}, false, err
		}
		cmps := []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(ck), "=", cdMod)}
		ops := []clientv3.Op{clientv3.OpPut(q.taskKey(id), string(val))}
		if t.Waiting {
			ops = append(ops, clientv3.OpPut(q.waitingKey(id), t.Kind))
			for _, d := range t.DependsOn {
				cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(q.taskKey(d)), ">", 0))
				// The edge lists all of t's dependencies, so that settling t after
				// one of them finishes takes a single read.
				ops = append(ops, clientv3.OpPut(q.edgeKey(d, id), strings.Join(t.DependsOn, ",")))
			}
		} else {
			// Tasks with dependencies are never deduplicated.
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(dk), "=", 0))
			ops = append(ops, clientv3.OpPut(q.queueKey(&t), t.Target), clientv3.OpPut(dk, id))
		}
		resp, err := q.c.cli.Txn(ctx).If(cmps...).Then(ops...).Else(clientv3.OpGet(ck), clientv3.OpGet(dk)).Commit()
		if err != nil {
			return fail(err)
		}
		if resp.Succeeded {
			q.c.metrics.enqueued.WithLabelValues(t.Kind, "created").Inc()
			if !t.Waiting {
				return t, true, nil
			}
			return q.settleNew(ctx, t, resp.Header.Revision), true, nil
		}
		now := time.Now().UTC()
		if ckvs := resp.Responses[0].GetResponseRange().Kvs; modOf(ckvs) != cdMod {
			cdMod = modOf(ckvs)
			cd := q.decodeCooldown(ckvs, now)
			t.Failures, t.NotBefore = cd.Failures, time.Time{}
			if spec.NotBefore.After(now) {
				t.NotBefore = spec.NotBefore.UTC()
			}
			if !spec.IgnoreCooldown && cd.Until.After(now) && cd.Until.After(t.NotBefore) {
				t.NotBefore = cd.Until
			}
			continue
		}
		if t.Waiting {
			for _, d := range t.DependsOn {
				if _, err := q.GetTask(ctx, d); errors.Is(err, ErrTaskNotFound) {
					return fail(fmt.Errorf("%w: %s", ErrUnknownDependency, d))
				}
			}
			continue // a dependency vanished and came back? look again
		}
		dkvs := resp.Responses[1].GetResponseRange().Kvs
		if len(dkvs) == 0 {
			continue
		}
		existing, mod, err := q.getTask(ctx, string(dkvs[0].Value))
		if err == nil && !existing.State.Terminal() {
			if spec.IgnoreCooldown && existing.State == StateQueued && existing.NotBefore.After(now) {
				// A manual request for a task that is backing off: make it ready now.
				hastened, ok, err := q.hasten(ctx, existing, mod)
				if err != nil {
					return Task{}, false, err
				}
				if !ok {
					continue // changed meanwhile; look again
				}
				existing = hastened
			}
			q.c.metrics.enqueued.WithLabelValues(t.Kind, "deduplicated").Inc()
			return existing, false, nil
		}
		if err != nil && !errors.Is(err, ErrTaskNotFound) {
			return Task{}, false, err
		}
		// A dedupe key whose task has finished (or is gone) is stale: finishing
		// deletes it in the same transaction, so this is only a leftover. Remove it
		// if nobody replaced it meanwhile, then try again.
		if _, err := q.c.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(dk), "=", dkvs[0].ModRevision)).
			Then(clientv3.OpDelete(dk)).Commit(); err != nil {
			return fail(err)
		}
	}
	return fail(ErrConflict)
}

// settleNew resolves a task just enqueued waiting at revision mod: promoted if its
// dependencies are all done, failed if one failed. Its edges were written before
// the dependencies are checked here, and a finishing task reads its edges after its
// own state changed, so whichever happens second settles the task; both may try
// and the compare-and-swap lets one win. Nothing depends on a new task yet, so
// there is nothing to cascade to.
func (q *Queue) settleNew(ctx context.Context, t Task, mod int64) Task {
	_, settled, err := q.resolveLoaded(ctx, t, mod)
	if err != nil {
		// Stays waiting; the recoverer settles it.
		q.c.log.Warn("settle new task", "task", t.ID, "err", err)
		return t
	}
	return settled
}

func modOf(kvs []*mvccpb.KeyValue) int64 {
	if len(kvs) == 0 {
		return 0
	}
	return kvs[0].ModRevision
}

// hasten clears the NotBefore of queued task t (read at mod) and moves it to the
// front of its queue; ok is false if the task changed meanwhile.
func (q *Queue) hasten(ctx context.Context, t Task, mod int64) (Task, bool, error) {
	oldKey := q.queueKey(&t)
	t.NotBefore = time.Time{}
	val, err := json.Marshal(&t)
	if err != nil {
		return Task{}, false, err
	}
	resp, err := q.c.cli.Txn(ctx).If(
		clientv3.Compare(clientv3.ModRevision(q.taskKey(t.ID)), "=", mod),
		clientv3.Compare(clientv3.CreateRevision(oldKey), ">", 0),
	).Then(
		clientv3.OpPut(q.taskKey(t.ID), string(val)),
		clientv3.OpDelete(oldKey),
		clientv3.OpPut(q.queueKey(&t), t.Target),
	).Commit()
	if err != nil {
		return Task{}, false, fmt.Errorf("hasten task %s: %w", t.ID, err)
	}
	return t, resp.Succeeded, nil
}

// GetTask returns the task with id, or ErrTaskNotFound.
func (q *Queue) GetTask(ctx context.Context, id string) (Task, error) {
	t, _, err := q.getTask(ctx, id)
	return t, err
}

func (q *Queue) getTask(ctx context.Context, id string) (Task, int64, error) {
	resp, err := q.c.cli.Get(ctx, q.taskKey(id))
	if err != nil {
		return Task{}, 0, fmt.Errorf("get task %s: %w", id, err)
	}
	if len(resp.Kvs) == 0 {
		return Task{}, 0, fmt.Errorf("task %s: %w", id, ErrTaskNotFound)
	}
	var t Task
	if err := json.Unmarshal(resp.Kvs[0].Value, &t); err != nil {
		return Task{}, 0, fmt.Errorf("decode task %s: %w", id, err)
	}
	return t, resp.Kvs[0].ModRevision, nil
}

// TaskFilter selects tasks for ListTasks; empty fields match everything.
type TaskFilter struct {
	Kind   string
	Target string
	States []State
	// Limit caps the result (default and maximum 10000).
	Limit int
}

// ListTasks returns matching tasks in id (creation) order, for the admin API.
func (q *Queue) ListTasks(ctx context.Context, f TaskFilter) ([]Task, error) {
	limit := f.Limit
	if limit <= 0 || limit > 10000 {
		limit = 10000
	}
	var out []Task
	err := q.scanPrefix(ctx, q.c.key("tasks")+"/", 500, func(kvs []*kv) (bool, error) {
		for _, e := range kvs {
			var t Task
			if err := json.Unmarshal(e.value, &t); err != nil {
				continue
			}
			if (f.Kind != "" && t.Kind != f.Kind) || (f.Target != "" && t.Target != f.Target) ||
				(len(f.States) > 0 && !slices.Contains(f.States, t.State)) {
				continue
			}
			out = append(out, t)
			if len(out) >= limit {
				return false, nil
			}
		}
		return true, nil
	})
	return out, err
}

// kv is a key-value pair read by scanPrefix.
type kv struct {
	key, value []byte
	mod        int64
}

// scanPrefix reads the keys under pfx in key order, page keys at a time, and hands
// each page to fn until fn returns false or the keys run out.
func (q *Queue) scanPrefix(ctx context.Context, pfx string, page int64, fn func([]*kv) (bool, error)) error {
	end := clientv3.GetPrefixRangeEnd(pfx)
	from := pfx
	for {
		resp, err := q.c.cli.Get(ctx, from, clientv3.WithRange(end), clientv3.WithLimit(page))
		if err != nil {
			return fmt.Errorf("scan %s: %w", pfx, err)
		}
		if len(resp.Kvs) == 0 {
			return nil
		}
		kvs := make([]*kv, len(resp.Kvs))
		for i, e := range resp.Kvs {
			kvs[i] = &kv{key: e.Key, value: e.Value, mod: e.ModRevision}
		}
		more, err := fn(kvs)
		if err != nil || !more || !resp.More {
			return err
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// Cooldown is the failure record of a kind on a target (P/cooldown/<kind>/<hex>).
type Cooldown struct {
	Kind        string    `json:"kind"`
	Target      string    `json:"target"`
	Failures    int       `json:"failures"`
	LastFailure time.Time `json:"last_failure"`
	// Until is when new tasks may run again; zero below the threshold.
	Until     time.Time `json:"until,omitzero"`
	LastError string    `json:"last_error,omitempty"`
}

// stale reports whether a record has outlived CooldownMax since its last failure,
// after which its count no longer applies.
func (q *Queue) stale(cd Cooldown, now time.Time) bool {
	return now.Sub(cd.LastFailure) > max(q.cfg.CooldownMax, q.cfg.CooldownBase)
}

func (q *Queue) readCooldown(ctx context.Context, kind, target string, now time.Time) (Cooldown, int64, error) {
	resp, err := q.c.cli.Get(ctx, q.cooldownKey(kind, target))
	if err != nil {
		return Cooldown{}, 0, fmt.Errorf("read cooldown %s %q: %w", kind, target, err)
	}
	cd := q.decodeCooldown(resp.Kvs, now)
	cd.Kind, cd.Target = kind, target
	return cd, modOf(resp.Kvs), nil
}

// decodeCooldown decodes a failure record; absent, unreadable or stale is zero.
func (q *Queue) decodeCooldown(kvs []*mvccpb.KeyValue, now time.Time) Cooldown {
	var cd Cooldown
	if len(kvs) == 0 || json.Unmarshal(kvs[0].Value, &cd) != nil || q.stale(cd, now) {
		return Cooldown{}
	}
	return cd
}

// recordFailure counts a failure of kind on target and starts or extends its
// cooldown. The count is a compare-and-swap with a bounded number of tries; losing
// them all only loses one count.
func (q *Queue) recordFailure(ctx context.Context, kind, target, msg string) {
	k := q.cooldownKey(kind, target)
	for attempt := 0; attempt < 8; attempt++ {
		now := time.Now().UTC()
		cd, mod, err := q.readCooldown(ctx, kind, target, now)
		if err != nil {
			break
		}
		cd.Failures++
		cd.LastFailure = now
		cd.LastError = truncate(msg, 512)
		cd.Until = time.Time{}
		if d := q.cfg.cooldownFor(cd.Failures); d > 0 {
			cd.Until = now.Add(d)
		}
		val, _ := json.Marshal(&cd)
		resp, err := q.c.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(k), "=", mod)).
			Then(clientv3.OpPut(k, string(val))).Commit()
		if err != nil {
			break
		}
		if resp.Succeeded {
			if !cd.Until.IsZero() {
				q.c.log.Warn("task failures put a target in cooldown", "kind", kind, "target", target,
					"failures", cd.Failures, "until", cd.Until)
			}
			return
		}
	}
	q.c.log.Warn("could not record task failure for cooldown", "kind", kind, "target", target)
}

// ListCooldowns returns the failure records still in force (count or window).
func (q *Queue) ListCooldowns(ctx context.Context) ([]Cooldown, error) {
	now := time.Now()
	var out []Cooldown
	err := q.scanPrefix(ctx, q.c.key("cooldown")+"/", 500, func(kvs []*kv) (bool, error) {
		for _, e := range kvs {
			var cd Cooldown
			if json.Unmarshal(e.value, &cd) == nil && !q.stale(cd, now) {
				out = append(out, cd)
			}
		}
		return true, nil
	})
	return out, err
}
