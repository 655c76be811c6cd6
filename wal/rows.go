package wal

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

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
