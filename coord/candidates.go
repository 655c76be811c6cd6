package coord

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Candidate is one campaigner of an election role: its key P/election/<role>/<lease>
// and what it campaigned with.
type Candidate struct {
	// Value is what the candidate campaigned with (Campaign's value).
	Value string
	// Lease is the lease of the candidate's process; the key ends with it.
	Lease clientv3.LeaseID
	// Token is the create revision of the candidate's key: its fencing token should
	// it lead. Candidates are served in Token order.
	Token int64
	// Leader is true for the first candidate, the one that holds the role.
	Leader bool
}

// Candidates lists the candidates of role in campaign order: the first one is the
// leader, the others wait in line. Every candidate key is attached to its process's
// lease, so the list is the processes alive (or dead for less than a lease TTL)
// that campaign for role. It needs no session.
func (c *Client) Candidates(ctx context.Context, role string) ([]Candidate, error) {
	if err := validName("election role", role); err != nil {
		return nil, err
	}
	resp, err := c.cli.Get(ctx, c.key("election", role)+"/", clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		return nil, fmt.Errorf("list candidates of %q: %w", role, err)
	}
	out := make([]Candidate, 0, len(resp.Kvs))
	for i, kv := range resp.Kvs {
		out = append(out, Candidate{Value: string(kv.Value), Lease: clientv3.LeaseID(kv.Lease), Token: kv.CreateRevision, Leader: i == 0})
	}
	return out, nil
}

// TakenOver describes a candidacy that TakeOverCandidacy ended.
type TakenOver struct {
	Candidate
	// RemainingTTL is what was left of the lease when it was revoked (-1 when it
	// had just expired by itself). A lease renewed a moment ago has about its whole
	// TTL left; so does every lease right after an etcd restart, which refreshes
	// them all, so this is a hint, not proof, that the earlier process was alive.
	RemainingTTL time.Duration
	// GrantedTTL is the TTL the lease was granted with.
	GrantedTTL time.Duration
}

// TakeOverCandidacy ends the candidacy of earlier incarnations of this process in
// role, so that a campaign that follows does not wait a lease TTL behind a process
// that is gone: it revokes the lease of every candidate of role, other than this
// Client's own session, whose value same says is this process's. It returns what it
// revoked (nothing when there was nothing to take over).
//
// Why it is safe: the caller's identity (what same matches) must be unique to one
// running process at a time, e.g. persisted in a data directory that only one
// process can use at once, or a StatefulSet pod name. A candidate with that identity
// under another lease is then this process's previous incarnation, which crashed or
// was killed without resigning; its lease would otherwise keep the role (and
// everything else held under that lease) for up to a TTL, and after an etcd restart
// for a whole TTL. Revoking the lease ends all of it at once: its leadership, its
// locks, its task claims (recovery requeues those tasks, as for any dead executor)
// and its worker registrations.
//
// Its danger: if two live processes are given the same identity, the one that calls
// this ends the other's session, with everything it held. The victim's Client
// notices the loss and starts a new session, as after any lease loss, and its
// holders stop: no fenced write of the old term can land after the revoke. So
// call it once per process start, before the first campaign, not before every
// campaign: two processes sharing an identity then take over from each other at most
// once each, instead of evicting each other forever. Each takeover is logged at warn
// level with the revoked lease's remaining TTL.
func (c *Client) TakeOverCandidacy(ctx context.Context, role string, same func(value string) bool) ([]TakenOver, error) {
	if same == nil {
		return nil, fmt.Errorf("%w: take over %q: no identity match", ErrInvalidArgument, role)
	}
	sess, err := c.Session(ctx)
	if err != nil {
		return nil, fmt.Errorf("take over candidacy of %q: %w", role, err)
	}
	cands, err := c.Candidates(ctx, role)
	if err != nil {
		return nil, fmt.Errorf("take over candidacy of %q: %w", role, err)
	}
	var out []TakenOver
	for _, cand := range cands {
		if cand.Lease == sess.Lease() || cand.Lease == clientv3.NoLease || !same(cand.Value) {
			continue
		}
		t := TakenOver{Candidate: cand, RemainingTTL: -1}
		// For the log only: how recently was the lease renewed?
		if ttl, err := c.cli.TimeToLive(ctx, cand.Lease); err == nil && ttl.TTL >= 0 {
			t.RemainingTTL = time.Duration(ttl.TTL) * time.Second
			t.GrantedTTL = time.Duration(ttl.GrantedTTL) * time.Second
		}
		if _, err := c.cli.Revoke(ctx, cand.Lease); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return out, fmt.Errorf("take over candidacy of %q: revoke lease %x of an earlier incarnation: %w", role, int64(cand.Lease), err)
		}
		c.log.Warn("took over the candidacy of an earlier incarnation of this process: it did not resign (crashed or killed); "+
			"its lease is revoked, with its leadership, locks and task claims. If that process is in fact still running, "+
			"two processes were given the same identity: give each its own",
			"role", role, "value", cand.Value, "lease", fmt.Sprintf("%x", int64(cand.Lease)), "was_leader", cand.Leader,
			"remaining_ttl", t.RemainingTTL.String(), "granted_ttl", t.GrantedTTL.String())
		out = append(out, t)
	}
	return out, nil
}
