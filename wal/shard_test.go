package wal

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/objstore/faults"
)

func countKeys(t testing.TB, st objstore.Store, prefix string) int {
	t.Helper()
	n := 0
	err := objstore.Walk(context.Background(), st, objstore.ListOptions{Prefix: prefix}, func(objstore.ObjectInfo) error {
		n++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestGroupCommitSharesEntries(t *testing.T) {
	mem := memDataset(t)
	// A slow put (like an object store) lets appends pile up behind the one in flight.
	st := faults.Wrap(mem, faults.Config{Latency: 5 * time.Millisecond})
	s := openShard(t, testOptions(st, "w0"))
	const writers, per = 16, 20
	var wg sync.WaitGroup
	seqs := make(chan uint64, writers*per)
	for w := range writers {
		wg.Go(func() {
			for i := range per {
				res := appendRows(t, s, row{id: fmt.Sprintf("w%d-%d", w, i), n: int64(i)})
				seqs <- res.Seq
			}
		})
	}
	wg.Wait()
	close(seqs)
	distinct := map[uint64]bool{}
	for q := range seqs {
		distinct[q] = true
	}
	entries := countKeys(t, mem, entriesDir(s.ID()))
	t.Logf("%d appends in %d entries", writers*per, entries)
	if entries != len(distinct) {
		t.Fatalf("%d entry objects but appends report %d distinct entries", entries, len(distinct))
	}
	if entries > writers*per/4 {
		t.Fatalf("%d appends took %d entries: group commit is not grouping", writers*per, entries)
	}
	if got := testutil.ToFloat64(s.met.entriesWritten); int(got) != entries {
		t.Fatalf("entries metric %v, want %d", got, entries)
	}
	// Acked rows are readable at once (local memtable) and exactly once.
	got := readAll(t, mem, s)
	if len(got) != writers*per {
		t.Fatalf("read %d rows, want %d", len(got), writers*per)
	}
}

func TestAckedRowsSurviveCrash(t *testing.T) {
	st := memDataset(t)
	s := openShard(t, testOptions(st, "w0"))
	a := rowsOf("a", 0, 50, 1)
	for i := 0; i < len(a); i += 10 {
		appendRows(t, s, a[i:i+10]...)
	}
	s.abandon() // crash: nothing sealed, nothing cleaned up

	s2 := openShard(t, testOptions(st, "w0"))
	if s2.Epoch() != s.Epoch()+1 {
		t.Fatalf("epoch %d after %d", s2.Epoch(), s.Epoch())
	}
	if got := testutil.ToFloat64(s2.met.replayedEntries); got != 5 {
		t.Fatalf("replayed %v entries, want 5", got)
	}
	expectKeys(t, readAll(t, st, s2), wantRows(a))
	// The replayed rows seal (a restart asks for it) and are replayed no more.
	flush(t, s2)
	b := rowsOf("b", 0, 5, 2)
	appendRows(t, s2, b...)
	s2.abandon()
	s3 := openShard(t, testOptions(st, "w0"))
	if got := testutil.ToFloat64(s3.met.replayedEntries); got != 1 {
		t.Fatalf("replayed %v entries after a seal, want 1", got)
	}
	expectKeys(t, readAll(t, st, s3), wantRows(a, b))
	// Another worker sees the sealed rows only (b is in s3's memtable).
	expectKeys(t, readAll(t, st, nil), wantRows(a))
	flush(t, s3)
	expectKeys(t, readAll(t, st, nil), wantRows(a, b))
}

func TestSealAndReplayBoundaries(t *testing.T) {
	st := memDataset(t)
	o := testOptions(st, "w0")
	o.SealBytes = 2 << 10 // a few batches per memtable
	s := openShard(t, o)
	var all []row
	for i := 0; i < 40; i++ {
		rs := rowsOf(fmt.Sprintf("k%02d-", i), 0, 5, int64(i))
		all = append(all, rs...)
		appendRows(t, s, rs...)
	}
	// Some memtables sealed by size, the rest is in the memtable.
	// Sealed entries are deleted (after the seal is recorded); only the unsealed ones
	// remain.
	var st1 Stats
	waitFor(t, "the frozen memtables to be sealed and their entries deleted", func() bool {
		st1 = s.Stats()
		return st1.FrozenMemtables == 0 && uint64(countKeys(t, st, entriesDir(s.ID()))) == st1.AppliedSeq-st1.SealedThroughSeq
	})
	if st1.MemtableRows == 0 {
		// Generations grow while a seal is pending (see apply), so where the last one
		// ended depends on timing: one more small batch stays unsealed.
		rs := rowsOf("tail-", 0, 2, 40)
		all = append(all, rs...)
		appendRows(t, s, rs...)
		st1 = s.Stats()
	}
	if st1.SealedThroughSeq == 0 || st1.SealedThroughSeq >= st1.AppliedSeq {
		t.Fatalf("want some but not all entries sealed: %+v", st1)
	}
	// A newer value of a key in the memtable shadows the generation.
	appendRows(t, s, row{id: "k00-000000", n: 1000})
	all[0].n = 1000
	expectKeys(t, readAll(t, st, s), wantRows(all))
	s.abandon()

	s2 := openShard(t, o)
	if got := testutil.ToFloat64(s2.met.replayedEntries); uint64(got) != st1.AppliedSeq-st1.SealedThroughSeq+1 {
		t.Fatalf("replayed %v entries, want %d", got, st1.AppliedSeq-st1.SealedThroughSeq+1)
	}
	expectKeys(t, readAll(t, st, s2), wantRows(all))
	flush(t, s2)
	expectKeys(t, readAll(t, st, nil), wantRows(all))
}

func TestCrashInsideSeal(t *testing.T) {
	for _, step := range []string{"seal:written", "seal:recorded"} {
		t.Run(step, func(t *testing.T) {
			st := memDataset(t)
			s := openShard(t, testOptions(st, "w0"))
			a := rowsOf("a", 0, 20, 1)
			appendRows(t, s, a...)
			crashed := make(chan struct{})
			var once sync.Once
			s.hook = func(name string) error {
				if name == step {
					once.Do(func() { close(crashed) })
					return errors.New("crash")
				}
				return nil
			}
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			err := s.Flush(ctx)
			cancel()
			if err == nil {
				t.Fatal("flush succeeded through a crash")
			}
			<-crashed
			s.abandon()
			s2 := openShard(t, testOptions(st, "w0"))
			expectKeys(t, readAll(t, st, s2), wantRows(a))
			flush(t, s2)
			expectKeys(t, readAll(t, st, nil), wantRows(a))
			// The first writer's unrecorded file (seal:written) is removed by the
			// second's cleanup; only recorded generations remain.
			deadline := time.Now().Add(5 * time.Second)
			for {
				m, err := readLatestManifest(context.Background(), st, s2.ID())
				if err != nil {
					t.Fatal(err)
				}
				files := countKeys(t, st, genDir(s2.ID()))
				if files == len(m.Generations) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d generation files for %d recorded generations", files, len(m.Generations))
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

func TestEpochFencing(t *testing.T) {
	st := memDataset(t)
	a := openShard(t, testOptions(st, "w0"))
	ra := rowsOf("a", 0, 10, 1)
	appendRows(t, a, ra...)

	// b claims the same shard (a restarted pod while the old one still runs).
	b := openShard(t, testOptions(st, "w0"))
	if b.Epoch() <= a.Epoch() {
		t.Fatalf("epochs %d then %d", a.Epoch(), b.Epoch())
	}
	// a has not noticed yet: its next entry lands at a sequence b has not used, and is
	// acknowledged (durable); b folds it in when it collides with it.
	ra2 := rowsOf("a2-", 0, 3, 2)
	if _, err := a.Append(context.Background(), makeBatch(ra2...)); err != nil {
		t.Fatalf("old writer's append before the collision: %v", err)
	}
	rb := rowsOf("b", 0, 10, 3)
	appendRows(t, b, rb...)
	// Now a collides with b's entry and is fenced.
	if _, err := a.Append(context.Background(), makeBatch(row{id: "late", n: 9})); !errors.Is(err, ErrFenced) {
		t.Fatalf("old writer: %v, want ErrFenced", err)
	}
	if !a.Fenced() {
		t.Fatal("a not fenced")
	}
	if _, err := a.Append(context.Background(), makeBatch(row{id: "late2", n: 9})); !errors.Is(err, ErrFenced) {
		t.Fatalf("old writer: %v, want ErrFenced", err)
	}
	if err := a.Flush(context.Background()); !errors.Is(err, ErrFenced) {
		t.Fatalf("old writer's flush: %v, want ErrFenced", err)
	}
	flush(t, b)
	// Every row either writer acknowledged is there once; the refused ones are not.
	expectKeys(t, readAll(t, st, nil), wantRows(ra, ra2, rb))
	if got := testutil.ToFloat64(a.met.fenced); got != 1 {
		t.Fatalf("fenced metric %v", got)
	}
}

func TestFencedSealLosesNothing(t *testing.T) {
	st := memDataset(t)
	a := openShard(t, testOptions(st, "w0"))
	ra := rowsOf("a", 0, 10, 1)
	appendRows(t, a, ra...)
	b := openShard(t, testOptions(st, "w0")) // replays a's entry
	// a seals: its manifest update finds b's epoch and fences it; the file it wrote is
	// garbage, the rows are safe in b.
	if err := a.Flush(context.Background()); !errors.Is(err, ErrFenced) {
		t.Fatalf("flush of the fenced writer: %v", err)
	}
	flush(t, b)
	expectKeys(t, readAll(t, st, nil), wantRows(ra))
}

func TestBackpressure(t *testing.T) {
	st := memDataset(t)
	o := testOptions(st, "w0")
	o.MaxPendingGenerations = 3
	s := openShard(t, o)
	for i := range 3 {
		appendRows(t, s, rowsOf(fmt.Sprintf("g%d-", i), 0, 5, 1)...)
		flush(t, s)
	}
	_, err := s.Append(context.Background(), makeBatch(row{id: "x", n: 1}))
	var be *BackpressureError
	if !errors.Is(err, ErrBackpressure) || !errors.As(err, &be) {
		t.Fatalf("append over the cap: %v", err)
	}
	if be.Pending != 3 || be.Max != 3 || be.RetryAfter <= 0 || !strings.Contains(be.Error(), "pending") {
		t.Fatalf("backpressure error %+v", be)
	}
	// Reads stay available.
	if got := readAll(t, st, s); len(got) != 15 {
		t.Fatalf("read %d rows", len(got))
	}
	res, err := s.Merge(context.Background(), MergeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Generations != 3 || res.Pending != 0 {
		t.Fatalf("merge %+v", res)
	}
	appendRows(t, s, row{id: "x", n: 1})

	// Unsealed bytes over their cap (sealing stuck) also push back.
	st2 := memDataset(t)
	hs := &hookStore{Store: st2}
	o2 := testOptions(hs, "w1")
	o2.SealBytes = 1 << 10
	o2.MaxMemtableBytes = 4 << 10
	s2 := openShard(t, o2)
	hs.set(func(op, key string) error {
		if strings.Contains(key, "/gen/") {
			return errors.New("store down for generation files")
		}
		return nil
	})
	var sawPushBack bool
	for i := 0; i < 200 && !sawPushBack; i++ {
		_, err := s2.Append(context.Background(), makeBatch(rowsOf(fmt.Sprintf("u%d-", i), 0, 10, 1)...))
		sawPushBack = errors.Is(err, ErrBackpressure)
		if err != nil && !sawPushBack {
			t.Fatal(err)
		}
	}
	if !sawPushBack {
		t.Fatal("no backpressure while sealing fails")
	}
	hs.set(nil)
	flush(t, s2)
	appendRows(t, s2, row{id: "after", n: 1})
}

func TestInvalidBatchesWriteNothing(t *testing.T) {
	st := memDataset(t)
	s := openShard(t, testOptions(st, "w0"))
	before := countKeys(t, st, "_wal/")
	bad := []arrow.RecordBatch{
		makeBatch(), // empty
		func() arrow.RecordBatch { // wrong type
			sch := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "n", Type: arrow.PrimitiveTypes.Int64}}, nil)
			b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
			b.Field(0).(*array.Int64Builder).Append(1)
			b.Field(1).(*array.Int64Builder).Append(1)
			return b.NewRecordBatch()
		}(),
		func() arrow.RecordBatch { // unknown column
			sch := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String}, {Name: "n", Type: arrow.PrimitiveTypes.Int64}, {Name: "zzz", Type: arrow.PrimitiveTypes.Int64}}, nil)
			b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
			b.Field(0).(*array.StringBuilder).Append("a")
			b.Field(1).(*array.Int64Builder).Append(1)
			b.Field(2).(*array.Int64Builder).Append(1)
			return b.NewRecordBatch()
		}(),
		func() arrow.RecordBatch { // missing non-nullable column
			sch := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String}}, nil)
			b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
			b.Field(0).(*array.StringBuilder).Append("a")
			return b.NewRecordBatch()
		}(),
		func() arrow.RecordBatch { // null key
			sch := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String, Nullable: true}, {Name: "n", Type: arrow.PrimitiveTypes.Int64}}, nil)
			b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
			b.Field(0).AppendNull()
			b.Field(1).(*array.Int64Builder).Append(1)
			return b.NewRecordBatch()
		}(),
	}
	for i, rec := range bad {
		if _, err := s.Append(context.Background(), rec); !errors.Is(err, ErrInvalidBatch) {
			t.Errorf("bad batch %d: %v, want ErrInvalidBatch", i, err)
		}
	}
	if after := countKeys(t, st, "_wal/"); after != before {
		t.Fatalf("rejected batches wrote %d objects", after-before)
	}
	// Columns in another order and a missing nullable column are fine.
	sch := arrow.NewSchema([]arrow.Field{{Name: "n", Type: arrow.PrimitiveTypes.Int64}, {Name: "id", Type: arrow.BinaryTypes.String}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
	b.Field(0).(*array.Int64Builder).Append(7)
	b.Field(1).(*array.StringBuilder).Append("ok")
	if _, err := s.Append(context.Background(), b.NewRecordBatch()); err != nil {
		t.Fatal(err)
	}
	expectKeys(t, readAll(t, st, s), map[string]int64{"ok": 7})
}

func TestCloseSealsAndStops(t *testing.T) {
	st := memDataset(t)
	s, err := Open(context.Background(), testOptions(st, "w0"))
	if err != nil {
		t.Fatal(err)
	}
	a := rowsOf("a", 0, 10, 1)
	appendRows(t, s, a...)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(context.Background(), makeBatch(row{id: "z", n: 1})); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
	expectKeys(t, readAll(t, st, nil), wantRows(a))
	if n := countKeys(t, st, entriesDir(s.ID())); n != 0 {
		t.Fatalf("%d entries left after a sealing close", n)
	}
}

func TestSealByAge(t *testing.T) {
	st := memDataset(t)
	o := testOptions(st, "w0")
	o.SealInterval = 50 * time.Millisecond
	s := openShard(t, o)
	a := rowsOf("a", 0, 3, 1)
	appendRows(t, s, a...)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if got := readAll(t, st, nil); len(got) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("rows not sealed by age")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestPipelinedPutsCompleteInOrder runs several entry puts at once with random store
// latency, so they land out of order; acknowledgements and the memtable still follow
// sequence order, the entries are gap-free, and a crash replays exactly what was acked.
func TestPipelinedPutsCompleteInOrder(t *testing.T) {
	mem := memDataset(t)
	st := faults.Wrap(mem, faults.Config{Jitter: 4 * time.Millisecond, Seed: 3})
	o := testOptions(st, "w0")
	o.MaxInflightEntries = 4
	s := openShard(t, o)
	var wg sync.WaitGroup
	var mu sync.Mutex
	want := map[string]int64{}
	for w := range 8 {
		wg.Go(func() {
			for i := range 15 {
				rs := rowsOf(fmt.Sprintf("w%d-%d-", w, i), 0, 2, int64(i))
				appendRows(t, s, rs...)
				mu.Lock()
				for _, r := range rs {
					want[r.id] = r.n
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	n := countKeys(t, mem, entriesDir(s.ID()))
	if uint64(n) != s.Stats().AppliedSeq {
		t.Fatalf("%d entries, applied through %d: gaps", n, s.Stats().AppliedSeq)
	}
	expectKeys(t, readAll(t, mem, s), want)
	s.abandon()
	s2 := openShard(t, testOptions(mem, "w0"))
	expectKeys(t, readAll(t, mem, s2), want)
}

// TestReplayClosesGaps: a predecessor that pipelines puts can leave a gap that one of
// its puts, still in flight, fills later. The new owner closes the gap first, so the
// late put fails (and was never acknowledged) instead of landing below what the new
// owner seals.
func TestReplayClosesGaps(t *testing.T) {
	st := memDataset(t)
	old := openShard(t, testOptions(st, "w0"))
	appendRows(t, old, row{id: "a", n: 1}) // seq 1
	appendRows(t, old, row{id: "b", n: 1}) // seq 2
	// Seq 3 is "in flight"; seq 4 landed.
	buf, err := encodeEntry(old.arrow, old.ID(), old.Epoch(), 4, []arrow.RecordBatch{makeBatch(row{id: "d", n: 1})})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutIfAbsent(context.Background(), entryKey(old.ID(), 4), strings.NewReader(string(buf))); err != nil {
		t.Fatal(err)
	}
	s := openShard(t, testOptions(st, "w0"))
	late, err := encodeEntry(old.arrow, old.ID(), old.Epoch(), 3, []arrow.RecordBatch{makeBatch(row{id: "c", n: 1})})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutIfAbsent(context.Background(), entryKey(old.ID(), 3), strings.NewReader(string(late))); !errors.Is(err, objstore.ErrExists) {
		t.Fatalf("late put into the gap: %v, want ErrExists", err)
	}
	flush(t, s)
	expectKeys(t, readAll(t, st, nil), map[string]int64{"a": 1, "b": 1, "d": 1})
	// The seal wakes Flush before it deletes the entries it sealed (best effort, after
	// the manifest commit): wait for the deletes, the gap filler's too.
	waitFor(t, "the sealed entries, the gap filler too, to be deleted", func() bool {
		return countKeys(t, st, entriesDir(s.ID())) == 0
	})
}

// TestRecoverSweepsSealedEntries: a writer killed between a seal's manifest commit and
// its entry deletes leaves sealed entries behind. Recover, which a worker runs when it
// opens a store only to read, deletes them and reports nothing to replay; entries past
// what was sealed are reported (and kept) for the owner to replay.
func TestRecoverSweepsSealedEntries(t *testing.T) {
	ctx := t.Context()
	st := &hookStore{Store: memDataset(t)}
	s := openShard(t, testOptions(st, "w0"))
	st.set(func(op, key string) error {
		if op == "deletebatch" && strings.Contains(key, "/entries/") {
			return errors.New("killed before the entry deletes")
		}
		return nil
	})
	appendRows(t, s, row{id: "a", n: 1})
	appendRows(t, s, row{id: "b", n: 1})
	flush(t, s)
	s.abandon()
	st.set(nil)
	if n := countKeys(t, st, entriesDir(s.ID())); n != 2 {
		t.Fatalf("%d entries before Recover, want the 2 sealed ones", n)
	}

	rec, err := Recover(ctx, st, s.ID())
	if err != nil || rec.Unreplayed || rec.Swept != 2 || rec.SweepErr != nil {
		t.Fatalf("Recover: %+v, %v; want 2 swept, nothing to replay", rec, err)
	}
	if n := countKeys(t, st, entriesDir(s.ID())); n != 0 {
		t.Fatalf("%d entries after Recover, want 0", n)
	}
	if rec, err = Recover(ctx, st, s.ID()); err != nil || rec != (Recovery{}) {
		t.Fatalf("Recover of a tidy shard: %+v, %v", rec, err)
	}

	// Sealed leftovers followed by an acknowledged, unsealed entry.
	s2 := openShard(t, testOptions(st, "w0"))
	st.set(func(op, key string) error {
		if op == "deletebatch" && strings.Contains(key, "/entries/") {
			return errors.New("killed before the entry deletes")
		}
		return nil
	})
	appendRows(t, s2, row{id: "c", n: 1})
	flush(t, s2)
	appendRows(t, s2, row{id: "d", n: 1})
	s2.abandon()
	st.set(nil)
	rec, err = Recover(ctx, st, s2.ID())
	if err != nil || !rec.Unreplayed || rec.Swept != 1 {
		t.Fatalf("Recover: %+v, %v; want 1 swept and entries to replay", rec, err)
	}
	if n := countKeys(t, st, entriesDir(s2.ID())); n != 1 {
		t.Fatalf("%d entries after Recover, want the unsealed one", n)
	}
	s3 := openShard(t, testOptions(st, "w0"))
	flush(t, s3)
	expectKeys(t, readAll(t, st, nil), map[string]int64{"a": 1, "b": 1, "c": 1, "d": 1})
}
