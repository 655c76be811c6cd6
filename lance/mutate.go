package lance

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/proto"

	"github.com/lancectx/lancectx/internal/arrowrows"
	"github.com/lancectx/lancectx/internal/rowkey"
	"github.com/lancectx/lancectx/lance/expr"
	"github.com/lancectx/lancectx/lance/format/tablepb"
	"github.com/lancectx/lancectx/lance/schema"
)

// retryBudget is how many times an operation that cannot be rebased is recomputed on a
// newer version before giving up with ErrConflict.
const retryBudget = 10

// DeleteResult reports what a delete did.
type DeleteResult struct {
	RowsDeleted       int64 `json:"rows_deleted"`
	FragmentsUpdated  int   `json:"fragments_updated"`
	FragmentsRemoved  int   `json:"fragments_removed"`
	DeletionFilesSize int   `json:"-"`
}

// Delete marks every row matching the SQL predicate deleted, in one new version. Rows are
// hidden with deletion files (an Arrow array up to 5000 rows per fragment, a roaring
// bitmap above); fragments left empty are dropped. With no match it returns d unchanged.
func (d *Dataset) Delete(ctx context.Context, predicate string) (*Dataset, DeleteResult, error) {
	e, err := expr.Parse(predicate)
	if err != nil {
		return nil, DeleteResult{}, err
	}
	cur := d
	for attempt := 1; ; attempt++ {
		if err := cur.checkWritableDeletes(); err != nil {
			return nil, DeleteResult{}, err
		}
		matches, err := cur.matchFragments(ctx, e)
		if err != nil {
			return nil, DeleteResult{}, err
		}
		op, res, err := cur.deletionOp(ctx, matches)
		if err != nil {
			return nil, DeleteResult{}, err
		}
		if res.RowsDeleted == 0 {
			return cur, res, nil
		}
		op.predicate = e.String()
		next, err := commit(ctx, cur.store, cur, op, commitOptions{})
		if err == nil {
			return d.withURIRes(next, res)
		}
		if !errors.Is(err, errRetryOp) || attempt >= retryBudget {
			return nil, DeleteResult{}, err
		}
		if cur, err = cur.Latest(ctx); err != nil {
			return nil, DeleteResult{}, err
		}
	}
}

func (d *Dataset) withURIRes(ds *Dataset, res DeleteResult) (*Dataset, DeleteResult, error) {
	ds.uri = d.uri
	return ds, res, nil
}

// checkWritableDeletes: deletion files work on any data file version, so only the
// feature flags matter.
func (d *Dataset) checkWritableDeletes() error { return checkWriterFlags(d.mf.Manifest) }

// matchFragments evaluates a predicate over every fragment and returns, per fragment id,
// the physical offsets of visible rows that match.
func (d *Dataset) matchFragments(ctx context.Context, e expr.Expr) (map[uint64]*roaring.Bitmap, error) {
	var fields []*schema.Field
	for _, c := range e.Columns() {
		f := d.schema.Field(c)
		if f == nil {
			return nil, fmt.Errorf("lance: no column %q in the table", c)
		}
		fields = append(fields, f)
	}
	bound, err := expr.Bind(e, fieldsSchema(fields))
	if err != nil {
		return nil, err
	}
	return d.matchRows(ctx, fields, func(ctx context.Context, rec arrow.RecordBatch) ([]bool, error) {
		sel, err := expr.Select(ctx, bound, rec)
		if err != nil {
			return nil, err
		}
		out := make([]bool, sel.Len())
		for i := range out {
			out[i] = sel.Get(i)
		}
		return out, nil
	})
}

func fieldsSchema(fields []*schema.Field) *arrow.Schema {
	afields := make([]arrow.Field, len(fields))
	for i, f := range fields {
		afields[i] = f.Arrow()
	}
	return arrow.NewSchema(afields, nil)
}

