package lance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/RoaringBitmap/roaring/v2"
	"google.golang.org/protobuf/proto"

	"github.com/lancectx/lancectx/lance/format/tablepb"
	"github.com/lancectx/lancectx/objstore"
)

// CompactOptions tune a compaction pass.
type CompactOptions struct {
	// TargetRowsPerFragment: fragments with fewer live rows are merged with neighbours
	// (default 1,048,576, Lance's default).
	TargetRowsPerFragment int64
	// TargetBytesPerFragment: a fragment whose data files reach this size is never
	// merged, whatever its row count (default 1 GiB).
	TargetBytesPerFragment int64
	// MaterializeDeletionsThreshold: a fragment whose deleted/physical rows ratio is above
	// it is rewritten without the deleted rows even if it is large. 0 means any deletion
	// (lancectx's default; Lance's is 0.1).
	MaterializeDeletionsThreshold float64
	// KeepDeletions disables materializing deletions altogether.
	KeepDeletions bool
	// BatchRows is the number of rows read per batch while rewriting (default 8192). With
	// PageBytes it bounds the memory of a pass, whatever the dataset size.
	BatchRows int
	// PageBytes is the per-column page buffer of the file writer (default 8 MiB).
	PageBytes int
	// MaxGroups bounds the groups rewritten in one pass (0: all); the rest waits for the
	// next pass, which plans again from the new latest version.
	MaxGroups int
	// MaxFragments bounds the fragments rewritten in one pass (0: all), splitting a
	// group if need be: a dataset with a backlog of thousands of small fragments is
	// compacted by several bounded passes (each its own commit) instead of one that
	// outlives its deadline and loses everything.
	MaxFragments int
	// Logger receives the pass summary; Name identifies the dataset in it.
	Logger *slog.Logger
	Name   string
}

