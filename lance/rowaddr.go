package lance

import (
	"context"
	"slices"
	"sort"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lancectx/lancectx/lance/format/tablepb"
	"github.com/lancectx/lancectx/objstore"
)

// Row ids and row addresses. A row's address is where it is: fragment_id<<32 | offset
// of the row in its fragment's data files; it changes when compaction moves the row. A
// row's id is what _rowid reports and Take accepts: the address, unless the dataset
// uses stable row ids (feature flag 2), where it is the id the fragment's row id
// sequence gives the row, which compaction keeps (and Lance 8 keeps through updates:
// the same id may then be listed by a deleted row and by its live new copy).

// RowAddrColumn is the name of the row address column (fragment_id<<32 | offset), which
// a scan or take returns when asked (ScanOptions.WithRowAddr, or by name in Columns) and
// which filters may use, as Lance's _rowaddr.
const RowAddrColumn = "_rowaddr"

// isVirtual reports whether name is a column computed from the row's place rather than
// read from data files.
func isVirtual(name string) bool { return name == RowIDColumn || name == RowAddrColumn }

// virtualField is the Arrow field of virtual column name.
func virtualField(name string) arrow.Field {
	return arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Uint64}
}

// ids returns the stable row ids of the fragment's physical rows (decoded once).
func (fr *fragmentReader) ids() ([]uint64, error) {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	if fr.rowIDs == nil {
		ids, err := fragmentRowIDs(fr.frag)
		if err != nil {
			return nil, err
		}
		fr.rowIDs = ids
	}
	return fr.rowIDs, nil
}

// virtualColumns computes the virtual columns names of the fragment's rows offs (or
// [start, end) when offs is nil).
func (fr *fragmentReader) virtualColumns(names []string, stable bool, start, end uint64, offs []uint64) ([]arrow.Array, error) {
	n := int(end - start)
	if offs != nil {
		n = len(offs)
	}
	off := func(i int) uint64 {
		if offs != nil {
			return offs[i]
		}
		return start + uint64(i)
	}
	out := make([]arrow.Array, 0, len(names))
	for _, name := range names {
		vals := make([]uint64, n)
		if name == RowIDColumn && stable {
			ids, err := fr.ids()
			if err != nil {
				for _, c := range out {
					c.Release()
				}
				return nil, err
			}
			for i := range vals {
				vals[i] = ids[off(i)]
			}
		} else {
			base := fr.frag.GetId() << 32
			for i := range vals {
				vals[i] = base | off(i)
			}
		}
		d := array.NewData(arrow.PrimitiveTypes.Uint64, n,
			[]*memory.Buffer{nil, memory.NewBufferBytes(arrow.Uint64Traits.CastToBytes(vals))}, nil, 0, 0)
		out = append(out, array.NewUint64Data(d))
		d.Release()
	}
	return out, nil
}

// rowIDIndex finds the rows listing a stable row id. Each fragment's ids are kept as a
// range when they are one (the usual case: ids handed out in order) and as sorted
// (id, offset) pairs otherwise; fragments are sorted by their smallest id.
type rowIDIndex struct {
	frags   []idFrag
	maxUpTo []uint64 // largest id of frags[0..i]
}

type idFrag struct {
	frag     *tablepb.DataFragment
	min, max uint64
	contig   bool     // ids are min, min+1, ..., max in row order
	pairs    []idPair // otherwise, sorted by id
}

type idPair struct {
	id  uint64
	off uint32
}

