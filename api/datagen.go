package api

import (
	"encoding/json"
	"time"
)

// Datagen stores (/api/v1/datagen): append-only event logs of data-generation
// pipelines. The wire shapes follow the reference's DatagenEventDto and its folded
// read lenses field for field.

// CreateDatagenStoreRequest is the body of POST /api/v1/datagen.
type CreateDatagenStoreRequest struct {
	Name string `json:"name"`
	// StorageOptions are refused when set (see CreateRolloutStoreRequest).
	StorageOptions map[string]string `json:"storage_options,omitempty"`
}

// DatagenStoreInfo describes one datagen store: the answer to a create and to
// GET /api/v1/datagen/{name}.
type DatagenStoreInfo struct {
	Name string `json:"name"`
	// URI is the store's dataset location ({data_dir}/{name}.datagen.lance).
	URI     string `json:"uri"`
	Version uint64 `json:"version"`
}

// DatagenValue is a typed field value: kind int|float|bool|str|json carries value;
// blob carries bytes (base64 in JSON) and size (= the byte count), checksum optional.
type DatagenValue struct {
	Kind     string          `json:"kind"`
	Value    json.RawMessage `json:"value,omitempty"`
	Bytes    []byte          `json:"bytes,omitempty"`
	Size     *int64          `json:"size,omitempty"`
	Checksum *string         `json:"checksum,omitempty"`
}

// DatagenEvent is one row of a datagen log (the reference's DatagenEventDto).
type DatagenEvent struct {
	EventID       string          `json:"event_id"`
	ItemID        string          `json:"item_id"`
	RootItemID    string          `json:"root_item_id"`
	ParentItemID  *string         `json:"parent_item_id,omitempty"`
	ItemSeq       int64           `json:"item_seq"`
	CheckpointID  string          `json:"checkpoint_id"`
	EventType     string          `json:"event_type"`
	StepName      *string         `json:"step_name,omitempty"`
	StepKind      *string         `json:"step_kind,omitempty"`
	StepIndex     *int64          `json:"step_index,omitempty"`
	EnclosingStep *string         `json:"enclosing_step,omitempty"`
	SelectorStep  *string         `json:"selector_step,omitempty"`
	Attempt       int32           `json:"attempt"`
	RunID         string          `json:"run_id"`
	WriterEpoch   string          `json:"writer_epoch"`
	FieldName     *string         `json:"field_name,omitempty"`
	FieldType     *string         `json:"field_type,omitempty"`
	CodecVersion  *int32          `json:"codec_version,omitempty"`
	Value         *DatagenValue   `json:"value,omitempty"`
	QueryTags     json.RawMessage `json:"query_tags,omitempty"`
	Status        *string         `json:"status,omitempty"`
	ErrorType     *string         `json:"error_type,omitempty"`
	ErrorDump     *string         `json:"error_dump,omitempty"`
	Traceback     *string         `json:"traceback,omitempty"`
	// EventTS defaults to the server's time when omitted.
	EventTS       *time.Time `json:"event_ts,omitempty"`
	SchemaVersion int32      `json:"schema_version"`
}

// AddDatagenEventsRequest is the body of POST /api/v1/datagen/{name}/events.
type AddDatagenEventsRequest struct {
	Events []DatagenEvent `json:"events"`
}

// DatagenAppendResponse is the answer (201) to an events append.
type DatagenAppendResponse struct {
	Version uint64 `json:"version"`
	Count   int    `json:"count"`
	// Durable and Visible are always true in a 201: every append is sealed before
	// the answer (read-your-writes on every worker).
	Durable bool `json:"durable"`
	Visible bool `json:"visible"`
}

// DatagenFieldState is a folded field: mode "set" carries value, "append" values.
type DatagenFieldState struct {
	Mode   string         `json:"mode"`
	Value  *DatagenValue  `json:"value,omitempty"`
	Values []DatagenValue `json:"values,omitempty"`
}

