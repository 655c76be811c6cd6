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
)

// genGate holds every put of a generation file until it is opened: a sealer that is
// slow (not failing) for as long as the test says.
type genGate struct {
	open chan struct{}
	once sync.Once
}

func newGenGate(t testing.TB, hs *hookStore) *genGate {
	g := &genGate{open: make(chan struct{})}
	hs.set(func(op, key string) error {
		if strings.Contains(key, "/gen/") && (op == "put" || op == "putifabsent") {
			<-g.open
		}
		return nil
	})
	t.Cleanup(g.release) // before the shard's own cleanup stops it (cleanups run last-in first-out)
	return g
}

func (g *genGate) release() { g.once.Do(func() { close(g.open) }) }

// fillToCap appends batches while generation puts are held until the unsealed rows
// reach MaxMemtableBytes: none of these appends waits (they find room).
func fillToCap(t *testing.T, s *Shard) []row {
	t.Helper()
	var all []row
	for i := 0; s.Stats().MemtableBytes < s.opts.MaxMemtableBytes; i++ {
		if i > 1000 {
			t.Fatalf("unsealed bytes stuck at %d, cap %d", s.Stats().MemtableBytes, s.opts.MaxMemtableBytes)
		}
		rs := rowsOf(fmt.Sprintf("f%03d-", i), 0, 10, 1)
		appendRows(t, s, rs...)
		all = append(all, rs...)
	}
	if w := testutil.ToFloat64(s.met.admissionWaits); w != 0 {
		t.Fatalf("%v appends waited while the unsealed rows were under the cap", w)
	}
	return all
}

func admissionOptions(t *testing.T) (*hookStore, Options) {
	st := memDataset(t)
	hs := &hookStore{Store: st}
	o := testOptions(hs, "w0")
	o.SealBytes = 1 << 10
	o.MaxMemtableBytes = 4 << 10
	o.AdmissionWait = time.Hour // only the tests that want a refusal shorten it
	return hs, o
}

// TestAdmissionWaitsForSealing: an append that finds the unsealed rows at their cap
// while a seal is slow (in progress, not failing) waits for the seal and is then
// acknowledged, instead of being refused with ErrBackpressure (a 503 on the worker,
// which a client honours by sleeping a second).
func TestAdmissionWaitsForSealing(t *testing.T) {
	hs, o := admissionOptions(t)
	s := openShard(t, o)
	gate := newGenGate(t, hs)
	filled := fillToCap(t, s)

	late := rowsOf("late-", 0, 10, 2)
	done := make(chan error, 1)
	go func() {
		rec := makeBatch(late...)
		defer rec.Release()
		_, err := s.Append(context.Background(), rec)
		done <- err
	}()
	waitFor(t, "the append to wait for sealing", func() bool { return testutil.ToFloat64(s.met.admissionWaits) == 1 })
	select {
	case err := <-done:
		t.Fatalf("the append at the cap returned before sealing progressed: %v", err)
	default:
	}
	gate.release()
	if err := <-done; err != nil {
		t.Fatalf("the waiting append: %v", err)
	}
	if n := testutil.ToFloat64(s.met.backpressure); n != 0 {
		t.Fatalf("%v appends refused", n)
	}
	if n := testutil.CollectAndCount(s.met.admissionWait); n != 1 {
		t.Fatalf("admission wait histogram has %d series", n)
	}
	flush(t, s)
	expectKeys(t, readAll(t, hs.Store, nil), wantRows(filled, late))
}

// TestAdmissionRefusesWhenSealingStalls: a seal that makes no progress within
// AdmissionWait gets the waiting append refused with ErrBackpressure (nothing
// written), and a second append finding the waiting room full is refused at once.
func TestAdmissionRefusesWhenSealingStalls(t *testing.T) {
	t.Run("wait runs out", func(t *testing.T) {
		hs, o := admissionOptions(t)
		o.AdmissionWait = 20 * time.Millisecond
		s := openShard(t, o)
		gate := newGenGate(t, hs)
		filled := fillToCap(t, s)
		entries := countKeys(t, hs.Store, entriesDir(s.ID()))
		_, err := s.Append(context.Background(), makeBatch(rowsOf("refused-", 0, 10, 1)...))
		var be *BackpressureError
		if !errors.As(err, &be) || !errors.Is(err, ErrBackpressure) {
			t.Fatalf("append while sealing stalls: %v", err)
		}
		if !strings.Contains(be.Reason, "sealing is behind") || be.RetryAfter < time.Second || be.Max != o.MaxMemtableBytes {
			t.Fatalf("backpressure error %+v", be)
		}
		if n := countKeys(t, hs.Store, entriesDir(s.ID())); n != entries {
			t.Fatalf("a refused append wrote: %d entries, %d before", n, entries)
		}
		gate.release()
		flush(t, s)
		expectKeys(t, readAll(t, hs.Store, nil), wantRows(filled))
	})
	t.Run("waiting room full", func(t *testing.T) {
		hs, o := admissionOptions(t)
		s := openShard(t, o)
		gate := newGenGate(t, hs)
		filled := fillToCap(t, s)
		// One append as large as the cap waits (alone, it is let in whatever its size).
		big := rowsOf("big-", 0, 200, 3)
		done := make(chan error, 1)
		go func() {
			rec := makeBatch(big...)
			defer rec.Release()
			_, err := s.Append(context.Background(), rec)
			done <- err
		}()
		waitFor(t, "the large append to wait", func() bool { return testutil.ToFloat64(s.met.admissionWaits) == 1 })
		if w := s.waitingBytes.Load(); w <= o.MaxMemtableBytes {
			t.Fatalf("the waiting append holds %d bytes; the test needs more than the cap %d", w, o.MaxMemtableBytes)
		}
		_, err := s.Append(context.Background(), makeBatch(rowsOf("second-", 0, 1, 1)...))
		var be *BackpressureError
		if !errors.As(err, &be) || !strings.Contains(be.Reason, "waiting") {
			t.Fatalf("append with the waiting room full: %v", err)
		}
		if n := testutil.ToFloat64(s.met.admissionWaits); n != 1 {
			t.Fatalf("the refused append waited: %v waits", n)
		}
		gate.release()
		if err := <-done; err != nil {
			t.Fatalf("the large append: %v", err)
		}
		flush(t, s)
		expectKeys(t, readAll(t, hs.Store, nil), wantRows(filled, big))
	})
}