func buildRowIDIndex(frags []*tablepb.DataFragment) (*rowIDIndex, error) {
	x := &rowIDIndex{}
	for _, f := range frags {
		ids, err := fragmentRowIDs(f)
		if err != nil {
			return nil, err
		}
		if len(ids) == 0 {
			continue
		}
		e := idFrag{frag: f, min: ids[0], max: ids[0], contig: true}
		for i, id := range ids {
			e.min, e.max = min(e.min, id), max(e.max, id)
			e.contig = e.contig && id == ids[0]+uint64(i)
		}
		if !e.contig {
			e.pairs = make([]idPair, len(ids))
			for i, id := range ids {
				e.pairs[i] = idPair{id, uint32(i)}
			}
			slices.SortFunc(e.pairs, func(a, b idPair) int { return cmpU64(a.id, b.id) })
		}
		x.frags = append(x.frags, e)
	}
	slices.SortFunc(x.frags, func(a, b idFrag) int { return cmpU64(a.min, b.min) })
	var m uint64
	x.maxUpTo = make([]uint64, len(x.frags))
	for i, e := range x.frags {
		m = max(m, e.max)
		x.maxUpTo[i] = m
	}
	return x, nil
}

// lookup calls fn with every row (fragment, offset) listing id.
func (x *rowIDIndex) lookup(id uint64, fn func(f *tablepb.DataFragment, off uint64)) {
	i := sort.Search(len(x.frags), func(i int) bool { return x.frags[i].min > id }) - 1
	for ; i >= 0 && x.maxUpTo[i] >= id; i-- {
		e := &x.frags[i]
		if id > e.max {
			continue
		}
		if e.contig {
			fn(e.frag, id-e.min)
			continue
		}
		k, _ := slices.BinarySearchFunc(e.pairs, id, func(p idPair, id uint64) int { return cmpU64(p.id, id) })
		for ; k < len(e.pairs) && e.pairs[k].id == id; k++ {
			fn(e.frag, uint64(e.pairs[k].off))
		}
	}
}

// rowIDIndex returns the dataset's row id index, built on first use.
func (d *Dataset) rowIDIndex() (*rowIDIndex, error) {
	d.ridOnce.Do(func() { d.rid, d.ridErr = buildRowIDIndex(d.Fragments()) })
	return d.rid, d.ridErr
}

// rowLoc is a live row located for a take: its fragment, its offset there, and its id.
type rowLoc struct {
	frag *tablepb.DataFragment
	off  uint64
	id   uint64
}

// deletions caches the deletion vectors a take reads.
type deletions struct {
	st objstore.Reader
	bm map[uint64]*roaring.Bitmap
}

func (x *deletions) deleted(ctx context.Context, f *tablepb.DataFragment, off uint64) (bool, error) {
	bm, ok := x.bm[f.GetId()]
	if !ok {
		var err error
		if bm, err = readDeletionVector(ctx, x.st, f); err != nil {
			return false, err
		}
		x.bm[f.GetId()] = bm
	}
	return bm.Contains(uint32(off)), nil
}

// locateRows finds the live rows with the given row ids, in the order given; ids of no
// live row are left out.
func (d *Dataset) locateRows(ctx context.Context, rowIDs []uint64) ([]rowLoc, error) {
	if !usesStableRowIDs(d.mf.Manifest) {
		return d.locateAddrs(ctx, rowIDs)
	}
	x, err := d.rowIDIndex()
	if err != nil {
		return nil, err
	}
	del := &deletions{st: d.store, bm: map[uint64]*roaring.Bitmap{}}
	out := make([]rowLoc, 0, len(rowIDs))
	for _, id := range rowIDs {
		var found *rowLoc
		var ferr error
		x.lookup(id, func(f *tablepb.DataFragment, off uint64) {
			if found != nil || ferr != nil {
				return
			}
			gone, err := del.deleted(ctx, f, off)
			if err != nil {
				ferr = err
			} else if !gone {
				found = &rowLoc{frag: f, off: off, id: id}
			}
		})
		if ferr != nil {
			return nil, ferr
		}
		if found != nil {
			out = append(out, *found)
		}
	}
	return out, nil
}

