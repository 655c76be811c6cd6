package wal

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// keyFunc returns the key form of row i of a key column: strings as is, integers in
// decimal. It is the same form lance uses for merge keys, so every source agrees.
func keyFunc(t arrow.DataType) (func(arrow.Array, int) string, error) {
	switch t.ID() {
	case arrow.STRING:
		return func(a arrow.Array, i int) string { return a.(*array.String).Value(i) }, nil
	case arrow.LARGE_STRING:
		return func(a arrow.Array, i int) string { return a.(*array.LargeString).Value(i) }, nil
	case arrow.BINARY:
		return func(a arrow.Array, i int) string { return string(a.(*array.Binary).Value(i)) }, nil
	case arrow.LARGE_BINARY:
		return func(a arrow.Array, i int) string { return string(a.(*array.LargeBinary).Value(i)) }, nil
	case arrow.INT64:
		return func(a arrow.Array, i int) string { return strconv.FormatInt(a.(*array.Int64).Value(i), 10) }, nil
	case arrow.INT32:
		return func(a arrow.Array, i int) string { return strconv.FormatInt(int64(a.(*array.Int32).Value(i)), 10) }, nil
	case arrow.UINT64:
		return func(a arrow.Array, i int) string { return strconv.FormatUint(a.(*array.Uint64).Value(i), 10) }, nil
	case arrow.UINT32:
		return func(a arrow.Array, i int) string { return strconv.FormatUint(uint64(a.(*array.Uint32).Value(i)), 10) }, nil
	}
	return nil, fmt.Errorf("wal: key column of type %s is not supported (want a string, binary or integer type)", t)
}

// keyLiteral renders a key as a filter literal for the key column's type.
func keyLiteral(t arrow.DataType, key string) (string, error) {
	switch t.ID() {
	case arrow.STRING, arrow.LARGE_STRING:
		return "'" + strings.ReplaceAll(key, "'", "''") + "'", nil
	case arrow.INT64, arrow.INT32:
		if _, err := strconv.ParseInt(key, 10, 64); err != nil {
			return "", fmt.Errorf("wal: key %q is not an integer", key)
		}
		return key, nil
	case arrow.UINT64, arrow.UINT32:
		if _, err := strconv.ParseUint(key, 10, 64); err != nil {
			return "", fmt.Errorf("wal: key %q is not an unsigned integer", key)
		}
		return key, nil
	}
	return "", fmt.Errorf("wal: point reads by a %s key are not supported", t)
}

// quoteIdent quotes a column name for a filter.
func quoteIdent(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

// conform returns rec laid out as target: columns matched by name, types equal, table
// columns missing from rec filled with nulls when nullable. The result must be released.
func conform(rec arrow.RecordBatch, target *arrow.Schema) (arrow.RecordBatch, error) {
	src := rec.Schema()
	if src.Equal(target) {
		for i, f := range target.Fields() {
			if c := rec.Column(i); !f.Nullable && c.NullN() > 0 {
				return nil, fmt.Errorf("%w: column %q is not nullable but has %d nulls", ErrInvalidBatch, f.Name, c.NullN())
			}
		}
		if src == target {
			rec.Retain()
			return rec, nil
		}
		// Same columns (metadata aside): share the arrays under the target schema, so
		// every batch of a shard carries one schema object.
		return array.NewRecordBatch(target, rec.Columns(), rec.NumRows()), nil
	}
	cols := make([]arrow.Array, target.NumFields())
	release := func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}
	used := 0
	for i, f := range target.Fields() {
		idx := src.FieldIndices(f.Name)
		switch {
		case len(idx) > 1:
			release()
			return nil, fmt.Errorf("%w: column %q appears more than once", ErrInvalidBatch, f.Name)
		case len(idx) == 0:
			if !f.Nullable {
				release()
				return nil, fmt.Errorf("%w: missing non-nullable column %q", ErrInvalidBatch, f.Name)
			}
			cols[i] = array.MakeArrayOfNull(memory.DefaultAllocator, f.Type, int(rec.NumRows()))
		default:
			c := rec.Column(idx[0])
			if !arrow.TypeEqual(c.DataType(), f.Type) {
				release()
				return nil, fmt.Errorf("%w: column %q has type %s, the table has %s", ErrInvalidBatch, f.Name, c.DataType(), f.Type)
			}
			if !f.Nullable && c.NullN() > 0 {
				release()
				return nil, fmt.Errorf("%w: column %q is not nullable but has %d nulls", ErrInvalidBatch, f.Name, c.NullN())
			}
			c.Retain()
			cols[i] = c
			used++
		}
	}
	if used != src.NumFields() {
		for _, f := range src.Fields() {
			if len(target.FieldIndices(f.Name)) == 0 {
				release()
				return nil, fmt.Errorf("%w: column %q is not in the table schema", ErrInvalidBatch, f.Name)
			}
		}
	}
	out := array.NewRecordBatch(target, cols, rec.NumRows())
	release()
	return out, nil
}

