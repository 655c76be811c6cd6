package adopt

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"golang.org/x/sync/errgroup"

	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/lance/format/tablepb"
	"github.com/lancectx/lancectx/lance/schema"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/rollout"
)

// keyReadConcurrency bounds the generations of one store read at once (decoding is
// CPU-bound; stores are adopted in parallel too).
const keyReadConcurrency = 2

// GenerationError is a pending generation adoption could not read or take over: the
// store is left unadopted, and the message names the generation.
type GenerationError struct {
	Shard      string
	Generation uint64
	Path       string
	Err        error
}

func (e *GenerationError) Error() string {
	return fmt.Sprintf("generation %d of shard %s (%s): %v", e.Generation, e.Shard, e.Path, e.Err)
}

func (e *GenerationError) Unwrap() error { return e.Err }

// unit is one fragment of a pending generation: a data file the merge places into the
// base table as a new fragment.
type unit struct {
	shard string
	gen   FlushedGeneration
	gst   objstore.Store // rooted at the generation dataset
	gds   *lance.Dataset
	frag  *tablepb.DataFragment
	file  *tablepb.DataFile
	// fields are the file's field ids renumbered to the base table's.
	fields []int32
	// tombstones: the file has the _tombstone column.
	tombstones bool
	// offsets[i] is the physical row of keys[i] (visible rows only, ascending).
	offsets []uint32
	keys    []string
	// deletes are the indexes (into keys) of tombstone rows.
	deletes []int
	// hidden are rows not to show: what the generation's own deletion vector hid, and
	// rows whose key a newer row replaces.
	hidden *roaring.Bitmap
}

func (u *unit) genErr(err error) error {
	return &GenerationError{Shard: u.shard, Generation: u.gen.Generation, Path: u.gen.Path, Err: err}
}

// TombstoneColumn is the MemWAL's delete marker column: a generation row with
// _tombstone = true deletes its key. It is not a table column.
const TombstoneColumn = "_tombstone"

// generation is an opened pending generation.
type generation struct {
	shard string
	gen   FlushedGeneration
	gst   objstore.Store // rooted at the generation dataset
	gds   *lance.Dataset
}

func (g *generation) err(err error) error {
	return &GenerationError{Shard: g.shard, Generation: g.gen.Generation, Path: g.gen.Path, Err: err}
}

// openUnits opens every pending generation and checks that its data files can join
// the base table as they are: same data storage version, one data file per fragment,
// every column known to the base table with the same type. Generations written with
// rollout columns the base table lacks (the reference evolved its schema before
// merging) make the base table gain them first, as all-null columns (a schema-only
// commit, as lancectx's worker does on open), when evolve is set (rollout stores; the
// schemas of generic and datagen stores never change); any other unknown column stops
// the store.
// It returns the units in merge order and the base table they were mapped to.
func openUnits(ctx context.Context, st objstore.Store, base *lance.Dataset, mw *memWAL, evolve bool) ([]*unit, *lance.Dataset, error) {
	var gens []*generation
	for _, s := range mw.Shards {
		for _, g := range s.Pending {
			gst := objstore.Prefixed(st, memWALDir+s.ID+"/"+g.Path)
			ge := &generation{shard: s.ID, gen: g, gst: gst}
			gds, err := lance.OpenStore(ctx, gst)
			if err != nil {
				return nil, nil, ge.err(fmt.Errorf("open: %w", err))
			}
			if have, want := gds.DataStorageVersion(), base.DataStorageVersion(); have != want {
				return nil, nil, ge.err(fmt.Errorf("its data files are format %s, the base table's %s", have, want))
			}
			ge.gds = gds
			gens = append(gens, ge)
		}
	}
	base, err := evolveFor(ctx, base, gens, evolve)
	if err != nil {
		return nil, nil, err
	}
	basePaths := fieldPaths(base.Schema())
	var units []*unit
	for _, g := range gens {
		us, err := g.units(base, basePaths)
		if err != nil {
			return nil, nil, g.err(err)
		}
		units = append(units, us...)
	}
	// Newest wins by generation number; generations of different shards (a key the
	// reference wrote through two shards, which its rules forbid) are ordered by
	// number, then shard id, so the outcome is deterministic.
	sort.SliceStable(units, func(i, j int) bool {
		a, b := units[i], units[j]
		if a.gen.Generation != b.gen.Generation {
			return a.gen.Generation < b.gen.Generation
		}
		return a.shard < b.shard
	})
	return units, base, nil
}

