package wal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lancectx/lancectx/internal/oracle"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/objstore/faults"
)

// oracleCheck asks LanceDB to read the base table and compares with want.
func oracleCheck(t *testing.T, o *oracle.Oracle, path string, want map[string]int64) {
	t.Helper()
	n, err := o.Count(path, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(len(want)) {
		t.Fatalf("LanceDB counts %d rows, want %d", n, len(want))
	}
	rows, err := o.Read(path, oracle.ReadOptions{Columns: []string{"id", "n"}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, r := range rows {
		var x struct {
			ID string `json:"id"`
			N  int64  `json:"n,string"`
		}
		if err := json.Unmarshal([]byte(r), &x); err != nil {
			t.Fatalf("parse oracle row %s: %v", r, err)
		}
		id, v := x.ID, x.N
		if _, dup := got[id]; dup {
			t.Fatalf("LanceDB reads key %s twice", id)
		}
		got[id] = v
	}
	expectKeys(t, got, want)
}

// TestMergeDeduplicates, with the base keys found through the key cache's indexes
// (as a worker merges) and by scanning the key column (MergeShard's way).
func TestMergeDeduplicates(t *testing.T) {
	for _, cached := range []bool{true, false} {
		t.Run(fmt.Sprintf("keycache=%v", cached), func(t *testing.T) { testMergeDeduplicates(t, cached) })
	}
}

func testMergeDeduplicates(t *testing.T, cached bool) {
	baseRowsIn := rowsOf("b", 0, 10, 0)
	st, path := fileDataset(t, baseRowsIn...)
	o := testOptions(st, "w0")
	if !cached {
		o = noKeyCache(o)
	}
	s := openShard(t, o)
	want := wantRows(baseRowsIn)

	appendRows(t, s, row{id: "x1", n: 1}, row{id: "y", n: 1})
	flush(t, s) // gen 1
	// x1 again after the seal, and a key already in the base (a client retry).
	appendRows(t, s, row{id: "x1", n: 2}, row{id: "b000003", n: 100})
	flush(t, s) // gen 2: shares x1 with gen 1
	// x2 twice inside one memtable.
	appendRows(t, s, row{id: "x2", n: 1})
	appendRows(t, s, row{id: "x2", n: 2}, row{id: "z", n: 5})
	flush(t, s) // gen 3
	want["x1"], want["y"], want["b000003"], want["x2"], want["z"] = 2, 1, 100, 2, 5

	expectKeys(t, readAll(t, st, s), want)
	res, err := s.Merge(context.Background(), MergeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Generations != 3 || res.Pending != 0 || res.Commits != 2 || res.DuplicatesDeleted != 2 {
		t.Fatalf("merge result %+v, want 3 generations in 2 commits hiding 2 older rows", res)
	}
	expectKeys(t, baseRows(t, st), want)
	expectKeys(t, readAll(t, st, s), want)
	if ps, err := PendingGenerations(context.Background(), st); err != nil || ps.Generations != 0 {
		t.Fatalf("pending after merge: %+v %v", ps, err)
	}
	oracleCheck(t, oracle.New(t), path, want)
	if st := o.KeyCache; cached && st.Stats().Misses == 0 {
		t.Fatal("the merge did not use the key cache")
	}

	// Nothing left: a second merge is a no-op.
	res, err = s.Merge(context.Background(), MergeOptions{})
	if err != nil || res.Generations != 0 || res.Commits != 0 {
		t.Fatalf("second merge %+v %v", res, err)
	}
}

func TestMergeBoundsPerPass(t *testing.T) {
	st := memDataset(t)
	s := openShard(t, testOptions(st, "w0"))
	var all []row
	for i := range 10 {
		rs := rowsOf(fmt.Sprintf("g%d-", i), 0, 4, int64(i))
		all = append(all, rs...)
		appendRows(t, s, rs...)
		flush(t, s)
	}
	var passes []int
	for {
		res, err := s.Merge(context.Background(), MergeOptions{MaxGenerations: 3})
		if err != nil {
			t.Fatal(err)
		}
		if res.Generations == 0 {
			break
		}
		passes = append(passes, res.Generations)
		// Every pass leaves the dataset whole.
		expectKeys(t, readAll(t, st, nil), wantRows(all))
	}
	if fmt.Sprint(passes) != "[3 3 3 1]" {
		t.Fatalf("passes %v, want [3 3 3 1]", passes)
	}
	// Row bound: at least one generation per pass even when it alone is over.
	for i := range 2 {
		rs := rowsOf(fmt.Sprintf("h%d-", i), 0, 8, 1)
		all = append(all, rs...)
		appendRows(t, s, rs...)
		flush(t, s)
	}
	res, err := s.Merge(context.Background(), MergeOptions{MaxRows: 3})
	if err != nil || res.Generations != 1 || res.Pending != 1 {
		t.Fatalf("row-bounded pass %+v %v", res, err)
	}
	expectKeys(t, baseRows(t, st), wantRows(all[:len(all)-8]))
}

// TestMergeExactlyOnceAcrossCrashes stops a merge after each of its steps (as a crash
// there would: every step's effect is on storage), drops the shard without closing
// it, and lets a new owner finish; then every acked key is in the base exactly once.
func TestMergeExactlyOnceAcrossCrashes(t *testing.T) {
	orc := oracle.New(t)
	steps := []string{"merge:copied", "merge:committed", "merge:dropped"}
	for _, step := range steps {
		t.Run(step, func(t *testing.T) {
			base := rowsOf("b", 0, 5, 0)
			st, path := fileDataset(t, base...)
			want := wantRows(base)
			s := openShard(t, testOptions(st, "w0"))
			for i := range 4 {
				rs := rowsOf(fmt.Sprintf("g%d-", i), 0, 5, int64(i))
				rs = append(rs, row{id: "dup", n: int64(i)}, row{id: "b000001", n: int64(10 + i)})
				appendRows(t, s, rs...)
				for _, r := range rs {
					want[r.id] = r.n
				}
				flush(t, s)
			}
			unsealed := rowsOf("u", 0, 3, 7)
			appendRows(t, s, unsealed...)
			for _, r := range unsealed {
				want[r.id] = r.n
			}
			s.hook = func(name string) error {
				if name == step {
					return errors.New("crash at " + step)
				}
				return nil
			}
			if _, err := s.Merge(context.Background(), MergeOptions{}); err == nil || !strings.Contains(err.Error(), "crash") {
				t.Fatalf("merge: %v", err)
			}
			s.abandon()
			// Readers see every row exactly once in the crashed state.
			expectKeys(t, readAll(t, st, nil), without(want, unsealed))
			if step != "merge:copied" {
				// The watermark is committed: the base holds the first part.
				if len(baseRows(t, st)) <= len(base) {
					t.Fatal("base did not grow")
				}
			}
			s2 := openShard(t, testOptions(st, "w0"))
			for {
				res, err := s2.Merge(context.Background(), MergeOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if res.Generations == 0 {
					break
				}
			}
			flush(t, s2)
			if _, err := s2.Merge(context.Background(), MergeOptions{}); err != nil {
				t.Fatal(err)
			}
			expectKeys(t, baseRows(t, st), want)
			expectKeys(t, readAll(t, st, s2), want)
			oracleCheck(t, orc, path, want)
		})
	}
}

func without(m map[string]int64, rs []row) map[string]int64 {
	out := map[string]int64{}
	for k, v := range m {
		out[k] = v
	}
	for _, r := range rs {
		delete(out, r.id)
	}
	return out
}

// TestMergeUnderStoreFaults runs appends, seals and merges against a store that fails
// requests at random; whatever failed is retried, and in the end every acked key is
// in the base once.
func TestMergeUnderStoreFaults(t *testing.T) {
	mem := memDataset(t)
	st := faults.Wrap(mem, faults.Config{ErrorRate: 0.05, Seed: 7,
		Ops: []objstore.Op{objstore.OpPutIfAbsent, objstore.OpPut, objstore.OpCopy, objstore.OpGet, objstore.OpGetRange, objstore.OpList, objstore.OpDeleteBatch}})
	var s *Shard
	for s == nil {
		var err error
		if s, err = Open(context.Background(), testOptions(st, "w0")); err != nil {
			continue
		}
	}
	defer s.abandon()
	acked := map[string]int64{}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 30 {
		rs := rowsOf(fmt.Sprintf("k%02d-", i), 0, 4, int64(i))
		rs = append(rs, row{id: fmt.Sprintf("r%02d", rng.IntN(10)), n: int64(i)})
		if _, err := s.Append(context.Background(), makeBatch(rs...)); err == nil {
			for _, r := range rs {
				acked[r.id] = r.n
			}
		} else if r := rs[len(rs)-1]; acked[r.id] < r.n && acked[r.id] != 0 {
			// A failed append may still have landed (ambiguous): the retried key's
			// newest value is then unknown, so leave that key out of the check.
			delete(acked, r.id)
		}
		if i%5 == 4 {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = s.Flush(ctx)
			cancel()
			_, _ = s.Merge(context.Background(), MergeOptions{MaxGenerations: 2})
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for s.Flush(ctx) != nil {
	}
	for {
		res, err := s.Merge(ctx, MergeOptions{})
		if err == nil && res.Pending == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("merges never finished: %v", err)
		}
	}
	injected := int64(0)
	for _, n := range st.Stats().Errors {
		injected += n
	}
	if injected == 0 || len(acked) < 50 {
		t.Fatalf("weak run: %d injected errors, %d acked keys", injected, len(acked))
	}
	t.Logf("%d injected errors, %d acked keys", injected, len(acked))
	got := baseRows(t, mem)
	for k, v := range acked {
		if g, ok := got[k]; !ok {
			t.Fatalf("acked key %s missing", k)
		} else if !strings.HasPrefix(k, "r") && g != v {
			t.Fatalf("key %s=%d want %d", k, g, v)
		}
	}
}

// TestAppendsFlowDuringMerge holds a merge in the middle (after its copy) and shows
// appends, seals and reads complete meanwhile: nothing on the write path waits on it.
func TestAppendsFlowDuringMerge(t *testing.T) {
	st := memDataset(t)
	s := openShard(t, testOptions(st, "w0"))
	for i := range 3 {
		appendRows(t, s, rowsOf(fmt.Sprintf("g%d-", i), 0, 5, 1)...)
		flush(t, s)
	}
	inMerge := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	s.hook = func(name string) error {
		if name == "merge:copied" {
			once.Do(func() {
				close(inMerge)
				<-release
			})
		}
		return nil
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.Merge(context.Background(), MergeOptions{})
		done <- err
	}()
	<-inMerge
	// The merge is held inside its commit until release: appends, seals and reads
	// complete meanwhile (waiting on the merge would hold them until the bound below).
	during := make(chan int, 1)
	go func() {
		for i := range 20 {
			appendRows(t, s, row{id: fmt.Sprintf("during%d", i), n: 1})
		}
		flush(t, s)
		during <- len(readAll(t, st, s))
	}()
	select {
	case n := <-during:
		if n != 35 {
			t.Fatalf("read %d rows during the merge", n)
		}
	case <-time.After(30 * time.Second): // a did-not-hang bound, not a speed target
		close(release)
		t.Fatal("appends stalled behind a merge")
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := s.Merge(context.Background(), MergeOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := baseRows(t, st); len(got) != 35 {
		t.Fatalf("base has %d rows", len(got))
	}
}

// TestReadsDuringMerges runs writers, mergers and readers at once: every snapshot read
// sees every row that was acked and sealed before it started, each exactly once.
func TestReadsDuringMerges(t *testing.T) {
	st := memDataset(t)
	o := testOptions(st, "w0")
	s := openShard(t, o)
	other := openShard(t, testOptions(st, "w1")) // a second worker's shard
	var mu sync.Mutex
	sealed := map[string]int64{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var writeErr, readErr error
	var merges atomic.Int64
	// merged is closed (and replaced) after every merge: writers refused by
	// backpressure wait on it.
	var mergedMu sync.Mutex
	merged := make(chan struct{})
	mergedSignal := func() <-chan struct{} {
		mergedMu.Lock()
		defer mergedMu.Unlock()
		return merged
	}
	writer := func(sh *Shard, prefix string) {
		defer wg.Done()
		// A bounded write load: 300 batches, 100 generations per writer, far below the
		// pending-generation cap (the merges may fall behind on a slow machine).
		for i := 0; i < 300; i++ {
			select {
			case <-stop:
				return
			default:
			}
			rs := rowsOf(fmt.Sprintf("%s%04d-", prefix, i), 0, 3, int64(i))
			_, err := sh.Append(context.Background(), makeBatch(rs...))
			for errors.Is(err, ErrBackpressure) {
				// The writers seal faster than 2-generation merges retire them: wait
				// for the next merge, then retry.
				select {
				case <-mergedSignal():
				case <-stop:
					return
				}
				_, err = sh.Append(context.Background(), makeBatch(rs...))
			}
			if err != nil {
				writeErr = err
				return
			}
			if i%3 == 2 {
				if err := sh.Flush(context.Background()); err != nil {
					writeErr = err
					return
				}
				mu.Lock()
				for j := i - 2; j <= i; j++ {
					for _, r := range rowsOf(fmt.Sprintf("%s%04d-", prefix, j), 0, 3, int64(j)) {
						sealed[r.id] = r.n
					}
				}
				mu.Unlock()
			}
		}
	}
	wg.Add(2)
	go writer(s, "a")
	go writer(other, "b")
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			for _, sh := range []*Shard{s, other} {
				res, err := sh.Merge(context.Background(), MergeOptions{MaxGenerations: 2})
				if err != nil {
					writeErr = err
					return
				}
				if res.Generations > 0 {
					merges.Add(1)
				}
				mergedMu.Lock()
				close(merged)
				merged = make(chan struct{})
				mergedMu.Unlock()
			}
		}
	}()
	// Read until enough reads have overlapped enough merges: a count, not a time
	// window, so a slow machine reads as much as a fast one (the context only bounds a
	// hang).
	const wantReads, wantMerges = 20, 6
	reads := 0
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for (reads < wantReads || merges.Load() < wantMerges) && readErr == nil && ctx.Err() == nil {
		mu.Lock()
		before := make(map[string]int64, len(sealed))
		for k, v := range sealed {
			before[k] = v
		}
		mu.Unlock()
		local := s
		if reads%2 == 1 {
			local = nil
		}
		sn, err := ReadSnapshot(context.Background(), st, local, ReadOptions{KeyColumn: "id"})
		if errors.Is(err, ErrSnapshotChanged) {
			continue
		}
		if err != nil {
			readErr = err
			break
		}
		got, err := tryScanAll(sn, ScanOptions{})
		if errors.Is(err, ErrSnapshotStale) {
			continue
		}
		if err != nil {
			readErr = err
			break
		}
		for k, v := range before {
			if got[k] != v {
				readErr = fmt.Errorf("read %d: sealed key %s = %d, want %d", reads, k, got[k], v)
				break
			}
		}
		reads++
	}
	close(stop)
	wg.Wait()
	if writeErr != nil {
		t.Fatal(writeErr)
	}
	if readErr != nil {
		t.Fatal(readErr)
	}
	t.Logf("%d consistent reads during %d merges, %d sealed keys", reads, merges.Load(), len(sealed))
	if reads < wantReads || merges.Load() < wantMerges {
		t.Fatalf("only %d reads during %d merges before the deadline", reads, merges.Load())
	}
}

// TestSnapshotRetriesWhenMergeLands lands a merge between a snapshot's first base read
// and its manifest reads: the snapshot notices the base moved and retries.
func TestSnapshotRetriesWhenMergeLands(t *testing.T) {
	mem := memDataset(t)
	hs := &hookStore{Store: mem}
	s := openShard(t, testOptions(mem, "w0"))
	var all []row
	for i := range 3 {
		rs := rowsOf(fmt.Sprintf("g%d-", i), 0, 5, int64(i))
		all = append(all, rs...)
		appendRows(t, s, rs...)
		flush(t, s)
	}
	var once sync.Once
	merged := false
	hs.set(func(op, key string) error {
		if op == "list" && key == walDir {
			once.Do(func() {
				// The merge commits the base and drops the generations before this
				// listing of the shards proceeds.
				if _, err := s.Merge(context.Background(), MergeOptions{}); err != nil {
					t.Error(err)
				}
				merged = true
			})
		}
		return nil
	})
	sn, err := ReadSnapshot(context.Background(), hs, nil, ReadOptions{KeyColumn: "id"})
	if err != nil {
		t.Fatal(err)
	}
	if !merged {
		t.Fatal("the merge did not run inside the snapshot")
	}
	if sn.PendingGenerations() != 0 {
		t.Fatalf("snapshot reads %d generations after the merge", sn.PendingGenerations())
	}
	expectKeys(t, scanAll(t, sn, ScanOptions{}), wantRows(all))

	// The generations of a snapshot taken before a merge stay readable for the
	// retire grace.
	appendRows(t, s, rowsOf("h", 0, 5, 9)...)
	flush(t, s)
	old, err := ReadSnapshot(context.Background(), mem, nil, ReadOptions{KeyColumn: "id"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Merge(context.Background(), MergeOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := scanAll(t, old, ScanOptions{}); len(got) != 20 {
		t.Fatalf("old snapshot read %d rows", len(got))
	}
}

func TestRetiredGenerationsDeletedAfterGrace(t *testing.T) {
	st := memDataset(t)
	o := testOptions(st, "w0")
	o.RetireGrace = 10 * time.Millisecond
	o.SealInterval = 40 * time.Millisecond // the sealer loop ticks often
	s := openShard(t, o)
	for i := range 3 {
		appendRows(t, s, rowsOf(fmt.Sprintf("g%d-", i), 0, 5, 1)...)
		flush(t, s)
	}
	if _, err := s.Merge(context.Background(), MergeOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for countKeys(t, st, genDir(s.ID())) != 0 {
		if time.Now().After(deadline) {
			t.Fatal("retired generation files never deleted")
		}
		time.Sleep(20 * time.Millisecond)
	}
	m, err := readLatestManifest(context.Background(), st, s.ID())
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the retired files to leave the manifest", func() bool {
		m, _ = readLatestManifest(context.Background(), st, s.ID())
		return m != nil && m.retiredCount() == 0
	})
	if m.retiredCount() != 0 || len(m.Generations) != 0 {
		t.Fatalf("manifest still lists %d retired, %d pending", m.retiredCount(), len(m.Generations))
	}
	if got := baseRows(t, st); len(got) != 15 {
		t.Fatalf("base has %d rows", len(got))
	}
}

func TestMergeShardOfAnotherWorker(t *testing.T) {
	st := memDataset(t)
	s := openShard(t, testOptions(st, "retired-worker"))
	a := rowsOf("a", 0, 10, 1)
	appendRows(t, s, a...)
	flush(t, s)
	s.abandon()
	res, err := MergeShard(context.Background(), MergeTarget{Store: st, Shard: ShardIDFor("retired-worker"), KeyColumn: "id"}, MergeOptions{}, nil, quietLogger())
	if err != nil || res.Generations != 1 {
		t.Fatalf("merge %+v %v", res, err)
	}
	expectKeys(t, baseRows(t, st), wantRows(a))
	ds, _ := lance.OpenStore(context.Background(), st)
	if w, _ := watermark(ds.TableMetadata(), ShardIDFor("retired-worker")); w != 1 {
		t.Fatalf("watermark %d", w)
	}
}

// TestMergeHidesRepeatsInsideAGeneration: a generation recorded without UniqueKeys (as
// every one before the flag) whose file repeats a key gets the older row hidden by the
// merge; the sealer's generations carry the flag, so their merges skip that search.
func TestMergeHidesRepeatsInsideAGeneration(t *testing.T) {
	ctx := context.Background()
	st := memDataset(t)
	s := openShard(t, testOptions(st, "w0"))
	appendRows(t, s, row{id: "sealed", n: 1})
	flush(t, s)
	s.mu.Lock()
	m := s.manifest
	s.mu.Unlock()
	if len(m.Generations) != 1 || !m.Generations[0].UniqueKeys {
		t.Fatalf("a sealed generation is not marked unique: %+v", m.Generations)
	}
	rec := makeBatch(row{id: "d", n: 1}, row{id: "e", n: 1}, row{id: "d", n: 2})
	defer rec.Release()
	rdr, err := array.NewRecordReader(testSchema, []arrow.RecordBatch{rec})
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	const gen = 1000
	path := genPath(gen, s.Epoch())
	info, err := lance.WriteDataFile(ctx, st, shardDir(s.ID())+path, s.schema, rdr, lance.WriteOptions{DataStorageVersion: s.storage})
	if err != nil {
		t.Fatal(err)
	}
	_, err = updateManifest(ctx, st, manifestUpdate{shard: s.ID(), writer: "w0", epoch: s.Epoch(), edit: func(next *Manifest) error {
		next.Generations = append(next.Generations, Generation{Gen: gen, Path: path, Rows: info.Rows, Bytes: info.Size,
			FirstSeq: next.SealedThroughSeq, LastSeq: next.SealedThroughSeq, SealedAt: time.Now().UTC(), File: info})
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Merge(ctx, MergeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Generations != 2 {
		t.Fatalf("merge %+v, want 2 generations", res)
	}
	// baseRows fails on a key the base holds twice.
	expectKeys(t, baseRows(t, st), map[string]int64{"sealed": 1, "d": 2, "e": 1})
}