// locateAddrs finds the live rows at the given row addresses, in the order given;
// addresses of no live row are left out.
func (d *Dataset) locateAddrs(ctx context.Context, addrs []uint64) ([]rowLoc, error) {
	byFrag := map[uint64]*tablepb.DataFragment{}
	for _, f := range d.Fragments() {
		byFrag[f.GetId()] = f
	}
	stable := usesStableRowIDs(d.mf.Manifest)
	ids := map[uint64][]uint64{}
	del := &deletions{st: d.store, bm: map[uint64]*roaring.Bitmap{}}
	out := make([]rowLoc, 0, len(addrs))
	for _, a := range addrs {
		f, ok := byFrag[a>>32]
		off := a & 0xffffffff
		if !ok || off >= f.GetPhysicalRows() {
			continue
		}
		gone, err := del.deleted(ctx, f, off)
		if err != nil {
			return nil, err
		}
		if gone {
			continue
		}
		id := a
		if stable {
			fids, ok := ids[f.GetId()]
			if !ok {
				if fids, err = fragmentRowIDs(f); err != nil {
					return nil, err
				}
				ids[f.GetId()] = fids
			}
			id = fids[off]
		}
		out = append(out, rowLoc{frag: f, off: off, id: id})
	}
	return out, nil
}

// rowGroup is the rows of a take in one fragment.
type rowGroup struct {
	frag *tablepb.DataFragment
	rows []rowLoc
}

// offsets returns the group's distinct offsets, ascending (what a file take reads).
func (g *rowGroup) offsets() []uint64 {
	offs := make([]uint64, len(g.rows))
	for i, r := range g.rows {
		offs[i] = r.off
	}
	slices.Sort(offs)
	return slices.Compact(offs)
}

// groupRows groups rows by fragment, in the order fragments first appear.
func groupRows(rows []rowLoc) []*rowGroup {
	var out []*rowGroup
	by := map[uint64]*rowGroup{}
	for _, r := range rows {
		g, ok := by[r.frag.GetId()]
		if !ok {
			g = &rowGroup{frag: r.frag}
			by[r.frag.GetId()] = g
			out = append(out, g)
		}
		g.rows = append(g.rows, r)
	}
	return out
}

// Take returns the rows with the given row ids (see RowIDColumn: stable row ids on a
// dataset that has them, row addresses otherwise), in the order given, with columns
// (nil: every column; RowIDColumn and RowAddrColumn may be named). Ids of deleted or
// nonexistent rows are skipped. Blob columns read as their descriptions (TakeBlobs
// reads the values).
func (d *Dataset) Take(ctx context.Context, rowIDs []uint64, columns []string) (arrow.RecordBatch, error) {
	rows, err := d.locateRows(ctx, rowIDs)
	if err != nil {
		return nil, err
	}
	return d.takeRows(ctx, rows, columns)
}

// TakeRowAddrs is Take by row address (see RowAddrColumn), whether or not the dataset
// uses stable row ids.
func (d *Dataset) TakeRowAddrs(ctx context.Context, addrs []uint64, columns []string) (arrow.RecordBatch, error) {
	rows, err := d.locateAddrs(ctx, addrs)
	if err != nil {
		return nil, err
	}
	return d.takeRows(ctx, rows, columns)
}

// takeRows reads the located rows, in order.
func (d *Dataset) takeRows(ctx context.Context, rows []rowLoc, columns []string) (arrow.RecordBatch, error) {
	plan, err := d.planScan(ScanOptions{Columns: columns})
	if err != nil {
		return nil, err
	}
	groups := groupRows(rows)
	parts := make([]arrow.RecordBatch, 0, len(groups))
	defer func() {
		for _, p := range parts {
			p.Release()
		}
	}()
	where := make([]rowRef, 0, len(rows))
	at := map[uint64]rowRef{} // address -> place in parts
	for _, g := range groups {
		fr, err := d.fragment(g.frag)
		if err != nil {
			return nil, err
		}
		offs := g.offsets()
		rec, err := plan.readRows(ctx, d.store, fr, 0, 0, offs)
		if err != nil {
			return nil, err
		}
		parts = append(parts, rec)
		for j, o := range offs {
			at[g.frag.GetId()<<32|o] = rowRef{len(parts) - 1, j}
		}
	}
	for _, r := range rows {
		where = append(where, at[r.frag.GetId()<<32|r.off])
	}
	all, err := gatherRows(plan.readSchema, parts, where)
	if err != nil {
		return nil, err
	}
	defer all.Release()
	return plan.project(all), nil
}
