package lance

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lancectx/lancectx/lance/format/tablepb"
	"github.com/lancectx/lancectx/objstore"
)

// history builds a dataset with many small versions: appends and deletes.
func history(t *testing.T, st objstore.Store, versions int) *Dataset {
	t.Helper()
	ctx := context.Background()
	ds, err := WriteStore(ctx, st, reader(testRows(0, 10)), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	last := 0
	for v := 2; v <= versions; v++ {
		if v%3 == 0 {
			if ds, _, err = ds.Delete(ctx, fmt.Sprintf("id = %d", last+1)); err != nil {
				t.Fatal(err)
			}
			continue
		}
		last = v * 10
		if ds, err = ds.Append(ctx, reader(testRows(v*10, 10)), WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return ds
}

func keysUnder(t *testing.T, st objstore.Store, prefix string) []string {
	t.Helper()
	var out []string
	err := objstore.Walk(context.Background(), st, objstore.ListOptions{Prefix: prefix}, func(o objstore.ObjectInfo) error {
		out = append(out, o.Key)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCleanupKeepsLatestTaggedAndRetainedVersions(t *testing.T) {
	ctx := context.Background()
	st := objstore.NewMem()
	ds := history(t, st, 30)
	want := ids(t, ds, "")
	if err := ds.CreateTag(ctx, "keep", 5); err != nil {
		t.Fatal(err)
	}
	v5rows := ids(t, mustCheckout(t, ds, 5), "")
	res, err := ds.Cleanup(ctx, CleanupOptions{RetainVersions: 3, DeleteUnverified: true})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Complete || res.VersionsRemoved != 26 || res.Remaining != 0 {
		t.Fatalf("result %+v", res)
	}
	vs, err := ds.Versions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for _, v := range vs {
		got = append(got, v.Version)
	}
	if fmt.Sprint(got) != "[5 28 29 30]" {
		t.Fatalf("versions after cleanup %v", got)
	}
	latest, err := OpenStore(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	equalIDs(t, ids(t, latest, ""), want)
	equalIDs(t, ids(t, mustCheckout(t, latest, 5), ""), v5rows)
	// Every data and deletion file left is referenced by a retained version.
	refs := map[string]bool{}
	for _, v := range got {
		dv := mustCheckout(t, latest, v)
		for _, f := range dv.Fragments() {
			for _, df := range f.GetFiles() {
				refs[dataDir+df.GetPath()] = true
			}
			if dl := f.GetDeletionFile(); dl != nil {
				refs[deletionKey(f.GetId(), dl)] = true
			}
		}
		refs[transactionsDir+dv.Manifest().GetTransactionFile()] = true
	}
	for _, area := range []string{dataDir, deletionsDir, transactionsDir} {
		for _, k := range keysUnder(t, st, area) {
			if !refs[k] {
				t.Errorf("unreferenced %s survived cleanup", k)
			}
		}
	}
	// A second pass has nothing to do.
	res, err = ds.Cleanup(ctx, CleanupOptions{RetainVersions: 3, DeleteUnverified: true})
	if err != nil || res.ObjectsDeleted != 0 || !res.Complete {
		t.Fatalf("second pass %+v %v", res, err)
	}
}

func mustCheckout(t *testing.T, ds *Dataset, v uint64) *Dataset {
	t.Helper()
	out, err := ds.Checkout(context.Background(), v)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCleanupBudgetPassesResumeUntilComplete(t *testing.T) {
	ctx := context.Background()
	st := objstore.NewMem()
	ds := history(t, st, 60)
	want := ids(t, ds, "")
	passes := 0
	total := 0
	for {
		passes++
		res, err := Cleanup(ctx, st, CleanupOptions{DeleteUnverified: true, MaxObjects: 25, DeleteBatchSize: 10})
		if err != nil {
			t.Fatal(err)
		}
		if res.ObjectsDeleted > 25 {
			t.Fatalf("pass %d deleted %d objects over a budget of 25", passes, res.ObjectsDeleted)
		}
		total += res.ObjectsDeleted
		latest, err := OpenStore(ctx, st)
		if err != nil {
			t.Fatalf("after pass %d: %v", passes, err)
		}
		equalIDs(t, ids(t, latest, ""), want)
		if res.Complete {
			break
		}
		if res.StoppedBy != "max_objects" || res.Remaining == 0 {
			t.Fatalf("incomplete pass without a reason: %+v", res)
		}
		if passes > 50 {
			t.Fatal("cleanup never completes")
		}
	}
	if passes < 4 || len(keysUnder(t, st, versionsDir)) != 2 { // latest manifest + hint
		t.Fatalf("%d passes, %d objects, versions left %v", passes, total, keysUnder(t, st, versionsDir))
	}
}

func TestCleanupSparesFilesOfCommitsInFlight(t *testing.T) {
	ctx := context.Background()
	st := objstore.NewMem()
	ds := history(t, st, 10)
	// A writer that has written its data file but not committed yet.
	pending := dataDir + "pending-writer.lance"
	if err := objstore.PutBytes(ctx, st, pending, []byte("not yet committed")); err != nil {
		t.Fatal(err)
	}
	old := dataDir + "orphan-from-long-ago.lance"
	if err := objstore.PutBytes(ctx, st, old, []byte("x")); err != nil {
		t.Fatal(err)
	}
	// Newer than the latest version: protected even with DeleteUnverified.
	if _, err := ds.Cleanup(ctx, CleanupOptions{DeleteUnverified: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Stat(ctx, pending); err != nil {
		t.Fatalf("file of a commit in flight was deleted: %v", err)
	}
	// Older than the retained window but young: kept without proof (UnverifiedAge).
	// The behaviour under test is age: let the file become older than the next version.
	time.Sleep(5 * time.Millisecond)
	ds, err := ds.Append(ctx, reader(testRows(500, 1)), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := ds.Cleanup(ctx, CleanupOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Stat(ctx, pending); err != nil {
		t.Fatalf("young unverified file deleted without DeleteUnverified: %v (%+v)", err, res)
	}
	// With a short UnverifiedAge it goes.
	if _, err := ds.Cleanup(ctx, CleanupOptions{UnverifiedAge: time.Nanosecond}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{pending, old} {
		if _, err := st.Stat(ctx, k); err == nil {
			t.Fatalf("%s should be gone", k)
		}
	}
}

func TestCleanupVerifyExpiredDeletesProvenYoungFiles(t *testing.T) {
	ctx := context.Background()
	st := objstore.NewMem()
	ds := history(t, st, 12)
	// Compaction leaves the old small files referenced only by expired versions.
	ds, _, err := ds.Compact(ctx, CompactOptions{})
	if err != nil {
		t.Fatal(err)
	}
	orphan := dataDir + "orphan.lance"
	if err := objstore.PutBytes(ctx, st, orphan, []byte("x")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond) // age under test: the orphan is older than the next version
	if ds, err = ds.Append(ctx, reader(testRows(900, 1)), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	res, err := ds.Cleanup(ctx, CleanupOptions{VerifyExpired: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.ManifestsRead != int(ds.Version()) || res.DataFilesRemoved == 0 {
		t.Fatalf("result %+v", res)
	}
	data := keysUnder(t, st, dataDir)
	if len(data) != len(ds.Fragments())+1 {
		t.Fatalf("data files left %v, fragments %d", data, len(ds.Fragments()))
	}
	if _, err := st.Stat(ctx, orphan); err != nil {
		t.Fatal("an unproven young orphan must stay")
	}
}

func TestCompactMergesSmallFragmentsAndMaterializesDeletions(t *testing.T) {
	ctx := context.Background()
	st := objstore.NewMem()
	ds := history(t, st, 40) // ~27 one-batch fragments, some with deletions
	want := ids(t, ds, "")
	if err := ds.CreateTag(ctx, "before", ds.Version()); err != nil {
		t.Fatal(err)
	}
	ds, err := ds.UpdateTableMetadata(ctx, map[string]string{"k": "v"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	before := ds.Version()
	maxID := ds.Manifest().GetMaxFragmentId()
	out, res, err := ds.Compact(ctx, CompactOptions{TargetRowsPerFragment: 100})
	if err != nil {
		t.Fatal(err)
	}
	if out.Version() != before+2 || out.Transaction().GetRewrite() == nil {
		t.Fatalf("compaction should commit reserve + rewrite: version %d txn %v", out.Version(), out.Transaction())
	}
	prev := mustCheckout(t, out, before+1)
	if prev.Transaction().GetReserveFragments() == nil {
		t.Fatalf("version %d: %v", before+1, prev.Transaction())
	}
	equalIDs(t, ids(t, out, ""), want)
	for _, f := range out.Fragments() {
		if f.GetDeletionFile() != nil {
			t.Errorf("fragment %d still has deletions", f.GetId())
		}
		if f.GetId() <= uint64(maxID) {
			t.Errorf("new fragment reused id %d (max was %d)", f.GetId(), maxID)
		}
	}
	if len(out.Fragments()) != 3 || res.FragmentsAdded != 3 || res.FragmentsRemoved == 0 || res.DeletedRowsRemoved == 0 {
		t.Fatalf("fragments %d result %+v", len(out.Fragments()), res)
	}
	if out.TableMetadata()["k"] != "v" || out.Manifest().GetReaderFeatureFlags()&flagDeletionFiles != 0 {
		t.Fatalf("metadata %v flags %d", out.TableMetadata(), out.Manifest().GetReaderFeatureFlags())
	}
	// Nothing left to do.
	again, res, err := out.Compact(ctx, CompactOptions{TargetRowsPerFragment: 100})
	if err != nil || again.Version() != out.Version() || res.GroupsPlanned != 0 {
		t.Fatalf("second compaction: %v %+v", err, res)
	}
}

func TestCompactionOverAConcurrentDeleteOfItsFragments(t *testing.T) {
	ctx := context.Background()
	st := objstore.NewMem()
	base := history(t, st, 8)
	if _, _, err := base.Delete(ctx, "id = 70"); err != nil {
		t.Fatal(err)
	}
	out, _, err := base.Compact(ctx, CompactOptions{})
	if err != nil {
		t.Fatalf("compaction over a delete of its fragments carries the delete over: %v", err)
	}
	latest, _ := OpenStore(ctx, st)
	if latest.Version() != out.Version() {
		t.Fatalf("latest %d, compaction committed %d", latest.Version(), out.Version())
	}
	for _, id := range ids(t, latest, "") {
		if id == 70 {
			t.Fatal("a deleted row came back")
		}
	}
}

func TestPlanCompaction(t *testing.T) {
	frag := func(id, rows, deleted uint64) *tablepbFragment { return mkFrag(id, rows, deleted) }
	o := CompactOptions{TargetRowsPerFragment: 100}
	o.defaults()
	cases := map[string]struct {
		frags   []*tablepbFragment
		indexed []uint64
		want    string
	}{
		"neighbouring small fragments merge up to the target": {
			frags: []*tablepbFragment{frag(0, 40, 0), frag(1, 40, 0), frag(2, 40, 0), frag(3, 40, 0)},
			want:  "[[0 1] [2 3]]",
		},
		"a large fragment splits the runs": {
			frags: []*tablepbFragment{frag(0, 10, 0), frag(1, 500, 0), frag(2, 10, 0), frag(3, 10, 0)},
			want:  "[[2 3]]",
		},
		"a large fragment with deletions is rewritten alone": {
			frags: []*tablepbFragment{frag(0, 500, 1), frag(1, 500, 0)},
			want:  "[[0]]",
		},
		"a lone small fragment is left alone": {
			frags: []*tablepbFragment{frag(0, 10, 0), frag(1, 500, 0)},
			want:  "[]",
		},
		"indexed fragments are skipped": {
			frags:   []*tablepbFragment{frag(0, 10, 0), frag(1, 10, 0), frag(2, 10, 0)},
			indexed: []uint64{1},
			want:    "[]",
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			idx := map[uint64]bool{}
			for _, id := range c.indexed {
				idx[id] = true
			}
			groups, _ := planCompaction(c.frags, idx, o)
			var got [][]uint64
			for _, g := range groups {
				var ids []uint64
				for _, f := range g {
					ids = append(ids, f.GetId())
				}
				got = append(got, ids)
			}
			if s := fmt.Sprint(got); s != c.want && !(s == "[]" && c.want == "[]") {
				t.Fatalf("plan %s, want %s", s, c.want)
			}
		})
	}
}

type tablepbFragment = tablepb.DataFragment

func mkFrag(id, rows, deleted uint64) *tablepb.DataFragment {
	f := &tablepb.DataFragment{Id: id, PhysicalRows: rows, Files: []*tablepb.DataFile{{Path: fmt.Sprint(id), FileSizeBytes: rows * 10}}}
	if deleted > 0 {
		f.DeletionFile = &tablepb.DeletionFile{NumDeletedRows: deleted}
	}
	return f
}

func TestSeedHistoryThenCleanupReclaimsIt(t *testing.T) {
	ctx := context.Background()
	st := objstore.NewMem()
	ds, err := WriteStore(ctx, st, reader(testRows(0, 10)), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ds, err = SeedHistory(ctx, st, SeedHistoryOptions{Versions: 5000, CopyData: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("seeded 5000 versions in %s", time.Since(start))
	if ds.Version() != 5001 {
		t.Fatalf("version %d", ds.Version())
	}
	equalIDs(t, ids(t, mustCheckout(t, ds, 2500), ""), seq(0, 10))
	res, err := ds.Cleanup(ctx, CleanupOptions{DeleteUnverified: true})
	if err != nil || !res.Complete || res.VersionsRemoved != 5000 || res.DataFilesRemoved != 5000 || res.TransactionFilesRemoved != 5000 {
		t.Fatalf("cleanup %+v %v", res, err)
	}
	equalIDs(t, ids(t, ds, ""), seq(0, 10))
}

// TestCompactionRecommitsOverAConcurrentSchemaChange: a commit the rewrite cannot
// rebase over (a schema change) that leaves its fragments as they were makes the
// compaction commit its groups again on the latest version.
func TestCompactionRecommitsOverAConcurrentSchemaChange(t *testing.T) {
	ctx := context.Background()
	st := objstore.NewMem()
	ds, err := WriteStore(ctx, st, reader(testRows(0, 10)), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 6; i++ { // six fragments of ten rows
		if ds, err = ds.Append(ctx, reader(testRows(i*10, 10)), WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	want := ids(t, ds, "")
	if _, err := ds.AddNullColumns(ctx, []arrow.Field{{Name: "extra", Type: arrow.PrimitiveTypes.Int32, Nullable: true}}); err != nil {
		t.Fatal(err)
	}
	out, res, err := ds.Compact(ctx, CompactOptions{TargetRowsPerFragment: 25}) // three groups of two
	if err != nil {
		t.Fatalf("compaction must recommit over the schema change: %v", err)
	}
	if res.GroupsPlanned != 3 || res.GroupsDone != 3 || !res.Complete {
		t.Fatalf("result %+v", res)
	}
	latest, err := OpenStore(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if latest.Version() != out.Version() || len(latest.Fragments()) != 3 || latest.Schema().Field("extra") == nil {
		t.Fatalf("latest version %d (compaction committed %d): %d fragments, schema %v",
			latest.Version(), out.Version(), len(latest.Fragments()), latest.Schema())
	}
	equalIDs(t, ids(t, latest, ""), want)
	if n := len(ids(t, latest, "extra IS NULL")); n != len(want) {
		t.Fatalf("%d rows read extra as null, want %d", n, len(want))
	}
}

// TestIntactGroups: only the groups whose fragments are all unchanged and unindexed
// are kept.
func TestIntactGroups(t *testing.T) {
	f := func(id uint64, rows uint64) *tablepb.DataFragment {
		return &tablepb.DataFragment{Id: id, PhysicalRows: rows}
	}
	groups := []compactionGroup{{old: []*tablepb.DataFragment{f(1, 10), f(2, 10)}}, {old: []*tablepb.DataFragment{f(3, 10)}},
		{old: []*tablepb.DataFragment{f(4, 10), f(5, 10)}}, {old: []*tablepb.DataFragment{f(6, 10), f(7, 10)}}}
	latest := []*tablepb.DataFragment{f(1, 10), f(2, 10), f(3, 11), f(4, 10), f(6, 10), f(7, 10)}
	kept := intactGroups(latest, map[uint64]bool{7: true}, groups)
	if len(kept) != 1 || kept[0].old[0].GetId() != 1 {
		t.Fatalf("kept %v", kept)
	}
}

// TestCompactionMaxFragmentsBoundsAPass: a backlog larger than MaxFragments is
// compacted by several passes, each committing at most that many fragments.
func TestCompactionMaxFragmentsBoundsAPass(t *testing.T) {
	ctx := context.Background()
	st := objstore.NewMem()
	ds, err := WriteStore(ctx, st, reader(testRows(0, 5)), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 25; i++ {
		if ds, err = ds.Append(ctx, reader(testRows(i*5, 5)), WriteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	want := ids(t, ds, "")
	passes := 0
	for {
		out, res, err := ds.Compact(ctx, CompactOptions{MaxFragments: 10})
		if err != nil {
			t.Fatal(err)
		}
		if res.FragmentsRemoved > 10 {
			t.Fatalf("pass %d rewrote %d fragments", passes, res.FragmentsRemoved)
		}
		ds = out
		if res.GroupsPlanned == 0 {
			break
		}
		passes++
		if res.Complete != (passes == 3) {
			t.Fatalf("pass %d: complete=%v (%+v)", passes, res.Complete, res)
		}
	}
	// 25 fragments: 10 -> 1, then 1+9 -> 1, then 1+5 -> 1.
	if passes != 3 || len(ds.Fragments()) != 1 {
		t.Fatalf("%d passes, %d fragments left", passes, len(ds.Fragments()))
	}
	// Fragments stay in id order, so rewritten rows move to the end of the table.
	equalIDs(t, sortedInts(ids(t, ds, "")), sortedInts(want))
}

// listCounter counts the List requests under a prefix.
type listCounter struct {
	objstore.Store
	prefix string
	mu     sync.Mutex
	n      int
}

func (l *listCounter) List(ctx context.Context, opts objstore.ListOptions) (objstore.ListPage, error) {
	if strings.HasPrefix(opts.Prefix, l.prefix) {
		l.mu.Lock()
		l.n++
		l.mu.Unlock()
	}
	return l.Store.List(ctx, opts)
}

func (l *listCounter) lists() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// TestCleanupBudgetBoundsTheListing: a pass with an object budget stops listing the
// unreferenced files once it has found as many as its budget allows, so its cost follows
// the budget, not the backlog; the passes that follow still delete every orphan.
func TestCleanupBudgetBoundsTheListing(t *testing.T) {
	ctx := context.Background()
	mem := objstore.NewMem()
	ds := history(t, mem, 3)
	const orphans = 5000
	for i := range orphans {
		if err := objstore.PutBytes(ctx, mem, fmt.Sprintf("%sorphan-%05d.lance", dataDir, i), []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	// The orphans must be older than the latest version: cleanup keeps what is not
	// strictly older than it, so wait until the clock has passed the newest orphan's
	// modification time as the store reports it, then commit.
	waitPastNewest(t, mem, dataDir+"orphan-")
	if _, err := ds.Append(ctx, reader(testRows(500, 1)), WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	st := &listCounter{Store: mem, prefix: dataDir}
	res, err := Cleanup(ctx, st, CleanupOptions{DeleteUnverified: true, MaxObjects: 300})
	if err != nil {
		t.Fatal(err)
	}
	if res.Complete || res.ObjectsDeleted != 300 || res.StoppedBy != "max_objects" || res.Remaining == 0 {
		t.Fatalf("first pass: %+v, want 300 objects deleted and the pass stopped by its budget", res)
	}
	// One page of data/ (1,000 keys) holds more candidates than the budget.
	if n := st.lists(); n != 1 {
		t.Fatalf("a pass with a budget of 300 listed %d pages of data/ (%d orphans)", n, orphans)
	}
	for pass := 2; !res.Complete; pass++ {
		if pass > 40 {
			t.Fatal("cleanup never completes")
		}
		if res, err = Cleanup(ctx, st, CleanupOptions{DeleteUnverified: true, MaxObjects: 300}); err != nil {
			t.Fatal(err)
		}
		if res.ObjectsDeleted > 300 {
			t.Fatalf("pass %d deleted %d objects over a budget of 300", pass, res.ObjectsDeleted)
		}
	}
	if left := keysUnder(t, mem, dataDir+"orphan-"); len(left) != 0 {
		t.Fatalf("%d orphans left after the passes", len(left))
	}
	latest, err := OpenStore(ctx, mem)
	if err != nil {
		t.Fatal(err)
	}
	if n := latest.CountRows(); n == 0 {
		t.Fatal("the latest version lost its rows")
	}
}

// waitPastNewest returns once time.Now() is after the newest modification time the
// store reports under prefix, so that a version committed afterwards is younger than
// every object there (cleanup decides by age, at the store's granularity).
func waitPastNewest(t *testing.T, st objstore.Store, prefix string) {
	t.Helper()
	var newest time.Time
	err := objstore.Walk(context.Background(), st, objstore.ListOptions{Prefix: prefix}, func(o objstore.ObjectInfo) error {
		if o.LastModified.After(newest) {
			newest = o.LastModified
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if newest.IsZero() {
		t.Fatalf("no object under %s reports a modification time", prefix)
	}
	if ahead := time.Until(newest); ahead > time.Minute {
		// A store clock this far ahead is a bug of the store, not something to wait out.
		t.Fatalf("the newest object under %s is modified %s in the future", prefix, ahead)
	}
	for !time.Now().After(newest) {
		runtime.Gosched()
	}
}
