package master

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/lance/format/tablepb"
)

// fragRows are the live rows of one fragment of a stats version with what identifies
// the fragment's content: its data files and its deletion file. Lance never rewrites a
// data file, so a later version whose fragment has the same data files holds the same
// physical rows; only its deletion file may have grown. A load of that version keeps the
// rows without reading them. Shared between snapshots: never modified once built.
type fragRows struct {
	files    string   // the data file paths: the fragment's content
	deletion string   // the deletion file ("": none)
	offsets  []uint32 // physical offset of each live row, ascending
	rows     []ExperimentStats
}

// fragFiles identifies a fragment's content by its data files.
func fragFiles(f *tablepb.DataFragment) string {
	var b strings.Builder
	for _, df := range f.GetFiles() {
		b.WriteString(df.GetPath())
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "%d", f.GetPhysicalRows())
	return b.String()
}

// fragDeletion identifies a fragment's deletion file ("": none).
func fragDeletion(f *tablepb.DataFragment) string {
	dl := f.GetDeletionFile()
	if dl == nil {
		return ""
	}
	return fmt.Sprintf("%d/%d/%d/%d", dl.GetFileType(), dl.GetReadVersion(), dl.GetId(), dl.GetNumDeletedRows())
}

// statsLoad counts what one load read (tests and logs).
type statsLoad struct {
	reused, recounted, read, written int // fragments
}

// loadSnapshot builds the snapshot of ds from prev's fragments (prev may be nil or know
// none): a fragment whose data and deletion files are prev's is reused as is; one whose
// deletion file changed has only its live row addresses read (no column data); a new
// fragment is read, unless written (the rows a commit that made ds wrote, in order) is
// exactly what the new fragments hold. So a load after a one-row upsert reads one row
// and one fragment's deletion vector, not the table; a load after an overwrite or a
// compaction (new fragments throughout) reads the whole table, as before.
//
// It runs in the loader's or writer's goroutine and publishes nothing: readers keep the
// previous snapshot until the caller swaps the result in.
func loadSnapshot(ctx context.Context, ds *lance.Dataset, prev *StatsSnapshot, written []ExperimentStats) (*StatsSnapshot, error) {
	snap, _, err := loadSnapshotCounted(ctx, ds, prev, written)
	return snap, err
}

func loadSnapshotCounted(ctx context.Context, ds *lance.Dataset, prev *StatsSnapshot, written []ExperimentStats) (*StatsSnapshot, statsLoad, error) {
	var n statsLoad
	var old map[uint64]*fragRows
	if prev != nil {
		old = prev.frags
	}
	order := ds.Fragments()
	frags := make(map[uint64]*fragRows, len(order))
	var recount, fresh []*tablepb.DataFragment
	var freshRows uint64
	for _, f := range order {
		o := old[f.GetId()]
		files, del := fragFiles(f), fragDeletion(f)
		switch {
		case o != nil && o.files == files && o.deletion == del:
			frags[f.GetId()] = o
			n.reused++
		case o != nil && o.files == files:
			recount = append(recount, f)
		default:
			fresh = append(fresh, f)
			freshRows += f.GetPhysicalRows()
			if del != "" {
				freshRows = ^uint64(0) // rows deleted already: written cannot say which
			}
		}
	}
	if len(fresh) > 0 && written != nil && freshRows == uint64(len(written)) {
		// The commit's new fragments hold the rows it wrote, in order.
		for _, f := range fresh {
			k := int(f.GetPhysicalRows())
			fr := &fragRows{files: fragFiles(f), offsets: make([]uint32, k), rows: make([]ExperimentStats, k)}
			for i := range k {
				fr.offsets[i] = uint32(i)
				fr.rows[i] = written[i]
				fr.rows[i].Kind = kindOf(fr.rows[i].Kind)
			}
			written = written[k:]
			frags[f.GetId()] = fr
			n.written++
		}
		fresh = nil
	}
	if len(fresh) > 0 {
		if err := readFragments(ctx, ds, fresh, nil, frags); err != nil {
			return nil, n, err
		}
		n.read = len(fresh)
	}
	if len(recount) > 0 {
		if err := readFragments(ctx, ds, recount, old, frags); err != nil {
			return nil, n, err
		}
		n.recounted = len(recount)
	}
	var rows []ExperimentStats
	for _, f := range order {
		rows = append(rows, frags[f.GetId()].rows...)
	}
	snap := newSnapshot(ds.Version(), rows, prev)
	snap.frags = frags
	return snap, n, nil
}

// readFragments reads the live rows of frags into out. With old set, the fragments'
// data is old's (only their deletion files changed): just the row addresses are read
// and the rows taken from old.
func readFragments(ctx context.Context, ds *lance.Dataset, frags []*tablepb.DataFragment, old map[uint64]*fragRows, out map[uint64]*fragRows) error {
	ids := make([]uint64, len(frags))
	for i, f := range frags {
		ids[i] = f.GetId()
		out[f.GetId()] = &fragRows{files: fragFiles(f), deletion: fragDeletion(f)}
	}
	opts := lance.ScanOptions{Fragments: ids, WithRowAddr: true}
	if old != nil {
		opts.Columns = []string{lance.RowAddrColumn}
	}
	recs, err := ds.Collect(ctx, opts)
	if err != nil {
		return fmt.Errorf("stats: read %d fragments of version %d: %w", len(ids), ds.Version(), err)
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	var rows []ExperimentStats
	var addrs []uint64
	for _, rec := range recs {
		if old != nil {
			rows, addrs = decodeAddrs(rec, rows, addrs)
		} else {
			rows, addrs = decodeStats(rec, rows, addrs)
		}
	}
	if len(addrs) != len(rows) {
		return fmt.Errorf("stats: version %d: a scan of %d rows returned %d row addresses", ds.Version(), len(rows), len(addrs))
	}
	for i, a := range addrs {
		id, off := a>>32, uint32(a)
		fr := out[id]
		if fr == nil {
			return fmt.Errorf("stats: version %d: row address %#x outside the fragments read", ds.Version(), a)
		}
		r := rows[i]
		if old != nil {
			// A deletion only removes rows: each live row is one the old fragment had.
			var ok bool
			if r, ok = old[id].rowAt(off); !ok {
				return fmt.Errorf("stats: version %d: fragment %d has a live row %d its previous version did not", ds.Version(), id, off)
			}
		}
		fr.offsets = append(fr.offsets, off)
		fr.rows = append(fr.rows, r)
	}
	return nil
}

// decodeAddrs appends rec's row addresses to addrs, and as many placeholder rows.
func decodeAddrs(rec arrow.RecordBatch, rows []ExperimentStats, addrs []uint64) ([]ExperimentStats, []uint64) {
	idx := rec.Schema().FieldIndices(lance.RowAddrColumn)
	if len(idx) == 0 {
		return rows, addrs
	}
	a, ok := rec.Column(idx[0]).(*array.Uint64)
	if !ok {
		return rows, addrs
	}
	for i := range a.Len() {
		addrs = append(addrs, a.Value(i))
		rows = append(rows, ExperimentStats{})
	}
	return rows, addrs
}

// rowAt returns the row at physical offset off.
func (f *fragRows) rowAt(off uint32) (ExperimentStats, bool) {
	i, ok := slices.BinarySearch(f.offsets, off)
	if !ok {
		return ExperimentStats{}, false
	}
	return f.rows[i], true
}
