// Package datagen is the datagen store's event log: the reference's event schema
// (event_id primary key ... event_ts, schema_version), the validation of appended
// events (per event, per batch and checkpoint batches), the JSON <-> Arrow codec and
// the fold of an item's events into its state (items, failures, root statuses and
// the run overview).
//
// Folds take events in (item_id, item_seq, event_id) order; Overview aggregates a
// stream of events in any order keeping only a few numbers per item, never the
// events themselves.
package datagen
