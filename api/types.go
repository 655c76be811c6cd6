package api

import "time"

// PathPrefix is where every versioned route lives.
const PathPrefix = "/api/v1"

// CreateRolloutStoreRequest is the body of POST /api/v1/rollouts.
type CreateRolloutStoreRequest struct {
	Name string `json:"name"`
	// StorageOptions are backend options for this store's dataset (credentials,
	// endpoints). Optional.
	StorageOptions map[string]string `json:"storage_options,omitempty"`
}

// StoreInfo describes one rollout store: the answer to a create and to
// GET /api/v1/rollouts/{name}.
type StoreInfo struct {
	Name string `json:"name"`
	// URI is the store's dataset location ({data_dir}/{name}.rollout.lance).
	URI string `json:"uri"`
	// Version is the base table's Lance version. Appends do not advance it (they go
	// to the WAL); merges do.
	Version uint64 `json:"version"`
}

// StoreSummary is one entry of a store listing. It comes from the registry alone, so
// it has no version (that would mean opening every dataset).
type StoreSummary struct {
	Name string `json:"name"`
	URI  string `json:"uri"`
}

// ListStoresResponse is the answer to GET /api/v1/rollouts.
type ListStoresResponse struct {
	Stores []StoreSummary `json:"stores"`
}

// AppendResponse is the answer (201) to POST /api/v1/rollouts/{name}/records.
type AppendResponse struct {
	// Version is the base table's version when the append was acknowledged; kept for
	// compatibility. It says nothing about the write: use Durable and Visible.
	Version uint64 `json:"version"`
	// IDs are the record ids in request order (ids may repeat).
	IDs []string `json:"ids"`
	// Count is the number of records written.
	Count int `json:"count"`
	// Durable is always true in a 2xx: the rows are in a WAL object written with a
	// conditional create, and survive a crash.
	Durable bool `json:"durable"`
	// Visible tells whether every reader (any worker) can see the rows already: true
	// after ?flush=true sealed them into a generation, false when only this worker's
	// memtable has them. (There is no generation number: generations are numbered per
	// WAL shard, so a number alone would name nothing a client could use.)
	Visible bool `json:"visible"`
}

// GetRecordResponse is the answer to GET /api/v1/rollouts/{name}/records/{id}. T is
// a pointer to the record type of the store kind (*rollout.Record for rollout
// stores): a missing record is a 200 with {"record": null}, as in the reference (an
// unknown store is still a 404). The blob route, which has no body to put a null
// in, answers a missing record with a 404.
type GetRecordResponse[T any] struct {
	Record T `json:"record"`
}

// ListRecordsResponse is the answer to GET /api/v1/rollouts/{name}/records.
type ListRecordsResponse[T any] struct {
	Records []T `json:"records"`
	// HasMore tells whether a page at Offset+Limit would have rows; always false
	// when the request gave no limit (the answer then holds every matching row).
	HasMore bool `json:"has_more"`
	// Limit is the request's limit or, when it gave none, the server's bound
	// (ROLLOUT_LIST_MAX_ROWS) that every matching row fit in: a request whose rows
	// would not fit is a 400, never a truncated answer.
	Limit  int `json:"limit"`
	Offset int `json:"offset"`
}

// MergeWALResponse is the answer to POST /api/v1/internal/merge-wal/{name}.
type MergeWALResponse struct {
	// Reclaimed is the number of sealed generations merged into the base table.
	Reclaimed int `json:"reclaimed"`
	// Rows is the number of rows those generations held.
	Rows int64 `json:"rows"`
	// Pending is the number of sealed generations still waiting (a pass is bounded).
	Pending int `json:"pending"`
	// Version is the base table version after the merge.
	Version uint64 `json:"version"`
}

// Health check states.
const (
	HealthOK      = "ok"
	HealthFailing = "failing"
)

// HealthResponse is the answer to GET /api/v1/health: 200 when Status is "ok", 503
// when any check is failing.
type HealthResponse struct {
	Status   string        `json:"status"`
	WorkerID string        `json:"worker_id,omitempty"`
	Checks   []HealthCheck `json:"checks"`
}