// evolveFor adds to the base table the nullable rollout columns some generation has and
// it lacks (only when evolve is set). Any other generation column the base lacks stops
// the store.
func evolveFor(ctx context.Context, base *lance.Dataset, gens []*generation, evolve bool) (*lance.Dataset, error) {
	var add []arrow.Field
	seen := map[string]bool{}
	for _, g := range gens {
		for _, f := range g.gds.Schema().Fields {
			if f.Name == TombstoneColumn || seen[f.Name] || base.Schema().Field(f.Name) != nil {
				continue
			}
			idx := rollout.Schema().FieldIndices(f.Name)
			if !evolve || len(idx) == 0 || !rollout.Schema().Field(idx[0]).Nullable {
				return nil, g.err(fmt.Errorf("column %q is not in the base table", f.Name))
			}
			seen[f.Name] = true
			add = append(add, rollout.Schema().Field(idx[0]))
		}
	}
	if len(add) == 0 {
		return base, nil
	}
	next, err := base.AddNullColumns(ctx, add)
	if err != nil {
		return nil, fmt.Errorf("add the columns the generations have (%d) to the base table: %w", len(add), err)
	}
	return next, nil
}

func (g *generation) units(base *lance.Dataset, basePaths map[string]*schema.Field) ([]*unit, error) {
	idMap, err := mapFields(g.gds.Schema(), basePaths)
	if err != nil {
		return nil, err
	}
	tomb := g.gds.Schema().Field(TombstoneColumn)
	var out []*unit
	for _, frag := range g.gds.Fragments() {
		files := frag.GetFiles()
		if len(files) != 1 {
			return nil, fmt.Errorf("fragment %d has %d data files; adoption takes fragments of one file", frag.GetId(), len(files))
		}
		f := files[0]
		if f.BaseId != nil {
			return nil, fmt.Errorf("fragment %d: its data file lives in another dataset (base_id %d)", frag.GetId(), f.GetBaseId())
		}
		if frag.GetPhysicalRows() == 0 || frag.GetPhysicalRows() > 1<<32-1 {
			return nil, fmt.Errorf("fragment %d has %d rows", frag.GetId(), frag.GetPhysicalRows())
		}
		fields := make([]int32, len(f.GetFields()))
		for i, id := range f.GetFields() {
			if id < 0 {
				fields[i] = id // -2: a column the generation dropped; stays ignored
				continue
			}
			nid, ok := idMap[id]
			if !ok {
				return nil, fmt.Errorf("fragment %d stores field id %d, which its schema does not have", frag.GetId(), id)
			}
			if nid != id && nid != -2 {
				// Lance maps a file's columns through the fragment's field list, so a
				// renumbered file would read right in LanceDB; lancectx's reader finds
				// columns by the ids the file was written with, so it must keep them.
				// The reference's flushes write with the base table's ids.
				return nil, fmt.Errorf("its column %q is field %d, but field %d in the base table: the generation was not "+
					"written with the base table's field ids", g.gds.Schema().FieldByID(id).Name, id, nid)
			}
			fields[i] = nid
		}
		if err := checkRequired(base.Schema(), fields); err != nil {
			return nil, fmt.Errorf("fragment %d: %w", frag.GetId(), err)
		}
		out = append(out, &unit{shard: g.shard, gen: g.gen, gst: g.gst, gds: g.gds, frag: frag, file: f, fields: fields,
			tombstones: tomb != nil, hidden: roaring.New()})
	}
	if len(out) == 0 {
		return nil, errors.New("it has no rows")
	}
	return out, nil
}

// fieldPaths maps "parent.child" paths to the fields of s.
func fieldPaths(s *schema.Schema) map[string]*schema.Field {
	out := map[string]*schema.Field{}
	var walk func(prefix string, fs []*schema.Field)
	walk = func(prefix string, fs []*schema.Field) {
		for _, f := range fs {
			p := prefix + f.Name
			out[p] = f
			walk(p+".", f.Children)
		}
	}
	walk("", s.Fields)
	return out
}

// mapFields renumbers the generation's field ids to the base table's, by path. Every
// generation column must exist in the base table with the same type; a nullable
// generation column cannot fill a required base column.
func mapFields(gs *schema.Schema, basePaths map[string]*schema.Field) (map[int32]int32, error) {
	out := map[int32]int32{}
	for p, gf := range fieldPaths(gs) {
		if p == TombstoneColumn {
			if gf.ArrowType().ID() != arrow.BOOL {
				return nil, fmt.Errorf("column %q is %s, not bool", p, gf.ArrowType())
			}
			out[gf.ID] = -2 // stored in the file, not a table column: ignored by readers
			continue
		}
		bf, ok := basePaths[p]
		if !ok {
			return nil, fmt.Errorf("column %q is not in the base table", p)
		}
		gl, err := gf.Logical()
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", p, err)
		}
		bl, err := bf.Logical()
		if err != nil {
			return nil, fmt.Errorf("column %q: %w", p, err)
		}
		if gl != bl {
			return nil, fmt.Errorf("column %q is %s in the generation and %s in the base table", p, gl, bl)
		}
		if gf.Nullable && !bf.Nullable {
			return nil, fmt.Errorf("column %q is nullable in the generation and required in the base table", p)
		}
		out[gf.ID] = bf.ID
	}
	return out, nil
}

