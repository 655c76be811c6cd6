// Package rollout is the rollout data model: the Arrow schema of a rollout dataset, the
// wire records of appends and reads, strict decoding of append requests (JSON and
// multipart), record <-> Arrow conversion, and the list route's filters.
//
// The flow of an append is DecodeAppendRequest (validated records with defaults
// applied) then ToBatch (one Arrow batch in the dataset's column order); reads go
// the other way with FromBatch or a ListWriter. Errors caused by the request are
// *api.Error values with their HTTP status, ready for api.WriteError.
package rollout
