package coord_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/lancectx/lancectx/coord"
	"github.com/lancectx/lancectx/coord/etcdtest"
)

// incarnation is a candidate value the way the masters write it: an id that is the
// process's identity, plus what changes with every start.
func incarnation(id string, started time.Time) string {
	b, _ := json.Marshal(map[string]any{"id": id, "started_at": started})
	return string(b)
}

func sameID(id string) func(string) bool {
	return func(v string) bool {
		var c struct {
			ID string `json:"id"`
		}
		return json.Unmarshal([]byte(v), &c) == nil && c.ID == id
	}
}

// leaseAlive reports whether etcd still has the lease.
func leaseAlive(t *testing.T, c *coord.Client, id clientv3.LeaseID) bool {
	t.Helper()
	resp, err := c.Etcd().TimeToLive(testCtx(t, 5*time.Second), id)
	if err != nil {
		t.Fatalf("lease %x time to live: %v", int64(id), err)
	}
	return resp.TTL > 0
}

// TestTakeOverCandidacyOfACrashedIncarnation: a process leads with a 60 s lease and
// dies without resigning or revoking (its lease is abandoned, alive in etcd); the
// next incarnation, with the same identity, takes over its candidacy and leads at
// once. The campaign's deadline is far below the old lease's TTL, so only the
// takeover lets it win; the outcome is checked by state (the old lease is gone, the
// new session leads).
func TestTakeOverCandidacyOfACrashedIncarnation(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t)
	const ttl = 60 * time.Second
	ctx := testCtx(t, 30*time.Second)

	old := connect(t, cl.Endpoints(), ttl, nil)
	if _, err := old.Campaign(ctx, "planner", incarnation("m1", time.Unix(1, 0))); err != nil {
		t.Fatal(err)
	}
	// Another role held under the same lease, and a bystander with another identity
	// that leads a role of its own.
	if _, err := old.Campaign(ctx, "other-role", incarnation("m1", time.Unix(1, 0))); err != nil {
		t.Fatal(err)
	}
	bystander := connect(t, cl.Endpoints(), ttl, nil)
	if _, err := bystander.Campaign(ctx, "bystander-role", incarnation("m2", time.Unix(1, 0))); err != nil {
		t.Fatal(err)
	}
	li, err := bystander.Leader(ctx, "planner")
	if err != nil {
		t.Fatal(err)
	}
	oldLease := li.Lease
	old.Crash() // no resign, no revoke: the lease stays for its 60 s
	if !leaseAlive(t, bystander, oldLease) {
		t.Fatal("the crashed incarnation's lease is already gone: the test would prove nothing")
	}

	next := connect(t, cl.Endpoints(), ttl, nil)
	sess, err := next.Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A candidate with another identity is not touched.
	taken, err := next.TakeOverCandidacy(ctx, "bystander-role", sameID("m1"))
	if err != nil || len(taken) != 0 {
		t.Fatalf("take over bystander-role as m1: %+v, %v; want nothing taken", taken, err)
	}
	taken, err = next.TakeOverCandidacy(ctx, "planner", sameID("m1"))
	if err != nil {
		t.Fatal(err)
	}
	if len(taken) != 1 || taken[0].Lease != oldLease || !taken[0].Leader || taken[0].RemainingTTL <= 0 {
		t.Fatalf("taken over: %+v; want the leader under lease %x, revoked while alive", taken, int64(oldLease))
	}
	if leaseAlive(t, next, oldLease) {
		t.Fatal("the earlier incarnation's lease is still alive after the takeover")
	}
	// The revoked lease took the rest of what the old process held with it.
	if _, err := next.Leader(ctx, "other-role"); err == nil {
		t.Error("the earlier incarnation still leads other-role")
	}

	cctx, cancel := context.WithTimeout(ctx, 15*time.Second) // far below the old lease's 60 s
	defer cancel()
	l, err := next.Campaign(cctx, "planner", incarnation("m1", time.Unix(2, 0)))
	if err != nil {
		t.Fatalf("campaign after the takeover: %v", err)
	}
	li, err = bystander.Leader(ctx, "planner")
	if err != nil || li.Lease != sess.Lease() || li.Token != l.Token() {
		t.Fatalf("leader %+v, %v; want the new incarnation (lease %x)", li, err, int64(sess.Lease()))
	}
	// The bystander and the new incarnation's own candidacy are left alone: the
	// process never takes over from itself.
	taken, err = next.TakeOverCandidacy(ctx, "planner", sameID("m1"))
	if err != nil || len(taken) != 0 {
		t.Fatalf("second takeover: %+v, %v; want nothing taken", taken, err)
	}
	if l.Ctx().Err() != nil {
		t.Fatal("the new term ended")
	}
	if li, err := next.Leader(ctx, "bystander-role"); err != nil || !leaseAlive(t, next, li.Lease) {
		t.Fatalf("bystander-role: %+v, %v", li, err)
	}
}

func TestCandidatesInCampaignOrder(t *testing.T) {
	t.Parallel()
	cl := etcdtest.Start(t)
	ctx := testCtx(t, 30*time.Second)
	a := connect(t, cl.Endpoints(), 30*time.Second, nil)
	b := connect(t, cl.Endpoints(), 30*time.Second, nil)
	if cands, err := a.Candidates(ctx, "planner"); err != nil || len(cands) != 0 {
		t.Fatalf("no campaign yet: %+v, %v", cands, err)
	}
	la, err := a.Campaign(ctx, "planner", "a")
	if err != nil {
		t.Fatal(err)
	}
	bctx, bcancel := context.WithCancel(ctx)
	defer bcancel()
	bWins := campaignAsync(bctx, b, "planner", "b")
	var cands []coord.Candidate
	eventually(t, 10*time.Second, "b to stand as a candidate", func() bool {
		cands, err = a.Candidates(ctx, "planner")
		return err == nil && len(cands) == 2
	})
	sa, _ := a.Session(ctx)
	sb, _ := b.Session(ctx)
	if !cands[0].Leader || cands[0].Value != "a" || cands[0].Lease != sa.Lease() || cands[0].Token != la.Token() ||
		cands[1].Leader || cands[1].Value != "b" || cands[1].Lease != sb.Lease() || cands[1].Token <= cands[0].Token {
		t.Fatalf("candidates %+v", cands)
	}
	if err := la.Resign(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-bWins
	if r.err != nil {
		t.Fatal(r.err)
	}
	if cands, err = a.Candidates(ctx, "planner"); err != nil || len(cands) != 1 || !cands[0].Leader || cands[0].Value != "b" {
		t.Fatalf("after a resigned: %+v, %v", cands, err)
	}
	if _, err := a.Candidates(ctx, "no/such"); err == nil {
		t.Fatal("an invalid role was accepted")
	}
}