func (o *CompactOptions) defaults() {
	if o.TargetRowsPerFragment <= 0 {
		o.TargetRowsPerFragment = 1 << 20
	}
	if o.TargetBytesPerFragment <= 0 {
		o.TargetBytesPerFragment = 1 << 30
	}
	if o.BatchRows <= 0 {
		o.BatchRows = 8192
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// CompactResult reports what a compaction pass did.
type CompactResult struct {
	FragmentsRemoved    int     `json:"fragments_removed"`
	FragmentsAdded      int     `json:"fragments_added"`
	FilesRemoved        int     `json:"files_removed"`
	FilesAdded          int     `json:"files_added"`
	RowsWritten         int64   `json:"rows_written"`
	BytesRead           int64   `json:"bytes_read"`
	BytesWritten        int64   `json:"bytes_written"`
	DeletedRowsRemoved  int64   `json:"deleted_rows_removed"`
	GroupsPlanned       int     `json:"groups_planned"`
	GroupsDone          int     `json:"groups_done"`
	Version             uint64  `json:"version"`
	Complete            bool    `json:"complete"`
	Seconds             float64 `json:"seconds"`
	SkippedIndexedFrags int     `json:"skipped_indexed_fragments"`
}

// compactionGroup is a run of neighbouring fragments rewritten into new ones.
type compactionGroup struct {
	old []*tablepb.DataFragment
	new []*tablepb.DataFragment
}

// planCompaction picks groups of neighbouring fragments to rewrite. A fragment is a
// candidate when it is small (rows and bytes under the targets) or carries deletions to
// materialize; fragments covered by an index are left alone, because lancectx cannot
// remap index row addresses. A group that would rewrite one fragment with nothing to
// materialize is dropped.
func planCompaction(frags []*tablepb.DataFragment, indexed map[uint64]bool, o CompactOptions) ([][]*tablepb.DataFragment, int) {
	var groups [][]*tablepb.DataFragment
	var cur []*tablepb.DataFragment
	var curRows int64
	skipped := 0
	flush := func() {
		if len(cur) > 1 || (len(cur) == 1 && hasDeletionsToMaterialize(cur[0], o)) {
			groups = append(groups, cur)
		}
		cur, curRows = nil, 0
	}
	for _, f := range frags {
		if indexed[f.GetId()] {
			skipped++
			flush()
			continue
		}
		live := int64(f.GetPhysicalRows()) - int64(f.GetDeletionFile().GetNumDeletedRows())
		small := live < o.TargetRowsPerFragment && fragmentBytes(f) < o.TargetBytesPerFragment
		if !small && !hasDeletionsToMaterialize(f, o) {
			flush()
			continue
		}
		if len(cur) > 0 && curRows+live > o.TargetRowsPerFragment {
			flush()
		}
		cur = append(cur, f)
		curRows += live
	}
	flush()
	return groups, skipped
}

func hasDeletionsToMaterialize(f *tablepb.DataFragment, o CompactOptions) bool {
	if o.KeepDeletions || f.GetDeletionFile() == nil || f.GetPhysicalRows() == 0 {
		return false
	}
	ratio := float64(f.GetDeletionFile().GetNumDeletedRows()) / float64(f.GetPhysicalRows())
	return ratio > o.MaterializeDeletionsThreshold
}

func fragmentBytes(f *tablepb.DataFragment) int64 {
	var n int64
	for _, df := range f.GetFiles() {
		n += int64(df.GetFileSizeBytes())
	}
	return n
}

// Compact rewrites small fragments (and fragments with deletions) of this version into
// fragments of the target size, streaming rows through bounded batches, and commits
// like Lance: ReserveFragments, then Rewrite with the reserved ids. Indices and table
// metadata carry over. It returns the dataset at the new version (d itself when there
// was nothing to do).
func (d *Dataset) Compact(ctx context.Context, o CompactOptions) (*Dataset, CompactResult, error) {
	start := time.Now()
	o.defaults()
	var res CompactResult
	if err := d.checkWritable(); err != nil {
		return nil, res, err
	}
	indexed, err := indexedFragments(d.mf.Indices)
	if err != nil {
		return nil, res, err
	}
	plan, skipped := planCompaction(d.Fragments(), indexed, o)
	res.GroupsPlanned, res.SkippedIndexedFrags = len(plan), skipped
	res.Version = d.Version()
	if len(plan) == 0 {
		res.Complete = true
		return d, res, nil
	}
	if o.MaxGroups > 0 && len(plan) > o.MaxGroups {
		plan = plan[:o.MaxGroups]
	}
	truncated := false
	if o.MaxFragments > 0 {
		plan, truncated = limitFragments(plan, o.MaxFragments)
	}
	stable := usesStableRowIDs(d.mf.Manifest)
	if stable {
		for _, g := range plan {
			for _, f := range g {
				if hasExternalRowMeta(f) {
					return nil, res, fmt.Errorf("%w: compaction of fragment %d, whose row ids or row versions are in an external file", ErrUnsupported, f.GetId())
				}
			}
		}
	}
	wopts := WriteOptions{MaxRowsPerFile: o.TargetRowsPerFragment, MaxBytesPerFile: o.TargetBytesPerFragment, PageBytes: o.PageBytes}
	wopts.defaults()
	groups := make([]compactionGroup, 0, len(plan))
	var total uint32
	for _, old := range plan {
		newFrags, err := d.rewriteGroup(ctx, old, o, wopts, &res)
		if err != nil {
			return nil, res, err
		}
		if stable {
			// Stable row ids survive compaction: the new fragments take the ids of the
			// rows they hold.
			if err := carryRowIDs(ctx, d.store, old, newFrags); err != nil {
				return nil, res, fmt.Errorf("compact: %w", err)
			}
		}
		groups = append(groups, compactionGroup{old: old, new: newFrags})
		total += uint32(len(newFrags))
	}
	readVersion := d.Version()
	copts := commitOptions{readVersion: &readVersion}
	reserved, err := commit(ctx, d.store, d, &reserveOp{n: total}, copts)
	if err != nil {
		return nil, res, fmt.Errorf("compact: reserve fragment ids: %w", err)
	}
	next := uint64(reserved.Manifest().GetMaxFragmentId()) + 1 - uint64(total)
	for _, g := range groups {
		for _, f := range g.new {
			f.Id = next
			next++
		}
	}
	out, err := commit(ctx, d.store, reserved, &rewriteOp{groups: groups}, copts)
	// A commit that changed some of the compacted fragments meanwhile (a merge-insert
	// or delete adding a deletion file) makes their groups stale, but not the others:
	// commit those against the latest version instead of throwing all the work away,
	// or a dataset with steady upserts would never finish a compaction. The files of a
	// dropped group are unreferenced and go with the next cleanup.
	for attempt := 1; errors.Is(err, errRetryOp) && attempt <= compactRecommits; attempt++ {
		latest, lerr := reserved.Latest(ctx)
		if lerr != nil {
			return nil, res, fmt.Errorf("compact: commit rewrite: %w (then reading the latest version: %v)", err, lerr)
		}
		indexed, ierr := indexedFragments(latest.mf.Indices)
		if ierr != nil {
			return nil, res, fmt.Errorf("compact: commit rewrite: %w (then reading the latest indices: %v)", err, ierr)
		}
		kept := intactGroups(latest.Fragments(), indexed, groups)
		if len(kept) == 0 {
			break
		}
		o.Logger.Info("lance compaction: fragments changed during the rewrite; committing the intact groups",
			"dataset", o.Name, "groups", len(groups), "intact", len(kept), "latest_version", latest.Version())
		groups = kept
		rv := latest.Version()
		out, err = commit(ctx, d.store, latest, &rewriteOp{groups: groups}, commitOptions{readVersion: &rv})
	}
	if err != nil {
		return nil, res, fmt.Errorf("compact: commit rewrite: %w", err)
	}
	for _, g := range groups {
		res.FragmentsRemoved += len(g.old)
		res.FragmentsAdded += len(g.new)
		for _, f := range g.old {
			res.FilesRemoved += len(f.GetFiles())
			res.BytesRead += fragmentBytes(f)
			res.DeletedRowsRemoved += int64(f.GetDeletionFile().GetNumDeletedRows())
		}
		for _, f := range g.new {
			res.FilesAdded += len(f.GetFiles())
			res.BytesWritten += fragmentBytes(f)
		}
	}
	res.GroupsDone = len(groups)
	res.Complete = len(groups) == res.GroupsPlanned && !truncated
	res.Version = out.Version()
	res.Seconds = time.Since(start).Seconds()
	o.Logger.Info("lance compaction", "dataset", o.Name, "version", res.Version, "fragments_removed", res.FragmentsRemoved,
		"fragments_added", res.FragmentsAdded, "rows_written", res.RowsWritten, "bytes_written", res.BytesWritten,
		"deleted_rows_removed", res.DeletedRowsRemoved, "complete", res.Complete, "seconds", res.Seconds)
	out.uri = d.uri
	return out, res, nil
}

// limitFragments keeps the first groups of plan holding at most max fragments in all,
// cutting the last one short (when what is left of it still merges fragments). It
// reports whether anything was left out.
func limitFragments(plan [][]*tablepb.DataFragment, max int) ([][]*tablepb.DataFragment, bool) {
	total := 0
	for i, g := range plan {
		if total+len(g) <= max {
			total += len(g)
			continue
		}
		out := plan[:i]
		if rest := max - total; rest >= 2 {
			out = append(out[:i:i], g[:rest])
		}
		return out, true
	}
	return plan, false
}

// compactRecommits bounds how often Compact recommits its intact groups after a
// concurrent commit changed some of its fragments.
const compactRecommits = 3

// intactGroups returns the groups whose old fragments are all still in frags
// unchanged and covered by no index (an index built meanwhile may cover them).
func intactGroups(frags []*tablepb.DataFragment, indexed map[uint64]bool, groups []compactionGroup) []compactionGroup {
	byID := make(map[uint64]*tablepb.DataFragment, len(frags))
	for _, f := range frags {
		byID[f.GetId()] = f
	}
	var kept []compactionGroup
outer:
	for _, g := range groups {
		for _, f := range g.old {
			if cur, ok := byID[f.GetId()]; !ok || !proto.Equal(cur, f) || indexed[f.GetId()] {
				continue outer
			}
		}
		kept = append(kept, g)
	}
	return kept
}

// rewriteGroup streams the live rows of a group into new data files (ids unassigned).
func (d *Dataset) rewriteGroup(ctx context.Context, old []*tablepb.DataFragment, o CompactOptions, wopts WriteOptions, res *CompactResult) ([]*tablepb.DataFragment, error) {
	ids := make([]uint64, len(old))
	for i, f := range old {
		ids[i] = f.GetId()
	}
	// The rows are rewritten whole: blob columns as their values, not descriptions.
	s, err := d.Scan(ctx, ScanOptions{Fragments: ids, BatchSize: o.BatchRows, Parallelism: 2, BlobBytes: true})
	if err != nil {
		return nil, err
	}
	defer s.Release()
	counted := &countingReader{Scanner: s}
	frags, err := d.writeDataFragments(ctx, counted, wopts)
	if err != nil {
		return nil, fmt.Errorf("compact: rewrite fragments %v: %w", ids, err)
	}
	res.RowsWritten += counted.rows
	return frags, nil
}

// countingReader counts the rows passing through a scan.
type countingReader struct {
	*Scanner
	rows int64
}

func (c *countingReader) Next() bool {
	if !c.Scanner.Next() {
		return false
	}
	c.rows += c.Scanner.RecordBatch().NumRows()
	return true
}

// rewriteOp replaces groups of fragments by their rewritten copies (same rows).
type rewriteOp struct {
	groups []compactionGroup
}

func (o *rewriteOp) name() string { return "rewrite" }

func (o *rewriteOp) fill(txn *tablepb.Transaction) {
	rw := &tablepb.Transaction_Rewrite{}
	for _, g := range o.groups {
		rw.Groups = append(rw.Groups, &tablepb.Transaction_Rewrite_RewriteGroup{OldFragments: g.old, NewFragments: g.new})
	}
	txn.Operation = &tablepb.Transaction_Rewrite_{Rewrite: rw}
}

func (o *rewriteOp) apply(ctx context.Context, st objstore.Store, base *manifestFile) (*manifestFile, error) {
	next := cloneBase(base)
	pos := map[uint64]int{}
	for i, f := range next.Manifest.Fragments {
		pos[f.GetId()] = i
	}
	replace := map[int][]*tablepb.DataFragment{}
	drop := map[int]bool{}
	for _, g := range o.groups {
		first := -1
		var changed []int // positions in g.old of fragments changed since the rewrite read them
		for k, f := range g.old {
			i, ok := pos[f.GetId()]
			if !ok {
				changed = append(changed, k) // every row deleted meanwhile
				continue
			}
			if !proto.Equal(next.Manifest.Fragments[i], f) {
				changed = append(changed, k)
			}
			if first < 0 || i < first {
				first = i
			}
			drop[i] = true
		}
		if first < 0 {
			// Every fragment of the group was deleted meanwhile: nothing to replace.
			continue
		}
		newFrags := cloneFragments(g.new)
		if len(changed) > 0 {
			if err := carryDeletions(ctx, st, base.Manifest.GetVersion(), g, changed, next.Manifest.Fragments, pos, newFrags); err != nil {
				return nil, err
			}
		}
		replace[first] = newFrags
	}
	var frags []*tablepb.DataFragment
	for i, f := range next.Manifest.Fragments {
		if nf, ok := replace[i]; ok {
			frags = append(frags, nf...)
			continue
		}
		if !drop[i] {
			frags = append(frags, f)
		}
	}
	next.Manifest.Fragments = frags
	return next, nil
}

// carryDeletions moves the rows deleted from a group's old fragments after the rewrite
// read them (a delete or merge-insert that committed meanwhile) onto the group's new
// fragments, so the rewrite does not bring them back. The rewrite streamed the live
// rows of the old fragments in order into the new ones, so an old row's place in the
// new fragments is its rank among the live rows before it. A fragment changed in any
// other way (its data files) cannot be carried over: the group must be recomputed.
func carryDeletions(ctx context.Context, st objstore.Store, version uint64, g compactionGroup, changed []int,
	cur []*tablepb.DataFragment, pos map[uint64]int, newFrags []*tablepb.DataFragment) error {
	// Live rows of each old fragment when it was read, and where each starts in the stream.
	starts := make([]uint64, len(g.old))
	var stream uint64
	for k, f := range g.old {
		starts[k] = stream
		stream += f.GetPhysicalRows() - f.GetDeletionFile().GetNumDeletedRows()
	}
	ends := make([]uint64, len(newFrags)) // exclusive end of each new fragment in the stream
	var written uint64
	for m, nf := range newFrags {
		written += nf.GetPhysicalRows()
		ends[m] = written
	}
	if written != stream {
		return fmt.Errorf("%w: the rewrite of fragments wrote %d rows for %d live ones", errRetryOp, written, stream)
	}
	deleted := map[int]*roaring.Bitmap{} // by new fragment position
	for _, k := range changed {
		old := g.old[k]
		before, err := readDeletionVector(ctx, st, old)
		if err != nil {
			return err
		}
		now := roaring.New()
		if i, ok := pos[old.GetId()]; ok {
			f := cur[i]
			if f.GetPhysicalRows() != old.GetPhysicalRows() || !sameFiles(f, old) {
				return fmt.Errorf("%w: fragment %d changed while it was compacted", errRetryOp, old.GetId())
			}
			if now, err = readDeletionVector(ctx, st, f); err != nil {
				return err
			}
		} else {
			now.AddRange(0, old.GetPhysicalRows()) // the fragment went, every row deleted
		}
		if roaring.AndNot(before, now).GetCardinality() > 0 {
			return fmt.Errorf("%w: fragment %d lost deletions while it was compacted", errRetryOp, old.GetId())
		}
		added := roaring.AndNot(now, before)
		it := added.Iterator()
		for it.HasNext() {
			off := uint64(it.Next())
			// Rank among the live rows: off minus the rows deleted before it.
			at := starts[k] + off - before.Rank(uint32(off))
			m := sort.Search(len(ends), func(m int) bool { return ends[m] > at })
			if m == len(ends) {
				return fmt.Errorf("%w: row %d of fragment %d is beyond the rewrite", errRetryOp, off, old.GetId())
			}
			if deleted[m] == nil {
				deleted[m] = roaring.New()
			}
			deleted[m].Add(uint32(at - (ends[m] - newFrags[m].GetPhysicalRows())))
		}
	}
	for m, bm := range deleted {
		df, err := writeDeletionFile(ctx, st, newFrags[m].GetId(), version, bm)
		if err != nil {
			return err
		}
		newFrags[m].DeletionFile = df
	}
	return nil
}

// sameFiles reports whether two versions of a fragment have the same data files.
func sameFiles(a, b *tablepb.DataFragment) bool {
	if len(a.GetFiles()) != len(b.GetFiles()) {
		return false
	}
	for i := range a.GetFiles() {
		if !proto.Equal(a.GetFiles()[i], b.GetFiles()[i]) {
			return false
		}
	}
	return true
}

func (o *rewriteOp) rebase(other *tablepb.Transaction) error {
	switch other.GetOperation().(type) {
	case *tablepb.Transaction_Delete_, *tablepb.Transaction_Update_:
		// Deletions of the rewritten rows are carried over by apply, which refuses
		// any other change to the fragments.
		return nil
	}
	mine := map[uint64]bool{}
	for _, g := range o.groups {
		for _, f := range g.old {
			mine[f.GetId()] = true
		}
	}
	return rebaseDisjoint(mine, other)
}
