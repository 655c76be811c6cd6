package wal

import (
	"fmt"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lancectx/lancectx/internal/arrowrows"
	"github.com/lancectx/lancectx/internal/rowkey"
)

// keyFunc returns the key form of row i of a key column (rowkey: strings as is,
// integers in decimal), the form lance uses for merge keys, so every source agrees.
func keyFunc(t arrow.DataType) (rowkey.Func, error) {
	f, ok := rowkey.For(t)
	if !ok {
		return nil, fmt.Errorf("wal: key column of type %s is not supported (want a string, binary or integer type)", t)
	}
	return f, nil
}

// conform returns rec laid out as target (arrowrows.Conform); a batch that does not fit
// is an ErrInvalidBatch. The result must be released.
func conform(rec arrow.RecordBatch, target *arrow.Schema) (arrow.RecordBatch, error) {
	out, err := arrowrows.Conform(rec, target)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidBatch, err)
	}
	return out, nil
}

// conform is the package conform for appends: the all-null columns of the table columns a
// batch leaves out come from the shard's null cache.
func (s *Shard) conform(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	out, err := arrowrows.ConformWith(rec, s.arrow, s.nulls.get)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidBatch, err)
	}
	return out, nil
}

// maxCachedNullRows bounds the all-null columns nullCache keeps (per table column).
const maxCachedNullRows = 1 << 16

// nullCache keeps, per table column, the all-null array of the last batch length a
// batch left that column out at. Clients send batches of one shape and size, so the
// next batch reuses it (arrays are immutable): the columns a client leaves out cost
// no allocation per append. Before, they were an eighth of the bytes allocated per row
// on the Arrow route (a zeroed buffer or three per missing column and batch).
type nullCache struct {
	schema *arrow.Schema
	mu     sync.Mutex
	cols   []arrow.Array // by table column; nil until needed
}

func newNullCache(s *arrow.Schema) *nullCache {
	return &nullCache{schema: s, cols: make([]arrow.Array, s.NumFields())}
}

// get returns a retained all-null array of column i's type and length n.
func (c *nullCache) get(i, n int) arrow.Array {
	if n > maxCachedNullRows {
		return nil // ConformWith makes one
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	a := c.cols[i]
	if a == nil || a.Len() != n {
		if a != nil {
			a.Release()
		}
		a = array.MakeArrayOfNull(memory.DefaultAllocator, c.schema.Field(i).Type, n)
		c.cols[i] = a
	}
	a.Retain()
	return a
}