// checkRequired fails when a required top-level base column is missing from a file
// (its field or, for a nested one, one of its descendants): it would read as null.
func checkRequired(base *schema.Schema, fields []int32) error {
	have := map[int32]bool{}
	for _, id := range fields {
		have[id] = true
	}
	for _, f := range base.Fields {
		if f.Nullable {
			continue
		}
		found := false
		f.Walk(func(c *schema.Field) bool {
			found = found || have[c.ID]
			return !found
		})
		if !found {
			return fmt.Errorf("the required column %q is missing", f.Name)
		}
	}
	return nil
}

// readUnitKeys reads the key column of every unit (nothing else) with the rows the
// generation shows; rows it hides are hidden in the base table too.
func readUnitKeys(ctx context.Context, units []*unit, key string) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(keyReadConcurrency)
	for _, u := range units {
		g.Go(func() error {
			if err := u.readKeys(gctx, u.gds, key); err != nil {
				return u.genErr(err)
			}
			return nil
		})
	}
	return g.Wait()
}

func (u *unit) readKeys(ctx context.Context, ds *lance.Dataset, key string) error {
	cols := []string{key}
	if u.tombstones {
		cols = append(cols, TombstoneColumn)
	}
	// Row addresses (offsets in the fragment), not row ids, also on a dataset with
	// stable row ids.
	sc, err := ds.Scan(ctx, lance.ScanOptions{Columns: cols, WithRowAddr: true, Fragments: []uint64{u.frag.GetId()}, BatchSize: 65536})
	if err != nil {
		return fmt.Errorf("read keys: %w", err)
	}
	defer sc.Release()
	var sb strings.Builder
	var ends []int
	keyOf, err := keyFunc(ds.Schema().Field(key))
	if err != nil {
		return err
	}
	physical := u.frag.GetPhysicalRows()
	for sc.Next() {
		rec := sc.RecordBatch()
		col := rec.Column(0)
		ids, ok := rec.Column(len(cols)).(*array.Uint64)
		if !ok {
			return fmt.Errorf("read keys: row addresses are %s", rec.Column(len(cols)).DataType())
		}
		var tomb *array.Boolean
		if u.tombstones {
			if tomb, ok = rec.Column(1).(*array.Boolean); !ok {
				return fmt.Errorf("read keys: %s is %s", TombstoneColumn, rec.Column(1).DataType())
			}
		}
		for i := 0; i < col.Len(); i++ {
			if col.IsNull(i) {
				return fmt.Errorf("row %d has a null key", uint32(ids.Value(i)))
			}
			off := ids.Value(i) & (1<<32 - 1)
			if off >= physical || len(u.offsets) > 0 && uint32(off) <= u.offsets[len(u.offsets)-1] {
				return fmt.Errorf("read keys: row address %#x out of order or out of range", ids.Value(i))
			}
			if tomb != nil && tomb.IsValid(i) && tomb.Value(i) {
				u.deletes = append(u.deletes, len(ends))
			}
			sb.WriteString(keyOf(col, i))
			ends = append(ends, sb.Len())
			u.offsets = append(u.offsets, uint32(off))
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read keys: %w", err)
	}
	// One string holds every key of the unit, so the keys share one allocation.
	arena := sb.String()
	u.keys = make([]string, len(ends))
	prev := 0
	for i, end := range ends {
		u.keys[i] = arena[prev:end]
		prev = end
	}
	// What the generation's deletion vector hid stays hidden.
	u.hidden.AddRange(0, physical)
	for _, off := range u.offsets {
		u.hidden.Remove(off)
	}
	return nil
}

// keyFunc renders key values as strings (string keys as they are, integers in decimal).
func keyFunc(f *schema.Field) (func(arrow.Array, int) string, error) {
	if f == nil {
		return nil, errors.New("the table has no key column")
	}
	switch f.ArrowType().ID() {
	case arrow.STRING:
		return func(a arrow.Array, i int) string { return a.(*array.String).Value(i) }, nil
	case arrow.LARGE_STRING:
		return func(a arrow.Array, i int) string { return a.(*array.LargeString).Value(i) }, nil
	case arrow.INT64:
		return func(a arrow.Array, i int) string { return fmt.Sprint(a.(*array.Int64).Value(i)) }, nil
	case arrow.INT32:
		return func(a arrow.Array, i int) string { return fmt.Sprint(a.(*array.Int32).Value(i)) }, nil
	}
	return nil, fmt.Errorf("key column %q has type %s, which adoption does not key on", f.Name, f.ArrowType())
}

// dedup keeps the newest row of every key (the last one in unit order, then row order:
// the reference's rule, newest generation first, newest row within it) and hides the
// older ones. A newest row that is a tombstone hides itself too: its key is deleted. It
// returns the keys whose base rows are replaced (or deleted), the rows hidden as older
// copies, and the keys deleted.
func dedup(units []*unit) (winners map[string]struct{}, dups, deleted int64) {
	type loc struct {
		u   int32
		off uint32
		del bool
	}
	best := map[string]loc{}
	for ui, u := range units {
		d := 0
		for i, k := range u.keys {
			isDel := d < len(u.deletes) && u.deletes[d] == i
			if isDel {
				d++
			}
			if prev, ok := best[k]; ok {
				units[prev.u].hidden.Add(prev.off)
				dups++
			}
			best[k] = loc{u: int32(ui), off: u.offsets[i], del: isDel}
		}
	}
	winners = make(map[string]struct{}, len(best))
	for k, l := range best {
		winners[k] = struct{}{}
		if l.del {
			units[l.u].hidden.Add(l.off)
			deleted++
		}
	}
	return winners, dups, deleted
}

// baseRowsOf finds the visible base rows whose key is in keys, reading only the key
// column: memory is bounded by keys, not by the table.
func baseRowsOf(ctx context.Context, base *lance.Dataset, key string, keys map[string]struct{}) (map[uint64]*roaring.Bitmap, error) {
	out := map[uint64]*roaring.Bitmap{}
	if len(keys) == 0 || len(base.Fragments()) == 0 {
		return out, nil
	}
	return base.FindKeys(ctx, key, keys)
}

// place copies (hard-links on local disk, server-side copies on object stores) the
// units' data files into the base table's data/ under fresh names: a crashed attempt
// leaves only unreferenced files, which cleanup collects, and never shares a file with
// another attempt.
func place(ctx context.Context, st objstore.Store, units []*unit) ([]lance.NamedDataFile, error) {
	files := make([]lance.NamedDataFile, len(units))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for i, u := range units {
		var rnd [6]byte
		_, _ = rand.Read(rnd[:])
		shard := u.shard
		if len(shard) > 8 {
			shard = shard[:8]
		}
		name := fmt.Sprintf("adopted-%s-%d-%d-%s.lance", shard, u.gen.Generation, u.frag.GetId(), hex.EncodeToString(rnd[:]))
		g.Go(func() error {
			src := "data/" + u.file.GetPath()
			size := u.file.GetFileSizeBytes()
			if size == 0 {
				info, err := u.gst.Stat(gctx, src)
				if err != nil {
					return u.genErr(fmt.Errorf("data file %s: %w", src, err))
				}
				size = uint64(info.Size)
			}
			if err := copyInto(gctx, st, memWALDir+u.shard+"/"+u.gen.Path+"/"+src, "data/"+name); err != nil {
				return u.genErr(fmt.Errorf("place data file %s: %w", src, err))
			}
			var hidden *roaring.Bitmap
			if !u.hidden.IsEmpty() {
				hidden = u.hidden
			}
			files[i] = lance.NamedDataFile{Path: name, Deleted: hidden, DataFileInfo: lance.DataFileInfo{
				Rows: u.frag.GetPhysicalRows(), Size: size, Fields: u.fields, ColumnIndices: u.file.GetColumnIndices(),
				Major: u.file.GetFileMajorVersion(), Minor: u.file.GetFileMinorVersion(),
			}}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		unplace(st, files)
		return nil, err
	}
	return files, nil
}

// copyInto copies src to dst within the dataset st: a hard link on local disk, a
// server-side copy on object stores; streamed through this process only when the
// store cannot copy.
func copyInto(ctx context.Context, st objstore.Store, src, dst string) error {
	err := objstore.CopyVia(ctx, st, src, dst)
	if !errors.Is(err, objstore.ErrNotSupported) {
		return err
	}
	rc, err := st.Get(ctx, src)
	if err != nil {
		return err
	}
	defer rc.Close()
	return st.PutIfAbsent(ctx, dst, rc)
}

// unplace deletes the copies of a commit that did not happen (best effort).
func unplace(st objstore.Store, files []lance.NamedDataFile) {
	keys := make([]string, 0, len(files))
	for _, f := range files {
		if f.Path != "" {
			keys = append(keys, "data/"+f.Path)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	_ = objstore.DeleteAll(ctx, st, keys, 0)
}