// selectRows returns the rows of rec where keep is true, in order (nil when none).
func selectRows(rec arrow.RecordBatch, keep []bool) (arrow.RecordBatch, error) {
	type run struct{ lo, hi int64 }
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
	case len(runs) == 1:
		if runs[0].lo == 0 && runs[0].hi == rec.NumRows() {
			rec.Retain()
			return rec, nil
		}
		return rec.NewSlice(runs[0].lo, runs[0].hi), nil
	}
	n := int64(0)
	for _, r := range runs {
		n += r.hi - r.lo
	}
	cols := make([]arrow.Array, rec.NumCols())
	release := func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}
	for i := range cols {
		parts := make([]arrow.Array, len(runs))
		for j, r := range runs {
			parts[j] = array.NewSlice(rec.Column(i), r.lo, r.hi)
		}
		c, err := array.Concatenate(parts, memory.DefaultAllocator)
		for _, p := range parts {
			p.Release()
		}
		if err != nil {
			release()
			return nil, fmt.Errorf("wal: select rows of column %q: %w", rec.ColumnName(i), err)
		}
		cols[i] = c
	}
	out := array.NewRecordBatch(rec.Schema(), cols, n)
	release()
	return out, nil
}

// project returns the named columns of rec (which must have them) as a new batch.
func project(rec arrow.RecordBatch, out *arrow.Schema) arrow.RecordBatch {
	cols := make([]arrow.Array, out.NumFields())
	for i, f := range out.Fields() {
		cols[i] = rec.Column(rec.Schema().FieldIndices(f.Name)[0])
	}
	return array.NewRecordBatch(out, cols, rec.NumRows())
}

// recordBytes approximates the memory of a batch: the sum of its buffers.
func recordBytes(rec arrow.RecordBatch) int64 {
	var n int64
	for _, c := range rec.Columns() {
		n += dataBytes(c.Data())
	}
	return n
}

func dataBytes(d arrow.ArrayData) int64 {
	var n int64
	for _, b := range d.Buffers() {
		if b != nil {
			n += int64(b.Len())
		}
	}
	for _, c := range d.Children() {
		n += dataBytes(c)
	}
	if d.DataType().ID() == arrow.DICTIONARY {
		if dict := d.Dictionary(); dict != nil {
			n += dataBytes(dict)
		}
	}
	return n
}

// canonicalKey is key in the key form of lance.LookupKey (integers in plain decimal:
// "007" and "7" name the same row, as they do in a filter). key passed keyLiteral.
func canonicalKey(t arrow.DataType, key string) string {
	switch t.ID() {
	case arrow.INT64, arrow.INT32:
		if v, err := strconv.ParseInt(key, 10, 64); err == nil {
			return strconv.FormatInt(v, 10)
		}
	case arrow.UINT64, arrow.UINT32:
		if v, err := strconv.ParseUint(key, 10, 64); err == nil {
			return strconv.FormatUint(v, 10)
		}
	}
	return key
}