// matchRows runs pred over batches of the given fields of every fragment and collects,
// per fragment id, the visible physical offsets where it is true.
func (d *Dataset) matchRows(ctx context.Context, fields []*schema.Field, pred func(context.Context, arrow.RecordBatch) ([]bool, error)) (map[uint64]*roaring.Bitmap, error) {
	s := fieldsSchema(fields)
	frags := d.Fragments()
	results := make([]*roaring.Bitmap, len(frags))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for i, frag := range frags {
		g.Go(func() error {
			fr, err := openFragment(frag)
			if err != nil {
				return err
			}
			deleted, err := readDeletionVector(gctx, d.store, frag)
			if err != nil {
				return err
			}
			hits := roaring.New()
			total := frag.GetPhysicalRows()
			const batch = 65536
			for start := uint64(0); start < total; start += batch {
				end := min(start+batch, total)
				rec, err := fr.read(gctx, d.store, fields, s, start, end, nil)
				if err != nil {
					return err
				}
				sel, err := pred(gctx, rec)
				rec.Release()
				if err != nil {
					return err
				}
				for j, ok := range sel {
					off := uint32(start) + uint32(j)
					if ok && !deleted.Contains(off) {
						hits.Add(off)
					}
				}
			}
			results[i] = hits
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	out := map[uint64]*roaring.Bitmap{}
	for i, frag := range frags {
		if !results[i].IsEmpty() {
			out[frag.GetId()] = results[i]
		}
	}
	return out, nil
}

// deletionOp writes the new deletion files for the matched rows and builds the op.
func (d *Dataset) deletionOp(ctx context.Context, matches map[uint64]*roaring.Bitmap) (*deleteOp, DeleteResult, error) {
	op := &deleteOp{}
	var res DeleteResult
	byID := map[uint64]*tablepb.DataFragment{}
	for _, f := range d.Fragments() {
		byID[f.GetId()] = f
	}
	ids := make([]uint64, 0, len(matches))
	for id := range matches {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	var mu = make([]*tablepb.DataFragment, len(ids))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i, id := range ids {
		frag := byID[id]
		hits := matches[id]
		res.RowsDeleted += int64(hits.GetCardinality())
		g.Go(func() error {
			all, err := readDeletionVector(gctx, d.store, frag)
			if err != nil {
				return err
			}
			all.Or(hits)
			if all.GetCardinality() >= frag.GetPhysicalRows() {
				return nil // every row deleted: the fragment is dropped
			}
			df, err := writeDeletionFile(gctx, d.store, id, d.Version(), all)
			if err != nil {
				return err
			}
			nf := proto.Clone(frag).(*tablepb.DataFragment)
			nf.DeletionFile = df
			mu[i] = nf
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, DeleteResult{}, err
	}
	for i, id := range ids {
		if mu[i] == nil {
			op.removed = append(op.removed, id)
			res.FragmentsRemoved++
		} else {
			op.updated = append(op.updated, mu[i])
			res.FragmentsUpdated++
		}
	}
	return op, res, nil
}

// MergeInsertResult reports what an upsert did.
type MergeInsertResult struct {
	Inserted int64 `json:"inserted"`
	Updated  int64 `json:"updated"`
}

// MergeInsert upserts the rows of rdr by the key column, in one new version: a row whose
// key exists replaces the existing row (the old one gets a deletion-file entry), other
// rows are inserted. When the input repeats a key, its last row wins.
func (d *Dataset) MergeInsert(ctx context.Context, key string, rdr array.RecordReader, opts WriteOptions) (*Dataset, MergeInsertResult, error) {
	opts.defaults()
	if err := d.checkWritable(); err != nil {
		return nil, MergeInsertResult{}, err
	}
	if err := opts.checkExpected(d.Version()); err != nil {
		return nil, MergeInsertResult{}, err
	}
	kf := d.schema.Field(key)
	if kf == nil {
		return nil, MergeInsertResult{}, fmt.Errorf("lance: merge key %q is not a column", key)
	}
	keyOf, err := keyFunc(kf.Type)
	if err != nil {
		return nil, MergeInsertResult{}, err
	}
	// Materialize the input: upserts are bounded batches (a stats round, a client batch).
	target := d.schema.Arrow()
	var batches []arrow.RecordBatch
	defer func() {
		for _, b := range batches {
			b.Release()
		}
	}()
	for rdr.Next() {
		rec, err := conformBatch(rdr.RecordBatch(), target)
		if err != nil {
			return nil, MergeInsertResult{}, err
		}
		batches = append(batches, rec)
	}
	if err := rdr.Err(); err != nil {
		return nil, MergeInsertResult{}, fmt.Errorf("read input: %w", err)
	}
	keyIdx := target.FieldIndices(key)[0]
	type loc struct{ b, r int }
	last := map[string]loc{}
	rows := 0
	for bi, b := range batches {
		col := b.Column(keyIdx)
		for r := 0; r < int(b.NumRows()); r++ {
			if col.IsNull(r) {
				return nil, MergeInsertResult{}, fmt.Errorf("lance: merge key %q is null in input row %d", key, rows+r)
			}
			last[keyOf(col, r)] = loc{bi, r}
		}
		rows += int(b.NumRows())
	}
	if len(last) == 0 {
		return d, MergeInsertResult{}, nil
	}
	// Drop earlier duplicates of a key so each key is written once.
	if len(last) != rows {
		for bi, b := range batches {
			col := b.Column(keyIdx)
			keep := make([]bool, b.NumRows())
			for r := range keep {
				keep[r] = last[keyOf(col, r)] == loc{bi, r}
			}
			nb, err := arrowrows.Select(b, keep)
			if err != nil {
				return nil, MergeInsertResult{}, err
			}
			b.Release()
			if nb == nil {
				nb = arrowrows.Empty(target)
			}
			batches[bi] = nb
		}
	}
	inRdr, err := array.NewRecordReader(target, batches)
	if err != nil {
		return nil, MergeInsertResult{}, err
	}
	added, err := d.writeDataFragments(ctx, inRdr, opts)
	inRdr.Release()
	if err != nil {
		return nil, MergeInsertResult{}, err
	}
	cur := d
	for attempt := 1; ; attempt++ {
		matches, err := cur.matchRows(ctx, []*schema.Field{kf}, func(_ context.Context, rec arrow.RecordBatch) ([]bool, error) {
			col := rec.Column(0)
			sel := make([]bool, col.Len())
			for i := range sel {
				if !col.IsNull(i) {
					_, sel[i] = last[keyOf(col, i)]
				}
			}
			return sel, nil
		})
		if err != nil {
			return nil, MergeInsertResult{}, err
		}
		del, dres, err := cur.deletionOp(ctx, matches)
		if err != nil {
			return nil, MergeInsertResult{}, err
		}
		res := MergeInsertResult{Updated: dres.RowsDeleted, Inserted: int64(len(last)) - dres.RowsDeleted}
		next, err := commit(ctx, cur.store, cur, &updateOp{deleteOp: *del, added: added}, opts.commitOptions())
		if err == nil {
			next.uri = d.uri
			return next, res, nil
		}
		if !errors.Is(err, errRetryOp) || attempt >= retryBudget {
			return nil, MergeInsertResult{}, err
		}
		if cur, err = cur.Latest(ctx); err != nil {
			return nil, MergeInsertResult{}, err
		}
	}
}

// keyFunc returns the key form (rowkey) of row i of a merge-key column.
func keyFunc(t arrow.DataType) (rowkey.Func, error) {
	f, ok := rowkey.For(t)
	if !ok {
		return nil, fmt.Errorf("%w: merge key of type %s", ErrUnsupported, t)
	}
	return f, nil
}

// UpdateConfig upserts and deletes table config keys (manifest config) in one version.
func (d *Dataset) UpdateConfig(ctx context.Context, upserts map[string]string, deletes []string) (*Dataset, error) {
	return d.updateMaps(ctx, &updateConfigOp{config: updateMap(upserts, deletes)})
}

// UpdateTableMetadata upserts and deletes table metadata keys in one version.
func (d *Dataset) UpdateTableMetadata(ctx context.Context, upserts map[string]string, deletes []string) (*Dataset, error) {
	return d.updateMaps(ctx, &updateConfigOp{tableMeta: updateMap(upserts, deletes)})
}

// UpdateSchemaMetadata upserts and deletes Arrow schema metadata keys in one version.
func (d *Dataset) UpdateSchemaMetadata(ctx context.Context, upserts map[string]string, deletes []string) (*Dataset, error) {
	return d.updateMaps(ctx, &updateConfigOp{schemaMeta: updateMap(upserts, deletes)})
}

func (d *Dataset) updateMaps(ctx context.Context, op *updateConfigOp) (*Dataset, error) {
	cur := d
	for attempt := 1; ; attempt++ {
		next, err := commit(ctx, cur.store, cur, op, commitOptions{})
		if err == nil {
			return d.withURI(next, nil)
		}
		if !errors.Is(err, errRetryOp) || attempt >= retryBudget {
			return nil, err
		}
		if cur, err = cur.Latest(ctx); err != nil {
			return nil, err
		}
	}
}

func updateMap(upserts map[string]string, deletes []string) *tablepb.Transaction_UpdateMap {
	u := &tablepb.Transaction_UpdateMap{}
	keys := make([]string, 0, len(upserts))
	for k := range upserts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		u.UpdateEntries = append(u.UpdateEntries, &tablepb.Transaction_UpdateMapEntry{Key: k, Value: proto.String(upserts[k])})
	}
	for _, k := range deletes {
		u.UpdateEntries = append(u.UpdateEntries, &tablepb.Transaction_UpdateMapEntry{Key: k})
	}
	return u
}

// Restore commits a new version whose content equals the given older version.
func (d *Dataset) Restore(ctx context.Context, version uint64) (*Dataset, error) {
	old, err := checkoutVersion(ctx, d.store, version)
	if err != nil {
		return nil, err
	}
	latest, err := d.Latest(ctx)
	if err != nil {
		return nil, err
	}
	next, err := commit(ctx, d.store, latest, &restoreOp{version: version, target: old.mf}, commitOptions{})
	return d.withURI(next, err)
}

// rowRef locates a row: part index (-1: absent) and row within the part.
type rowRef struct{ part, row int }

// gatherRows concatenates parts and reorders rows to the requested positions.
func gatherRows(s *arrow.Schema, parts []arrow.RecordBatch, where []rowRef) (arrow.RecordBatch, error) {
	starts := make([]int, len(parts))
	cols := make([]arrow.Array, s.NumFields())
	total := 0
	for i, p := range parts {
		starts[i] = total
		total += int(p.NumRows())
	}
	for i := range cols {
		if len(parts) == 0 {
			cols[i] = array.MakeArrayOfNull(memory.DefaultAllocator, s.Field(i).Type, 0)
			continue
		}
		pieces := make([]arrow.Array, len(parts))
		for j, p := range parts {
			pieces[j] = p.Column(i)
		}
		all, err := array.Concatenate(pieces, memory.DefaultAllocator)
		if err != nil {
			for _, c := range cols[:i] {
				c.Release()
			}
			return nil, err
		}
		cols[i] = all
	}
	all := array.NewRecordBatch(s, cols, int64(total))
	for _, c := range cols {
		c.Release()
	}
	defer all.Release()
	var idx []int
	for _, w := range where {
		if w.part >= 0 {
			idx = append(idx, starts[w.part]+w.row)
		}
	}
	return arrowrows.Take(all, idx)
}
