// Package rollout is the rollout data model: the Arrow schema of a rollout dataset, the
// wire records of appends and reads, strict decoding of append JSON into validated
// records, record <-> Arrow conversion, and the list route's filters object.
//
// The flow of an append is ParseAppendJSON (or ParseAppendMetadata for the metadata of
// a multipart body; the worker reads bodies and multipart framing, see
// worker.DecodeAppendRequest) giving validated records with defaults applied, then
// ToBatch (one Arrow batch in the dataset's column order); reads go the other way with
// FromBatch or a ListWriter. Errors caused by the request are *api.Error values with
// their HTTP status, ready for api.WriteError. The package imports no net/http.
package rollout
