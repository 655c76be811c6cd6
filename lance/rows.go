package lance

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Row selection over Arrow batches by slicing runs and concatenating them. It works for
// every type (nested and dictionary included) and is cheap for the common shapes here:
// long runs of kept rows around a few deleted ones.

// run is a half-open row range [lo, hi).
type run struct{ lo, hi int }

// gatherRuns builds a batch from the given row ranges of rec (in order).
func gatherRuns(rec arrow.RecordBatch, runs []run) (arrow.RecordBatch, error) {
	n := 0
	for _, r := range runs {
		n += r.hi - r.lo
	}
	if len(runs) == 1 {
		return rec.NewSlice(int64(runs[0].lo), int64(runs[0].hi)), nil
	}
	cols := make([]arrow.Array, rec.NumCols())
	for i := range cols {
		c, err := gatherColumn(rec.Column(i), runs)
		if err != nil {
			for _, c := range cols[:i] {
				c.Release()
			}
			return nil, fmt.Errorf("lance: gather column %q: %w", rec.ColumnName(i), err)
		}
		cols[i] = c
	}
	out := array.NewRecordBatch(rec.Schema(), cols, int64(n))
	for _, c := range cols {
		c.Release()
	}
	return out, nil
}

func gatherColumn(col arrow.Array, runs []run) (arrow.Array, error) {
	if len(runs) == 0 {
		return array.MakeArrayOfNull(memory.DefaultAllocator, col.DataType(), 0), nil
	}
	parts := make([]arrow.Array, len(runs))
	for i, r := range runs {
		parts[i] = array.NewSlice(col, int64(r.lo), int64(r.hi))
	}
	defer func() {
		for _, p := range parts {
			p.Release()
		}
	}()
	if len(parts) == 1 {
		parts[0].Retain()
		return parts[0], nil
	}
	return array.Concatenate(parts, memory.DefaultAllocator)
}

// selectRows keeps the rows where keep is true; nil when none survive.
func selectRows(rec arrow.RecordBatch, keep []bool) (arrow.RecordBatch, error) {
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
		runs = append(runs, run{i, j})
		i = j
	}
	switch {
	case len(runs) == 0:
		return nil, nil
	case len(runs) == 1 && runs[0].lo == 0 && runs[0].hi == len(keep):
		rec.Retain()
		return rec, nil
	}
	return gatherRuns(rec, runs)
}

// takeRows returns the rows of rec at the given indices, in that order (repeats allowed).
func takeRows(rec arrow.RecordBatch, indices []int) (arrow.RecordBatch, error) {
	var runs []run
	for _, i := range indices {
		if k := len(runs) - 1; k >= 0 && runs[k].hi == i {
			runs[k].hi++
			continue
		}
		runs = append(runs, run{i, i + 1})
	}
	if len(runs) == 0 {
		cols := emptyColumns(rec.Schema())
		out := array.NewRecordBatch(rec.Schema(), cols, 0)
		for _, c := range cols {
			c.Release()
		}
		return out, nil
	}
	return gatherRuns(rec, runs)
}