// TestAdmissionWaitEndsWithTheCaller: a waiting append returns the caller's context
// error when it gives up first.
func TestAdmissionWaitEndsWithTheCaller(t *testing.T) {
	hs, o := admissionOptions(t)
	s := openShard(t, o)
	newGenGate(t, hs)
	fillToCap(t, s)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := s.Append(ctx, makeBatch(rowsOf("gone-", 0, 10, 1)...))
		done <- err
	}()
	waitFor(t, "the append to wait", func() bool { return testutil.ToFloat64(s.met.admissionWaits) == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("append after its caller gave up: %v", err)
	}
	if w := s.waitingBytes.Load(); w != 0 {
		t.Fatalf("%d waiting bytes left behind", w)
	}
}

// TestSealsGrowWhileASealIsPending: a memtable that fills up while a seal is in
// progress stays active (no queue of frozen memtables) and is sealed as one larger
// generation when the sealer is free.
func TestSealsGrowWhileASealIsPending(t *testing.T) {
	hs, o := admissionOptions(t)
	o.MaxMemtableBytes = 64 << 10
	s := openShard(t, o)
	gate := newGenGate(t, hs)
	var all []row
	for i := 0; s.Stats().MemtableBytes < 8*o.SealBytes; i++ {
		rs := rowsOf(fmt.Sprintf("g%03d-", i), 0, 10, 1)
		appendRows(t, s, rs...)
		all = append(all, rs...)
	}
	if st := s.Stats(); st.FrozenMemtables != 1 {
		t.Fatalf("%d frozen memtables while one seal is pending, want 1: %+v", st.FrozenMemtables, st)
	}
	gate.release()
	flush(t, s)
	if got := testutil.ToFloat64(s.met.generationsSealed); got > 3 {
		t.Fatalf("%v generations for %d bytes in seals of %d", got, 8*o.SealBytes, o.SealBytes)
	}
	expectKeys(t, readAll(t, hs.Store, nil), wantRows(all))
}

// TestLeftOutColumnsShareTheirNulls: appends of one size that leave a nullable column
// out get the same (immutable) all-null array for it instead of a new one each; a
// batch of another size gets its own; the rows read back with the column null.
func TestLeftOutColumnsShareTheirNulls(t *testing.T) {
	st := memDataset(t)
	s := openShard(t, testOptions(st, "w0"))
	narrow := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String}, {Name: "n", Type: arrow.PrimitiveTypes.Int64}}, nil)
	batch := func(prefix string, rows int) arrow.RecordBatch {
		b := array.NewRecordBuilder(memory.DefaultAllocator, narrow)
		defer b.Release()
		for i := range rows {
			b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("%s%d", prefix, i))
			b.Field(1).(*array.Int64Builder).Append(int64(i))
		}
		return b.NewRecordBatch()
	}
	var want []row
	for k, n := range []int{3, 3, 5} {
		rec := batch(fmt.Sprintf("b%d-", k), n)
		if _, err := s.Append(context.Background(), rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		for i := range n {
			want = append(want, row{id: fmt.Sprintf("b%d-%d", k, i), n: int64(i)})
		}
	}
	v := s.active.view()
	if len(v.batches) != 3 {
		t.Fatalf("%d batches in the memtable", len(v.batches))
	}
	payload := testSchema.FieldIndices("payload")[0]
	col := func(b int) arrow.Array { return v.batches[b].rec.Column(payload) }
	for b := range 3 {
		if c := col(b); c.NullN() != c.Len() {
			t.Fatalf("batch %d: %d of %d payloads null", b, c.NullN(), c.Len())
		}
	}
	if col(0).Data() != col(1).Data() {
		t.Fatal("two batches of 3 rows got separate all-null payload columns")
	}
	if col(2).Data() == col(1).Data() || col(2).Len() != 5 {
		t.Fatal("the batch of 5 rows shares the 3-row null column")
	}
	flush(t, s)
	expectKeys(t, readAll(t, st, nil), wantRows(want))
}

// TestCapBelowSealBytesStillSeals: a MaxMemtableBytes below SealBytes seals at the
// cap, so appends past it are admitted (without the clamp, no seal would start and
// every append at the cap would be refused after its wait).
func TestCapBelowSealBytesStillSeals(t *testing.T) {
	st := memDataset(t)
	o := testOptions(st, "w0")
	o.SealBytes = 64 << 10
	o.MaxMemtableBytes = 2 << 10
	o.AdmissionWait = 50 * time.Millisecond
	s := openShard(t, o)
	var all []row
	for i := range 40 {
		rs := rowsOf(fmt.Sprintf("c%02d-", i), 0, 10, 1)
		appendRows(t, s, rs...)
		all = append(all, rs...)
	}
	if g := testutil.ToFloat64(s.met.generationsSealed); g == 0 {
		t.Fatal("nothing sealed by size")
	}
	flush(t, s)
	expectKeys(t, readAll(t, st, nil), wantRows(all))
}
