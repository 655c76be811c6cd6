package master

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/objstore/faults"
	"github.com/lancectx/lancectx/storekind"
	"github.com/lancectx/lancectx/wal"
)

func rows(n int, round int64) []ExperimentStats {
	out := make([]ExperimentStats, n)
	for i := range out {
		out[i] = ExperimentStats{Name: fmt.Sprintf("exp-%05d", i), URI: fmt.Sprintf("exp-%05d.rollout.lance", i),
			RowCount: int64(i) * round, FragmentCount: int64(i % 40), LastCompaction: NoCompaction, ScannedAt: round, Version: round}
	}
	return out
}

func TestStatsRoundIsOneVersionWhateverTheNumberOfExperiments(t *testing.T) {
	ctx := context.Background()
	st := objstore.NewMem()
	s, err := OpenStats(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if s.Snapshot().Version != 0 || len(s.Snapshot().Rows) != 0 {
		t.Fatal("a missing table must read as an empty snapshot")
	}
	for round := int64(1); round <= 3; round++ {
		v, err := s.WriteRound(ctx, rows(10000, round), false)
		if err != nil {
			t.Fatal(err)
		}
		if v != uint64(round) {
			t.Fatalf("round %d wrote version %d: one version per round expected", round, v)
		}
	}
	snap := s.Snapshot()
	if len(snap.Rows) != 10000 || snap.Version != 3 {
		t.Fatalf("snapshot %d rows at version %d", len(snap.Rows), snap.Version)
	}
	if r, ok := snap.Get("exp-00042"); !ok || r.RowCount != 42*3 {
		t.Fatalf("row %+v %v", r, ok)
	}
	// An empty round (every observation failed) must not wipe the table.
	if v, err := s.WriteRound(ctx, nil, false); err != nil || v != 3 {
		t.Fatalf("empty round: %v %d", err, v)
	}
	// Another replica loads the same snapshot.
	other, err := OpenStats(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if other.Snapshot().Version != 3 || len(other.Snapshot().Rows) != 10000 {
		t.Fatalf("replica snapshot %d/%d", other.Snapshot().Version, len(other.Snapshot().Rows))
	}
	// A single-row upsert is one more version and is visible at once.
	row := rows(1, 9)[0]
	row.Name = "exp-new"
	if v, err := s.Upsert(ctx, row); err != nil || v != 4 {
		t.Fatalf("upsert: %v %d", err, v)
	}
	if _, ok := s.Snapshot().Get("exp-new"); !ok || len(s.Snapshot().Rows) != 10001 {
		t.Fatal("upserted row not in the snapshot")
	}
	if changed, err := other.Reload(ctx); err != nil || !changed {
		t.Fatalf("reload: %v %v", changed, err)
	}
	if _, ok := other.Snapshot().Get("exp-new"); !ok {
		t.Fatal("replica missed the upsert")
	}
}

// gateStore holds the writes (Put, PutIfAbsent) of requests whose context is marked by
// held until release is closed, and closes entered when the first one arrives: a writer
// stuck inside its storage I/O, at a point the test knows it has reached.
type gateStore struct {
	objstore.Store
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

type heldKey struct{}

// held marks ctx: the writes made under it wait at the gate.
func held(ctx context.Context) context.Context { return context.WithValue(ctx, heldKey{}, true) }

func newGate(t *testing.T, st objstore.Store) *gateStore {
	g := &gateStore{Store: st, entered: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(g.open) // never leave a writer stuck behind a failed test
	return g
}

func (g *gateStore) open() {
	select {
	case <-g.release:
	default:
		close(g.release)
	}
}

func (g *gateStore) hold(ctx context.Context) error {
	if ctx.Value(heldKey{}) == nil {
		return nil
	}
	g.once.Do(func() { close(g.entered) })
	select {
	case <-g.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gateStore) Put(ctx context.Context, key string, r io.Reader) error {
	if err := g.hold(ctx); err != nil {
		return err
	}
	return g.Store.Put(ctx, key, r)
}

func (g *gateStore) PutIfAbsent(ctx context.Context, key string, r io.Reader) error {
	if err := g.hold(ctx); err != nil {
		return err
	}
	return g.Store.PutIfAbsent(ctx, key, r)
}

// hangGuard bounds how long a test waits for something that must happen, so that a
// regression fails the test instead of hanging it. It is not a timing assertion.
const hangGuard = 30 * time.Second

// await returns what ch delivers, failing the test if nothing comes within hangGuard.
func await[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	select {
	case v := <-ch:
		return v
	case <-ctx.Done():
		t.Fatalf("%s: nothing after %s", what, hangGuard)
		var zero T
		return zero
	}
}

type commitOutcome struct {
	res CommitResult
	err error
}

// async runs a stats write in a goroutine and delivers its outcome.
func async(f func() (CommitResult, error)) <-chan commitOutcome {
	ch := make(chan commitOutcome, 1)
	go func() {
		res, err := f()
		ch <- commitOutcome{res, err}
	}()
	return ch
}

// compacted is the row update of a refresh after a compaction (as refreshAfterCompaction).
func compacted(at int64) func(cur ExperimentStats, ok bool) ExperimentStats {
	return func(cur ExperimentStats, ok bool) ExperimentStats {
		cur.LastCompaction, cur.TotalCompactions = at, cur.TotalCompactions+1
		return cur
	}
}

// statsOnStorage reads the latest stats version afresh (another replica's view).
func statsOnStorage(t *testing.T, st objstore.Store) *StatsSnapshot {
	t.Helper()
	s, err := OpenStats(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	return s.Snapshot()
}

// TestStatsReadersNeverWaitOnAWriter: no exclusion orders the stats writers, and none
// is needed. While a round's write is stuck inside its storage I/O, readers answer (the
// snapshot, and a replica's reload from storage), and a refresh through the same
// StatsStore commits; the stuck round then finds the table moved past the version it
// built on and fails with a conflict (one attempt allowed here) instead of overwriting
// the refresh.
func TestStatsReadersNeverWaitOnAWriter(t *testing.T) {
	ctx := context.Background()
	base := objstore.NewMem()
	gate := newGate(t, base)
	s, err := OpenStats(ctx, gate)
	if err != nil {
		t.Fatal(err)
	}
	s.attempts = 1
	if _, err := s.WriteRound(ctx, rows(100, 1), false); err != nil {
		t.Fatal(err)
	}
	round := async(func() (CommitResult, error) { return s.commitRound(held(ctx), rows(100, 2), false) })
	await(t, gate.entered, "the round's write to reach storage")

	// Readers: the snapshot, and another replica loading from storage.
	if snap := s.Snapshot(); snap.Version != 1 || len(snap.Rows) != 100 {
		t.Fatalf("snapshot during the write: version %d, %d rows", snap.Version, len(snap.Rows))
	}
	replica := NewStatsStore(base)
	loaded := async(func() (CommitResult, error) {
		_, err := replica.Reload(ctx)
		return CommitResult{Version: replica.Snapshot().Version}, err
	})
	if o := await(t, loaded, "a replica's reload while a write is stuck"); o.err != nil || o.res.Version != 1 {
		t.Fatalf("replica reload: version %d, %v", o.res.Version, o.err)
	}
	// A refresh through the same store commits while the round is stuck.
	refresh := async(func() (CommitResult, error) { return s.update(ctx, "rollout", "exp-00007", compacted(1000)) })
	o := await(t, refresh, "a refresh while a round's write is stuck (does it wait on the writer?)")
	if o.err != nil || o.res.Version != 2 || o.res.Conflicts != 0 {
		t.Fatalf("refresh: %+v %v", o.res, o.err)
	}
	if r, _ := s.Snapshot().Get("exp-00007"); s.Snapshot().Version != 2 || r.TotalCompactions != 1 {
		t.Fatalf("snapshot after the refresh: version %d, row %+v", s.Snapshot().Version, r)
	}

	gate.open()
	o = await(t, round, "the stuck round")
	if !errors.Is(o.err, lance.ErrConflict) || o.res.Conflicts != 1 || o.res.Version != 0 {
		t.Fatalf("the stuck round: %+v %v, want a conflict", o.res, o.err)
	}
	if n, err := lance.CountVersions(ctx, base); err != nil || n != 2 {
		t.Fatalf("%d versions on storage (%v), want 2: the table and the refresh", n, err)
	}
	got := statsOnStorage(t, base)
	if got.Version != 2 || len(got.Rows) != 100 {
		t.Fatalf("on storage: version %d, %d rows", got.Version, len(got.Rows))
	}
	for i, r := range got.Rows {
		want := int64(0)
		if r.Name == "exp-00007" {
			want = 1
		}
		if r.RowCount != int64(i) || r.ScannedAt != 1 || r.TotalCompactions != want {
			t.Fatalf("row %+v: the stuck round overwrote the table, or the refresh was lost", r)
		}
	}
	if s.Snapshot().Version != 2 {
		t.Fatalf("snapshot version %d after the failed round", s.Snapshot().Version)
	}
}

// TestStatsConcurrentWritersEachLandOnce: two writers race on one stats table, each
// with its own StatsStore as two masters have (a round and a refresh, both ways round;
// two refreshes; two rounds). The first is held inside its storage I/O while the second
// commits; released, it conflicts, rebuilds on the latest version and lands. Every
// commit lands exactly once (one version each), no compaction count is lost, and a
// stale observation never replaces a newer one.
func TestStatsConcurrentWritersEachLandOnce(t *testing.T) {
	type race struct {
		name string
		// first is held in its I/O; second runs meanwhile (on the other store).
		first, second func(ctx context.Context, s *StatsStore) (CommitResult, error)
		// check verifies the table once both writers landed.
		check func(t *testing.T, got *StatsSnapshot)
	}
	round := func(r int64) func(context.Context, *StatsStore) (CommitResult, error) {
		return func(ctx context.Context, s *StatsStore) (CommitResult, error) {
			return s.commitRound(ctx, rows(10, r), false)
		}
	}
	refresh := func(at int64) func(context.Context, *StatsStore) (CommitResult, error) {
		return func(ctx context.Context, s *StatsStore) (CommitResult, error) {
			return s.update(ctx, "rollout", "exp-00003", compacted(at))
		}
	}
	row := func(t *testing.T, got *StatsSnapshot) ExperimentStats {
		t.Helper()
		r, ok := got.Get("exp-00003")
		if !ok {
			t.Fatal("exp-00003 missing")
		}
		return r
	}
	races := []race{
		{"round held, refresh lands first", round(2), refresh(1000), func(t *testing.T, got *StatsSnapshot) {
			if r := row(t, got); r.TotalCompactions != 1 || r.LastCompaction != 1000 || r.RowCount != 3*2 {
				t.Fatalf("the round lost the refresh's counters or its own observation: %+v", r)
			}
		}},
		{"refresh held, round lands first", refresh(1000), round(2), func(t *testing.T, got *StatsSnapshot) {
			if r := row(t, got); r.TotalCompactions != 1 || r.LastCompaction != 1000 || r.RowCount != 3*2 {
				t.Fatalf("the refresh lost the round's observation or counted wrong: %+v", r)
			}
		}},
		{"two refreshes", refresh(1000), refresh(2000), func(t *testing.T, got *StatsSnapshot) {
			if r := row(t, got); r.TotalCompactions != 2 || r.LastCompaction != 1000 {
				t.Fatalf("two compactions counted as %d: %+v", r.TotalCompactions, r)
			}
		}},
		{"two rounds", round(2), round(3), func(t *testing.T, got *StatsSnapshot) {
			for i, r := range got.Rows {
				if r.ScannedAt != 3 || r.RowCount != int64(i)*3 {
					t.Fatalf("the older round replaced a newer observation: %+v", r)
				}
			}
		}},
	}
	stores := map[string]func(t *testing.T) objstore.Store{
		"mem": func(*testing.T) objstore.Store { return objstore.NewMem() },
		"file": func(t *testing.T) objstore.Store {
			st, err := objstore.NewFile(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			return st
		},
	}
	for sname, mk := range stores {
		for _, rc := range races {
			t.Run(sname+"/"+rc.name, func(t *testing.T) {
				ctx := context.Background()
				base := mk(t)
				if _, err := NewStatsStore(base).WriteRound(ctx, rows(10, 1), false); err != nil {
					t.Fatal(err)
				}
				gate := newGate(t, base)
				a, b := NewStatsStore(gate), NewStatsStore(base)
				first := async(func() (CommitResult, error) { return rc.first(held(ctx), a) })
				await(t, gate.entered, "the first writer to reach storage")
				res, err := rc.second(ctx, b)
				if err != nil || res.Version != 2 || res.Conflicts != 0 {
					t.Fatalf("second writer: %+v %v", res, err)
				}
				gate.open()
				o := await(t, first, "the first writer")
				if o.err != nil || o.res.Version != 3 || o.res.Conflicts != 1 {
					t.Errorf("first writer: %+v %v, want version 3 after one conflict", o.res, o.err)
				}
				if n, err := lance.CountVersions(ctx, base); err != nil || n != 3 {
					t.Fatalf("%d versions (%v), want 3: one per commit", n, err)
				}
				got := statsOnStorage(t, base)
				if got.Version != 3 || len(got.Rows) != 10 {
					t.Fatalf("on storage: version %d, %d rows", got.Version, len(got.Rows))
				}
				if mine := a.Snapshot(); mine.Version != 3 || !slices.Equal(mine.Rows, got.Rows) {
					t.Fatalf("the writer's snapshot (version %d) differs from storage (version %d)", mine.Version, got.Version)
				}
				rc.check(t, got)
			})
		}
	}
}

func TestStatsMaintenanceReclaimsInBoundedPassesAndReportsFailures(t *testing.T) {
	ctx := context.Background()
	base := objstore.NewMem()
	s, err := OpenStats(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	for round := int64(1); round <= 60; round++ {
		if _, err := s.WriteRound(ctx, rows(20, round), false); err != nil {
			t.Fatal(err)
		}
	}
	reg := prometheus.NewRegistry()
	// The first passes run over a store whose bulk delete is down: failures count, the
	// backlog shows as unreclaimed, nothing breaks.
	cfg, _ := faults.Parse("fail_batch_delete_after=0")
	broken := &StatsStore{st: objstore.WithRetry(faults.Wrap(base, cfg), objstore.RetryPolicy{MaxAttempts: 2, BaseDelay: time.Millisecond, ThrottleDelay: time.Millisecond})}
	broken.snap.Store(s.Snapshot())
	m := NewStatsMaintainer(broken, nil, reg)
	opts := StatsMaintenanceOptions{HistoryTTL: 0, MaxObjects: 40, Timeout: 10 * time.Second}
	for i := 0; i < 2; i++ {
		if res, err := m.Run(ctx, opts); err == nil {
			t.Fatalf("maintenance over a failing bulk delete must fail: %+v", res)
		}
	}
	if got := testutil.ToFloat64(m.metrics.consecutive); got != 2 {
		t.Fatalf("consecutive failures %v", got)
	}
	// The whole backlog: every version but the latest, which no pass may remove (the
	// same count a version gap since a successful pass gives).
	if got := testutil.ToFloat64(m.metrics.unreclaimed); got != 59 {
		t.Fatalf("unreclaimed before any success: %v, want the whole backlog (59 old versions)", got)
	}
	// Healthy store: bounded passes finish the backlog; readers kept their snapshot.
	m.stats = s
	passes := 0
	for {
		passes++
		res, err := m.Run(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		if res.Cleanup.ObjectsDeleted > 40 {
			t.Fatalf("pass deleted %d objects over a budget of 40", res.Cleanup.ObjectsDeleted)
		}
		if res.Cleanup.Complete {
			break
		}
		if passes > 20 {
			t.Fatal("maintenance never completes")
		}
	}
	if passes < 3 || testutil.ToFloat64(m.metrics.consecutive) != 0 || testutil.ToFloat64(m.metrics.unreclaimed) != 0 {
		t.Fatalf("passes %d consecutive %v unreclaimed %v", passes, testutil.ToFloat64(m.metrics.consecutive), testutil.ToFloat64(m.metrics.unreclaimed))
	}
	n, err := lance.CountVersions(ctx, base)
	if err != nil || n != 1 {
		t.Fatalf("versions left %d %v", n, err)
	}
	if testutil.ToFloat64(m.metrics.removed) < 59 {
		t.Fatalf("versions removed %v", testutil.ToFloat64(m.metrics.removed))
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatalf("metric lint: %v %v", problems, err)
	}
	if _, err := s.Reload(ctx); err != nil || len(s.Snapshot().Rows) != 20 {
		t.Fatalf("stats after maintenance: %v %d", err, len(s.Snapshot().Rows))
	}
}

// TestStatsCommitGivesUpAfterBoundedAttempts: a writer that loses every race stops after
// statsCommitAttempts attempts with the conflict, having committed nothing; an error
// other than a lost race is not retried.
func TestStatsCommitGivesUpAfterBoundedAttempts(t *testing.T) {
	ctx := context.Background()
	base := objstore.NewMem()
	s, err := OpenStats(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.WriteRound(ctx, rows(5, 1), false); err != nil {
		t.Fatal(err)
	}
	calls := 0
	res, err := s.commit(ctx, func(context.Context, *lance.Dataset, *StatsSnapshot) (*lance.Dataset, []ExperimentStats, []ExperimentStats, error) {
		calls++
		return nil, nil, nil, fmt.Errorf("stats: write: %w", lance.ErrConflict)
	})
	if !errors.Is(err, lance.ErrConflict) || calls != statsCommitAttempts || res.Conflicts != statsCommitAttempts || res.Version != 0 {
		t.Fatalf("always losing: %d calls, %+v, %v", calls, res, err)
	}
	broken := errors.New("storage says no")
	calls = 0
	if _, err := s.commit(ctx, func(context.Context, *lance.Dataset, *StatsSnapshot) (*lance.Dataset, []ExperimentStats, []ExperimentStats, error) {
		calls++
		return nil, nil, nil, broken
	}); !errors.Is(err, broken) || calls != 1 {
		t.Fatalf("other error: %d calls, %v", calls, err)
	}
	if n, err := lance.CountVersions(ctx, base); err != nil || n != 1 || s.Snapshot().Version != 1 {
		t.Fatalf("%d versions (%v), snapshot %d", n, err, s.Snapshot().Version)
	}
}

// TestScanRoundKeepsAConcurrentRefreshsCompaction goes through the Scanner, as a master
// wires it. A scan round held inside its _stats write while another master's
// post-compaction refresh commits lands afterwards, one conflict later, with the
// compaction counted; master_stats_commit_conflicts_total says so. A refresh whose
// commit cannot reach storage returns unwritten once its wait has passed: the gate
// never opens, so its return is the bound (no clock is read).
func TestScanRoundKeepsAConcurrentRefreshsCompaction(t *testing.T) {
	ctx := context.Background()
	data := objstore.NewMem()
	createExperiment(t, data, "a", 2, 5)
	createExperiment(t, data, "b", 1, 5)
	statsSt := objstore.Prefixed(data, StatsDataset)
	gate := newGate(t, data)
	prom := prometheus.NewRegistry()
	mine := NewScanner(data, storekind.All(), NewStatsStore(objstore.Prefixed(gate, StatsDataset)), testLogger(), prom)
	other := NewScanner(data, storekind.All(), NewStatsStore(statsSt), testLogger(), nil)
	if _, err := other.Scan(ctx); err != nil {
		t.Fatal(err)
	}

	type scanOutcome struct {
		res ScanResult
		err error
	}
	scanned := make(chan scanOutcome, 1)
	go func() {
		res, err := mine.Scan(held(ctx))
		scanned <- scanOutcome{res, err}
	}()
	await(t, gate.entered, "the round's write to reach storage")
	at := time.Now().UnixMilli()
	ref, err := other.RefreshOne(ctx, storekind.Rollout, "a", hangGuard, func(row *ExperimentStats, prev ExperimentStats, ok bool) {
		row.LastCompaction, row.TotalCompactions = at, 1
		if ok {
			row.TotalCompactions = prev.TotalCompactions + 1
		}
	})
	if err != nil || !ref.Persisted || ref.Version != 2 || ref.Row.TotalCompactions != 1 || ref.Conflicts != 0 {
		t.Fatalf("refresh during the round: %+v %v", ref, err)
	}
	gate.open()
	o := await(t, scanned, "the held round")
	if o.err != nil || o.res.Version != 3 || o.res.Conflicts != 1 || o.res.Observed != 2 {
		t.Fatalf("held round: %+v %v, want version 3 after one conflict", o.res, o.err)
	}
	if got := testutil.ToFloat64(mine.metrics.conflicts.WithLabelValues("round")); got != 1 {
		t.Fatalf("round conflicts counted %v", got)
	}
	if problems, err := testutil.GatherAndLint(prom); err != nil || len(problems) > 0 {
		t.Fatalf("metric lint: %v %v", problems, err)
	}
	got := statsOnStorage(t, statsSt)
	if r, ok := got.Get("a"); !ok || r.TotalCompactions != 1 || r.LastCompaction != at || r.RowCount != 10 {
		t.Fatalf("row a after the round: %+v (the compaction must survive the round)", r)
	}
	if got.Version != 3 {
		t.Fatalf("version %d", got.Version)
	}

	// A refresh whose commit cannot reach storage.
	stuck := newGate(t, data)
	sc := NewScanner(data, storekind.All(), NewStatsStore(objstore.Prefixed(stuck, StatsDataset)), testLogger(), nil)
	res, err := sc.RefreshOne(held(ctx), storekind.Rollout, "b", 50*time.Millisecond, nil)
	if err != nil || res.Persisted || !strings.Contains(res.Skipped, "deadline") || res.Row.Name != "b" || res.Row.RowCount != 5 {
		t.Fatalf("refresh over a hung store: %+v %v", res, err)
	}
	select {
	case <-stuck.entered:
	default:
		t.Fatal("the refresh never reached storage: the test proves nothing")
	}
	if got := statsOnStorage(t, statsSt); got.Version != 3 {
		t.Fatalf("version %d after a refresh that was not written", got.Version)
	}
}

// TestStatsOldestPendingWAL: a scan records when the oldest pending WAL generation was
// sealed (0 without one), the table keeps it, and the API shows it only when set.
func TestStatsOldestPendingWAL(t *testing.T) {
	ctx := context.Background()
	data := objstore.NewMem()
	createExperiment(t, data, "walled", 1, 5)
	addGenerations(t, data, "walled", "w0", 2, 3)
	createExperiment(t, data, "quiet", 1, 5)
	sc := NewScanner(data, storekind.All(), NewStatsStore(objstore.Prefixed(data, StatsDataset)), testLogger(), nil)
	if _, err := sc.Scan(ctx); err != nil {
		t.Fatal(err)
	}
	ps, err := wal.PendingGenerations(ctx, objstore.Prefixed(data, storekind.Rollout.DatasetDir("walled")))
	if err != nil || ps.Generations != 2 || ps.Oldest.IsZero() {
		t.Fatalf("pending: %+v %v", ps, err)
	}
	got := statsOnStorage(t, objstore.Prefixed(data, StatsDataset))
	w, _ := got.Get("walled")
	q, _ := got.Get("quiet")
	if w.OldestPendingWAL != ps.Oldest.UnixMilli() || w.PendingWALGenerations != 2 || q.OldestPendingWAL != 0 {
		t.Fatalf("stored: walled %+v, quiet %+v; oldest pending sealed at %d", w, q, ps.Oldest.UnixMilli())
	}
	wj, _ := json.Marshal(summaryOf(w))
	qj, _ := json.Marshal(summaryOf(q))
	if !strings.Contains(string(wj), fmt.Sprintf(`"oldest_pending_wal_ms":%d`, w.OldestPendingWAL)) ||
		strings.Contains(string(qj), "oldest_pending_wal") {
		t.Fatalf("summaries: %s / %s", wj, qj)
	}
}

// TestStatsTableWithoutOldestPendingWAL: a table written before the column existed reads
// it as 0; the first single-row write brings the schema up (a merge-insert could not add
// the column), later ones merge-insert as usual, and no row is lost.
func TestStatsTableWithoutOldestPendingWAL(t *testing.T) {
	ctx := context.Background()
	st := objstore.NewMem()
	// The reference's columns: those before oldest_pending_wal (and kind, after it).
	old := arrow.NewSchema(statsSchema.Fields()[:statsSchema.FieldIndices("oldest_pending_wal")[0]], nil)
	if old.HasField("oldest_pending_wal") || old.HasField("kind") {
		t.Fatal("the old schema has the new column")
	}
	rec, err := statsBatch(rows(3, 1))
	if err != nil {
		t.Fatal(err)
	}
	oldRec := array.NewRecordBatch(old, rec.Columns()[:old.NumFields()], rec.NumRows())
	rec.Release()
	rdr, err := array.NewRecordReader(old, []arrow.RecordBatch{oldRec})
	oldRec.Release()
	if err != nil {
		t.Fatal(err)
	}
	_, err = lance.WriteStore(ctx, st, rdr, lance.WriteOptions{Mode: lance.ModeCreate})
	rdr.Release()
	if err != nil {
		t.Fatal(err)
	}
	s, err := OpenStats(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	r, ok := s.Snapshot().Get("exp-00002")
	if !ok || r.RowCount != 2 || r.OldestPendingWAL != 0 {
		t.Fatalf("old row: %+v %v", r, ok)
	}
	for i, at := range []int64{1234, 5678} {
		r.OldestPendingWAL, r.ScannedAt = at, int64(2+i)
		if v, err := s.Upsert(ctx, r); err != nil || v != uint64(2+i) {
			t.Fatalf("upsert %d: version %d, %v", i, v, err)
		}
		ds, err := lance.OpenStore(ctx, st)
		if err != nil || ds.Schema().Field("oldest_pending_wal") == nil {
			t.Fatalf("schema after upsert %d lacks the column (%v)", i, err)
		}
	}
	got := statsOnStorage(t, st)
	if len(got.Rows) != 3 {
		t.Fatalf("%d rows", len(got.Rows))
	}
	for i, r := range got.Rows {
		want := int64(0)
		if r.Name == "exp-00002" {
			want = 5678
		}
		if r.RowCount != int64(i) || r.OldestPendingWAL != want {
			t.Fatalf("row %+v", r)
		}
	}
}
