// Package arrowjson converts between Arrow and JSON in the one form that both lancectx and the
// LanceDB oracle (tests/interop/oracle-arrow.mjs) implement, so rows from either side compare as
// text.
//
// Schema spec (ParseSchema, FormatSchema):
//
//	{"fields":[{"name":"id","type":"int64","nullable":false,"metadata":{"k":"v"}}, ...],
//	 "metadata":{"k":"v"}}
//
// "nullable" defaults to true. A type is one of the strings int8 int16 int32 int64 uint8 uint16
// uint32 uint64 float16 float32 float64 bool utf8 large_utf8 binary large_binary date32 timestamp[s]
// timestamp[ms] timestamp[us] timestamp[ns], or an object:
//
//	{"timestamp":"us","tz":"UTC"}
//	{"list":T}  {"large_list":T}  {"fixed_size_list":T,"size":N}
//	    (item field "item", nullable; "item_nullable":false and "item_name":"x" override)
//	{"struct":[fields]}
//	{"dictionary":"utf8"|"binary","index":"int8".."uint64"}  (index defaults to int32)
//
// Canonical row encoding (Rows, WriteJSONL): one JSON object per row, keys are the column names in
// schema order, no whitespace. null is null; 8-32 bit integers and date32 (days) are JSON numbers;
// int64, uint64 and timestamps (count of the type's unit) are decimal strings; floats (float16 and
// float32 widened exactly to float64) print as ECMAScript's Number::toString does, except that -0
// prints as -0 and NaN, Infinity and -Infinity are the strings "NaN", "Infinity", "-Infinity"; bool
// is true/false; strings are escaped as JSON.stringify escapes them; binary is standard padded
// base64; lists are arrays; structs are objects; a dictionary value is its decoded value.
//
// Input rows (ReadJSONL) accept the canonical encoding plus: integers as JSON numbers or decimal
// strings, timestamps as RFC 3339 strings (exact in the column's unit), date32 as "YYYY-MM-DD".
// A number for a float32 column is rounded to float32 from its float64, one for a float16 column to
// the nearest float16 (ties to even), so both implementations store the same bits.
// Decoding is strict: unknown keys, nulls or missing keys in non-nullable fields, and values of the
// wrong type are errors that name the line and the column.
package arrowjson