// HealthCheck reports one background loop or dependency.
type HealthCheck struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	// Message explains a failing check in words an operator can act on.
	Message string `json:"message,omitempty"`
	// LastSuccess is when the loop last completed a pass.
	LastSuccess *time.Time `json:"last_success,omitempty"`
	// ConsecutiveFailures counts failed passes since the last success.
	ConsecutiveFailures int `json:"consecutive_failures,omitempty"`
}

// GenericColumn is one column of a generic store's schema (GenericSchema).
//
// Type is one of string, binary, bool, int32, int64, float32, float64, timestamp,
// json, list and fixed_size_list. Large (string, binary) selects the 64-bit offset
// Arrow type; Blob (binary) marks a large binary column that reads leave out unless
// named in ?columns=. Item is the element type of a list (any of the scalar types)
// and of a fixed_size_list (float32); Size is the length of a fixed_size_list
// (an embedding's dimension).
type GenericColumn struct {
	Name string `json:"name"`
	Type string `json:"type"`
	// Nullable defaults to true in a request; answers always carry it.
	Nullable *bool  `json:"nullable,omitempty"`
	Large    bool   `json:"large,omitempty"`
	Blob     bool   `json:"blob,omitempty"`
	Item     string `json:"item,omitempty"`
	Size     int    `json:"size,omitempty"`
}

// GenericSchema is the declared schema of a generic store: its columns in table
// order. It must declare "id", a non-nullable string (the primary key).
type GenericSchema struct {
	Columns []GenericColumn `json:"columns"`
}

// CreateGenericStoreRequest is the body of POST /api/v1/generic.
type CreateGenericStoreRequest struct {
	Name   string        `json:"name"`
	Schema GenericSchema `json:"schema"`
	// StorageOptions are refused (as for rollout stores): every store uses the
	// worker's data directory settings.
	StorageOptions map[string]string `json:"storage_options,omitempty"`
	// SealOnAdd seals every append before it is acknowledged (read-your-writes for
	// every reader); it is persisted with the store.
	SealOnAdd bool `json:"seal_on_add,omitempty"`
}

// GenericStoreInfo describes one generic store: the answer to a create and to
// GET /api/v1/generic/{name}.
type GenericStoreInfo struct {
	Name string `json:"name"`
	// URI is the store's dataset location ({data_dir}/{name}.generic.lance).
	URI     string        `json:"uri"`
	Version uint64        `json:"version"`
	Schema  GenericSchema `json:"schema"`
	// SealOnAdd is the persisted seal_on_add of the store.
	SealOnAdd bool `json:"seal_on_add"`
}

// GenericAppendResponse is the answer (201) to POST /api/v1/generic/{name}/rows.
type GenericAppendResponse struct {
	// Version is the base table's version (see AppendResponse.Version).
	Version uint64 `json:"version"`
	Count   int    `json:"count"`
	// Durable is always true in a 2xx (see AppendResponse.Durable).
	Durable bool `json:"durable"`
	// Visible: the rows were sealed before the answer (?flush=true or seal_on_add).
	Visible bool `json:"visible"`
}

// ListRowsResponse is the answer to GET /api/v1/generic/{name}/rows: rows as JSON
// objects of the store's columns (blob columns left out).
type ListRowsResponse[T any] struct {
	Rows    []T  `json:"rows"`
	HasMore bool `json:"has_more"`
	Limit   int  `json:"limit"`
	Offset  int  `json:"offset"`
}

// GetRowsRequest is the body of POST /api/v1/generic/{name}/rows/batch-get.
type GetRowsRequest struct {
	// IDs are at most MaxBatchGetIDs ids; the answer keeps the first-requested order
	// and leaves out ids the store does not have.
	IDs []string `json:"ids"`
	// Columns to return ("id" always included); empty: every column but blob ones.
	Columns []string `json:"columns,omitempty"`
}

// MaxBatchGetIDs bounds GetRowsRequest.IDs.
const MaxBatchGetIDs = 1024

// GetRowsResponse is the answer to a batch get.
type GetRowsResponse[T any] struct {
	Rows []T `json:"rows"`
}
