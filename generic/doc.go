// Package generic is the data model of generic stores: datasets whose schema the
// client declares when it creates the store. It provides the schema spec (Spec:
// ordered, typed, nullable columns; validated before any storage I/O; persisted in the
// table's schema metadata and read back from it) and the row codec between JSON
// objects and Arrow record batches (DecodeRows, RowWriter).
//
// # Column types
//
//	type              Arrow type                    JSON in                          JSON out
//	string            Utf8 (large: LargeUtf8)        string                           string
//	binary            Binary (large: LargeBinary)    array of bytes or base64 string  base64 string
//	binary, blob      LargeBinary, metadata blob     as binary                        base64 (only when named in columns)
//	bool              Boolean                        true / false                     true / false
//	int32, int64      Int32, Int64                   integer number                   number
//	float32, float64  Float32, Float64               number                           number (NaN, ±Inf: null)
//	timestamp         Timestamp(µs, UTC)             RFC 3339 string or µs integer    RFC 3339 string (UTC)
//	json              LargeUtf8                      any JSON value                   the JSON value
//	list              List<item>                     array of item values             array
//	fixed_size_list   FixedSizeList<Float32>[size]   array of exactly size numbers    array
//
// The key column "id" is a non-nullable string carrying Lance's unenforced primary
// key metadata; reads keep the newest row per id, merges one row per id.
//
// Errors caused by the request are *api.Error values (400) naming the row and column.
// The package imports no net/http.
package generic
