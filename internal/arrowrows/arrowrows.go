// Package arrowrows holds the row-level operations on Arrow record batches that lance and
// the WAL share: laying a batch out as a table schema, selecting and taking rows,
// projecting columns, and sizing a batch. One implementation serves both, so a batch the
// WAL accepted is a batch lance writes unchanged.
//
// Every batch returned is owned by the caller, who must Release it.
package arrowrows

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Conform returns rec laid out as target: columns matched by name (each at most once,
// none unknown to target), types equal, target columns missing from rec filled with
// nulls when nullable, and no nulls in a non-nullable column. The result carries the
// target schema object itself, so every batch conformed to one table shares it.
func Conform(rec arrow.RecordBatch, target *arrow.Schema) (arrow.RecordBatch, error) {
	return ConformWith(rec, target, nil)
}

// ConformWith is Conform whose all-null columns (for the target's nullable columns rec
// lacks) come from nulls(i, n), which returns a retained all-null array of
// target.Field(i)'s type and length n (or nil: a fresh one is made). An all-null
// array is immutable, so a caller appending batches of one size can hand out the same
// one again instead of allocating and zeroing its buffers per batch.
func ConformWith(rec arrow.RecordBatch, target *arrow.Schema, nulls func(i, n int) arrow.Array) (arrow.RecordBatch, error) {
	src := rec.Schema()
	if src.Equal(target) {
		// Field(i), not Fields(): Fields copies the slice, on every append.
		for i := range target.NumFields() {
			if f := target.Field(i); !f.Nullable && rec.Column(i).NullN() > 0 {
				c := rec.Column(i)
				return nil, fmt.Errorf("column %q is not nullable but has %d nulls", f.Name, c.NullN())
			}
		}
		if src == target {
			rec.Retain()
			return rec, nil
		}
		// Same columns (metadata aside): share the arrays under the target schema.
		return array.NewRecordBatch(target, rec.Columns(), rec.NumRows()), nil
	}
	cols := make([]arrow.Array, target.NumFields())
	defer releaseAll(cols)
	used := 0
	for i := range target.NumFields() {
		f := target.Field(i)
		idx := src.FieldIndices(f.Name)
		switch {
		case len(idx) > 1:
			return nil, fmt.Errorf("column %q appears more than once", f.Name)
		case len(idx) == 0:
			if !f.Nullable {
				return nil, fmt.Errorf("missing non-nullable column %q", f.Name)
			}
			if nulls != nil {
				cols[i] = nulls(i, int(rec.NumRows()))
			}
			if cols[i] == nil {
				cols[i] = array.MakeArrayOfNull(memory.DefaultAllocator, f.Type, int(rec.NumRows()))
			}
		default:
			c := rec.Column(idx[0])
			if !arrow.TypeEqual(c.DataType(), f.Type) {
				return nil, fmt.Errorf("column %q has type %s, the table has %s", f.Name, c.DataType(), f.Type)
			}
			if !f.Nullable && c.NullN() > 0 {
				return nil, fmt.Errorf("column %q is not nullable but has %d nulls", f.Name, c.NullN())
			}
			c.Retain()
			cols[i] = c
			used++
		}
	}
	if used != src.NumFields() {
		for _, f := range src.Fields() {
			if len(target.FieldIndices(f.Name)) == 0 {
				return nil, fmt.Errorf("column %q is not in the table schema", f.Name)
			}
		}
	}
	return array.NewRecordBatch(target, cols, rec.NumRows()), nil
}

// Project returns the columns of out, taken by name from rec (which must have each of
// them exactly as out declares it), as a batch of schema out.
func Project(rec arrow.RecordBatch, out *arrow.Schema) arrow.RecordBatch {
	cols := make([]arrow.Array, out.NumFields())
	for i, f := range out.Fields() {
		cols[i] = rec.Column(rec.Schema().FieldIndices(f.Name)[0])
	}
	return array.NewRecordBatch(out, cols, rec.NumRows())
}

// Empty returns a batch of schema s without rows.
func Empty(s *arrow.Schema) arrow.RecordBatch {
	cols := make([]arrow.Array, s.NumFields())
	defer releaseAll(cols)
	for i, f := range s.Fields() {
		cols[i] = array.MakeArrayOfNull(memory.DefaultAllocator, f.Type, 0)
	}
	return array.NewRecordBatch(s, cols, 0)
}

// Row selection slices runs of rows and concatenates them. It works for every type
// (nested and dictionary included) and is cheap for the common shapes here: long runs
// of kept rows around a few dropped ones.

// run is a half-open row range [lo, hi).
type run struct{ lo, hi int64 }

// Select returns the rows of rec where keep is true, in order; nil when none is kept.
// keep has one entry per row of rec.
func Select(rec arrow.RecordBatch, keep []bool) (arrow.RecordBatch, error) {
	var runs []run
	for i := 0; i < len(keep); {
		if !keep[i] {
			i++
			continue
		}
		j := i
		for j < len(keep) && keep[j] {
			j++
		}
		runs = append(runs, run{int64(i), int64(j)})
		i = j
	}
	switch {
	case len(runs) == 0:
		return nil, nil
	case len(runs) == 1 && runs[0].lo == 0 && runs[0].hi == rec.NumRows():
		rec.Retain()
		return rec, nil
	}
	return gather(rec, runs)
}

// Take returns the rows of rec at the given indices, in that order (repeats allowed).
func Take(rec arrow.RecordBatch, indices []int) (arrow.RecordBatch, error) {
	var runs []run
	for _, i := range indices {
		if k := len(runs) - 1; k >= 0 && runs[k].hi == int64(i) {
			runs[k].hi++
			continue
		}
		runs = append(runs, run{int64(i), int64(i) + 1})
	}
	if len(runs) == 0 {
		return Empty(rec.Schema()), nil
	}
	return gather(rec, runs)
}

// gather builds a batch from the given row ranges of rec (at least one), in order.
func gather(rec arrow.RecordBatch, runs []run) (arrow.RecordBatch, error) {
	if len(runs) == 1 {
		return rec.NewSlice(runs[0].lo, runs[0].hi), nil
	}
	n := int64(0)
	for _, r := range runs {
		n += r.hi - r.lo
	}
	cols := make([]arrow.Array, rec.NumCols())
	defer releaseAll(cols)
	parts := make([]arrow.Array, len(runs))
	for i := range cols {
		for j, r := range runs {
			parts[j] = array.NewSlice(rec.Column(i), r.lo, r.hi)
		}
		c, err := array.Concatenate(parts, memory.DefaultAllocator)
		releaseAll(parts)
		if err != nil {
			return nil, fmt.Errorf("gather rows of column %q: %w", rec.ColumnName(i), err)
		}
		cols[i] = c
	}
	return array.NewRecordBatch(rec.Schema(), cols, n), nil
}

// releaseAll releases the non-nil arrays of cols.
func releaseAll(cols []arrow.Array) {
	for _, c := range cols {
		if c != nil {
			c.Release()
		}
	}
}

// Bytes approximates the memory of a batch: the sum of the sizes of its buffers
// (children and dictionaries included; a slice counts its whole buffers).
func Bytes(rec arrow.RecordBatch) int64 {
	var n int64
	for _, c := range rec.Columns() {
		n += DataBytes(c.Data())
	}
	return n
}

// DataBytes is the sum of the sizes of the buffers of d, its children and its
// dictionary.
func DataBytes(d arrow.ArrayData) int64 {
	var n int64
	for _, b := range d.Buffers() {
		if b != nil {
			n += int64(b.Len())
		}
	}
	for _, c := range d.Children() {
		n += DataBytes(c)
	}
	if d.DataType().ID() == arrow.DICTIONARY {
		switch dict := d.Dictionary().(type) {
		case nil:
		case *array.Data:
			if dict != nil { // a typed nil: Data.Dictionary of data built without one
				n += DataBytes(dict)
			}
		default:
			n += DataBytes(dict)
		}
	}
	return n
}

// Concat returns the rows of recs, in order, as one batch of schema s (every batch
// must have s's columns and types). A single batch is returned retained as it is.
func Concat(s *arrow.Schema, recs []arrow.RecordBatch) (arrow.RecordBatch, error) {
	if len(recs) == 1 {
		recs[0].Retain()
		return recs[0], nil
	}
	var n int64
	for _, r := range recs {
		if int(r.NumCols()) != s.NumFields() {
			return nil, fmt.Errorf("concat: a batch has %d columns, the schema %d", r.NumCols(), s.NumFields())
		}
		n += r.NumRows()
	}
	cols := make([]arrow.Array, s.NumFields())
	defer releaseAll(cols)
	parts := make([]arrow.Array, len(recs))
	for i := range cols {
		allNull := true
		for j, r := range recs {
			parts[j] = r.Column(i)
			allNull = allNull && parts[j].NullN() == parts[j].Len()
		}
		if allNull {
			// Most columns of small appends are left out (null): a column of nulls
			// is made at its length instead of joining the parts' bitmaps and
			// offsets, most of the cost of joining a group commit's batches.
			cols[i] = array.MakeArrayOfNull(memory.DefaultAllocator, s.Field(i).Type, int(n))
			continue
		}
		c, err := array.Concatenate(parts, memory.DefaultAllocator)
		if err != nil {
			return nil, fmt.Errorf("concat column %q: %w", s.Field(i).Name, err)
		}
		cols[i] = c
	}
	return array.NewRecordBatch(s, cols, n), nil
}