// DatagenStepCursor is one completed step position (a STEP_COMPLETED).
type DatagenStepCursor struct {
	StepName      string  `json:"step_name"`
	StepKind      string  `json:"step_kind"`
	StepIndex     int64   `json:"step_index"`
	EnclosingStep *string `json:"enclosing_step,omitempty"`
	SelectorStep  *string `json:"selector_step,omitempty"`
	ItemSeq       int64   `json:"item_seq"`
}

// DatagenStreamPosition is a step position without an item_seq.
type DatagenStreamPosition struct {
	StepName      string  `json:"step_name"`
	StepKind      string  `json:"step_kind"`
	StepIndex     int64   `json:"step_index"`
	EnclosingStep *string `json:"enclosing_step,omitempty"`
	SelectorStep  *string `json:"selector_step,omitempty"`
}

// FoldedDatagenItem is an item reconstructed by folding its events.
type FoldedDatagenItem struct {
	ItemID       string                       `json:"item_id"`
	RootItemID   string                       `json:"root_item_id"`
	ParentItemID *string                      `json:"parent_item_id,omitempty"`
	Status       string                       `json:"status"`
	LastItemSeq  int64                        `json:"last_item_seq"`
	LastAttempt  int32                        `json:"last_attempt"`
	Fields       map[string]DatagenFieldState `json:"fields"`
	Trajectory   []DatagenStepCursor          `json:"trajectory"`
	Started      []DatagenStreamPosition      `json:"started,omitempty"`
	Completed    []DatagenStreamPosition      `json:"completed,omitempty"`
	QueryTags    json.RawMessage              `json:"query_tags,omitempty"`
	BlobEventIDs map[string]string            `json:"blob_event_ids,omitempty"`
}

// GetFoldedDatagenItemResponse is the answer to GET .../items/{item_id}: null when
// the item was never started (no ITEM_CREATED first).
type GetFoldedDatagenItemResponse struct {
	Item *FoldedDatagenItem `json:"item"`
}

// DatagenFailure is one FAILED event of an item (the failure lens).
type DatagenFailure struct {
	At        DatagenStepCursor `json:"at"`
	RunID     string            `json:"run_id"`
	Attempt   int32             `json:"attempt"`
	ErrorType string            `json:"error_type"`
	ErrorDump *string           `json:"error_dump,omitempty"`
	Traceback *string           `json:"traceback,omitempty"`
}

// ListDatagenFailuresResponse is the answer to GET .../items/{item_id}/failures.
type ListDatagenFailuresResponse struct {
	Failures []DatagenFailure `json:"failures"`
}

// ListDatagenEventsResponse is the answer to the event dumps (.../items/{id}/events,
// .../roots/{root}/events), sorted by (item_id, item_seq, event_id).
type ListDatagenEventsResponse struct {
	Events []DatagenEvent `json:"events"`
}

// DatagenRootItemStatusesResponse is the answer to GET .../root-status?ids=a,b; an
// id never started is missing.
type DatagenRootItemStatusesResponse struct {
	Statuses map[string]string `json:"statuses"`
}

// DatagenFailureBucket is one run_id's slice of an overview's failures.
type DatagenFailureBucket struct {
	Failures            int            `json:"failures"`
	FailuresByErrorType map[string]int `json:"failures_by_error_type"`
	SampleRootItemIDs   []string       `json:"sample_root_item_ids"`
}

// DatagenRunOverview aggregates a whole log: items counts root items only
// (running + completed + filtered); failures counts FAILED events.
type DatagenRunOverview struct {
	Items               int                             `json:"items"`
	Running             int                             `json:"running"`
	Completed           int                             `json:"completed"`
	Filtered            int                             `json:"filtered"`
	Failures            int                             `json:"failures"`
	FailuresByErrorType map[string]int                  `json:"failures_by_error_type"`
	FailuresByRun       map[string]DatagenFailureBucket `json:"failures_by_run"`
	CompletedSteps      map[string]int                  `json:"completed_steps"`
}
