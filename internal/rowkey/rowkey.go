// Package rowkey defines the key form of a row: the string that names a row of a table by
// the value of its key column. Everything that matches rows by key (lance's merge-insert,
// FindKeys and key cache, the WAL's deduplication of generations against the base table,
// point reads by id) derives keys here, so two sources agree on which rows share a key by
// construction rather than by keeping copies of this code identical.
//
// The key form: strings as is, binary values as their bytes, integers in plain decimal
// ("7", never "007" or "+7"). Only those types can be keys.
package rowkey

import (
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lancectx/lancectx/lance/expr"
)

// Func returns the key of row i of a key column. The row must not be null (a null has
// no key); callers check IsNull first.
type Func func(col arrow.Array, i int) string

// For returns the key function of a column of type t; ok is false when t cannot be a
// key column (only string, binary and integer types can).
func For(t arrow.DataType) (f Func, ok bool) {
	switch t.ID() {
	case arrow.STRING:
		return func(a arrow.Array, i int) string { return a.(*array.String).Value(i) }, true
	case arrow.LARGE_STRING:
		return func(a arrow.Array, i int) string { return a.(*array.LargeString).Value(i) }, true
	case arrow.BINARY:
		return func(a arrow.Array, i int) string { return string(a.(*array.Binary).Value(i)) }, true
	case arrow.LARGE_BINARY:
		return func(a arrow.Array, i int) string { return string(a.(*array.LargeBinary).Value(i)) }, true
	case arrow.INT64:
		return func(a arrow.Array, i int) string { return strconv.FormatInt(a.(*array.Int64).Value(i), 10) }, true
	case arrow.INT32:
		return func(a arrow.Array, i int) string { return strconv.FormatInt(int64(a.(*array.Int32).Value(i)), 10) }, true
	case arrow.UINT64:
		return func(a arrow.Array, i int) string { return strconv.FormatUint(a.(*array.Uint64).Value(i), 10) }, true
	case arrow.UINT32:
		return func(a arrow.Array, i int) string { return strconv.FormatUint(uint64(a.(*array.Uint32).Value(i)), 10) }, true
	}
	return nil, false
}

// Canonical returns key, as a caller wrote it, in the key form of a column of type t:
// integers in plain decimal, so "007" and "7" name the same row, as they do in a filter.
// A key that is not a valid integer for an integer column is returned as is (Literal
// refuses it).
func Canonical(t arrow.DataType, key string) string {
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

// Literal renders key as the filter literal (lance/expr) that a column of type t equals
// on the rows with that key. Binary keys have no literal.
func Literal(t arrow.DataType, key string) (string, error) {
	switch t.ID() {
	case arrow.STRING, arrow.LARGE_STRING:
		return expr.QuoteString(key), nil
	case arrow.INT64, arrow.INT32:
		if _, err := strconv.ParseInt(key, 10, 64); err != nil {
			return "", fmt.Errorf("key %q is not an integer", key)
		}
		return key, nil
	case arrow.UINT64, arrow.UINT32:
		if _, err := strconv.ParseUint(key, 10, 64); err != nil {
			return "", fmt.Errorf("key %q is not an unsigned integer", key)
		}
		return key, nil
	}
	return "", fmt.Errorf("point reads by a %s key are not supported", t)
}

// Filter returns the filter (lance/expr) selecting the rows whose column, of type t,
// holds key.
func Filter(column string, t arrow.DataType, key string) (string, error) {
	lit, err := Literal(t, key)
	if err != nil {
		return "", err
	}
	return expr.QuoteIdent(column) + " = " + lit, nil
}
