package file

import (
	"context"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// takeUnordered is TakeWith for rows not in ascending order: the rows are taken in
// ascending order (pages visited once, forward) and the result put in the given order,
// runs of neighbouring rows moved as one slice.
func (r *Reader) takeUnordered(ctx context.Context, fieldIDs []int32, rows []uint64, opts ReadOptions) (arrow.RecordBatch, error) {
	order := make([]int, len(rows)) // order[j]: the position in rows of the j-th smallest
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		switch {
		case rows[a] < rows[b]:
			return -1
		case rows[a] > rows[b]:
			return 1
		}
		return 0
	})
	sorted := make([]uint64, len(rows))
	at := make([]int, len(rows)) // at[i]: where rows[i] is in the sorted take
	for j, i := range order {
		sorted[j] = rows[i]
		at[i] = j
	}
	rec, err := r.TakeWith(ctx, fieldIDs, sorted, opts)
	if err != nil {
		return nil, err
	}
	defer rec.Release()
	cols := make([]arrow.Array, rec.NumCols())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	for c := range cols {
		src := rec.Column(c)
		var pieces []arrow.Array
		for i := 0; i < len(at); {
			j := i + 1
			for j < len(at) && at[j] == at[j-1]+1 {
				j++
			}
			pieces = append(pieces, array.NewSlice(src, int64(at[i]), int64(at[i]+j-i)))
			i = j
		}
		out, err := array.Concatenate(pieces, memory.DefaultAllocator)
		for _, p := range pieces {
			p.Release()
		}
		if err != nil {
			return nil, err
		}
		cols[c] = out
	}
	return array.NewRecordBatch(rec.Schema(), cols, int64(len(rows))), nil
}
