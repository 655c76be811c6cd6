package api

import (
	"encoding/json"
	"time"
)

// This file holds the master's (the control plane's) wire types: what
// `lancectx master` and `lancectx serve` answer on /api/v1/experiments, /api/v1/tasks,
// /api/v1/cluster and /api/v1/health. They live here, not in package master, so that a
// client can decode them without importing the control plane.

// ExperimentSummary is one experiment in the admin API (the reference's DTO): the
// stats row without its internal version; LastCompaction is omitted when the
// experiment was never compacted by a master. LastUpdated, LastCompaction and
// ScannedAt are unix milliseconds.
type ExperimentSummary struct {
	Name string `json:"name"`
	// Kind is the store kind: "rollout", "generic", ... (not in the reference, which
	// had rollout stores only). Stores of different kinds may share a name: the
	// experiment is the pair.
	Kind string `json:"kind"`
	// URI is the dataset's location in the canonical form (objstore.DatasetURI), the
	// same a worker reports for the store.
	URI                   string `json:"uri"`
	RowCount              int64  `json:"row_count"`
	FragmentCount         int64  `json:"fragment_count"`
	LastUpdated           int64  `json:"last_updated"`
	PendingWALGenerations int64  `json:"pending_wal_generations"`
	LastCompaction        *int64 `json:"last_compaction,omitempty"`
	TotalCompactions      int64  `json:"total_compactions"`
	ScannedAt             int64  `json:"scanned_at"`
	// OldestPendingWALMs is when the oldest pending WAL generation was sealed (unix
	// ms); absent when none is pending. Not in the reference: the merge age trigger
	// (MERGE_WAL_MAX_AGE_SECS) reads it.
	OldestPendingWALMs int64 `json:"oldest_pending_wal_ms,omitempty"`
}

// ExperimentListResponse answers GET /api/v1/experiments. Stale is true when the
// snapshot it comes from has never been loaded, or its newest observation is older
// than three scan intervals.
type ExperimentListResponse struct {
	Experiments  []ExperimentSummary `json:"experiments"`
	Total        int                 `json:"total"`
	Stale        bool                `json:"stale"`
	StatsVersion uint64              `json:"stats_version"`
}

// ExperimentRecordsResponse answers GET /api/v1/experiments/{name}/records: one page
// of the store's records (rollout records, without their binary payload) and the
// source they were read from (fragments, wal or all).
type ExperimentRecordsResponse[T any] struct {
	Records []T    `json:"records"`
	HasMore bool   `json:"has_more"`
	Limit   int    `json:"limit"`
	Offset  int    `json:"offset"`
	Source  string `json:"source"`
}

// QueryRequest is the body of POST /api/v1/experiments/{name}/query: one read-only
// SELECT (or WITH ... SELECT) statement over the table `records`.
type QueryRequest struct {
	SQL string `json:"sql"`
}

// QueryResponse answers a query: the column names, at most 10,000 rows of JSON values
// (timestamps as RFC 3339 strings), their count, and whether rows were cut.
type QueryResponse struct {
	Columns   []string `json:"columns"`
	Rows      [][]any  `json:"rows"`
	RowCount  int      `json:"row_count"`
	Truncated bool     `json:"truncated"`
}

// ExperimentDetail answers GET /api/v1/experiments/{name} and the rescan. Source is
// "snapshot" (the stats snapshot) or "observed" (read from the dataset for this
// request); Persisted tells whether an observation was written to the stats table.
type ExperimentDetail struct {
	ExperimentSummary
	Version   int64  `json:"version"`
	Stale     bool   `json:"stale"`
	Source    string `json:"source"`
	Persisted *bool  `json:"persisted,omitempty"`
	// NotPersisted says why an observation was not written (e.g. the writer was busy).
	NotPersisted string `json:"not_persisted,omitempty"`
}

// TaskRequest is the body of POST /api/v1/tasks. Kind is merge_wal, compact, cleanup,
// stats_maintenance (target "_stats", which may be left out) or optimize (the
// merge_wal -> compact -> cleanup chain, which takes no depends_on).
type TaskRequest struct {
	Kind      string   `json:"kind"`
	Target    string   `json:"target"`
	DependsOn []string `json:"depends_on,omitempty"`
}

// Task is a task of the master's queue as the API shows it: the answer to POST
// /api/v1/tasks (every kind), POST /api/v1/experiments/{name}/optimize and GET
// /api/v1/tasks/{id}, and the entries of GET /api/v1/tasks.
//
// It carries the reference's TaskRecord fields (id, kind, target, state, error,
// detail, depends_on, and enqueued_at, started_at, finished_at in unix milliseconds)
// plus the queue's own bookkeeping. Times are given twice on purpose: the *_at
// fields are unix milliseconds, as in the reference; the *_time fields (and
// not_before, deadline) are RFC 3339 in UTC with nanoseconds, for people and for
// order within a millisecond. Durations are seconds.
type Task struct {
	// ID is a UUIDv7: ids sort by creation time.
	ID     string `json:"id"`
	Kind   string `json:"kind"`
	Target string `json:"target"`
	// State is queued, running, done, failed or skipped (nothing to act on, e.g. its
	// store was deleted; Detail says why: no failure, no cooldown).
	State string `json:"state"`
	// Waiting is set while a queued task waits for its dependencies.
	Waiting bool `json:"waiting,omitempty"`
	// Attempts counts claims of this task; MaxAttempts bounds how many times a task
	// whose claim was lost is requeued before it fails.
	Attempts    int `json:"attempts"`
	MaxAttempts int `json:"max_attempts"`
	// Failures is how many times in a row tasks of this kind and target had failed
	// when this one was enqueued; past the cooldown threshold NotBefore delays it.
	Failures  int      `json:"failures,omitempty"`
	DependsOn []string `json:"depends_on,omitempty"`
	// Payload is the master's own note on the task (e.g. who asked for it).
	Payload json.RawMessage `json:"payload,omitempty"`
	// TimeoutSecs is how long one claim of the task may run.
	TimeoutSecs float64 `json:"timeout_secs"`

	// EnqueuedAt, StartedAt and FinishedAt are unix milliseconds (the reference's
	// fields); StartedAt and FinishedAt are absent until the task starts or ends.
	EnqueuedAt int64  `json:"enqueued_at"`
	StartedAt  *int64 `json:"started_at,omitempty"`
	FinishedAt *int64 `json:"finished_at,omitempty"`
	// The same instants in RFC 3339.
	EnqueuedTime  time.Time `json:"enqueued_time"`
	StartedTime   time.Time `json:"started_time,omitzero"`
	FinishedTime  time.Time `json:"finished_time,omitzero"`
	HeartbeatTime time.Time `json:"heartbeat_time,omitzero"`
	// NotBefore is when a task in a failure cooldown may first run; Deadline is when
	// the running claim must end.
	NotBefore time.Time `json:"not_before,omitzero"`
	Deadline  time.Time `json:"deadline,omitzero"`

	// ClaimedBy is the master running (or that last ran) the task.
	ClaimedBy string `json:"claimed_by,omitempty"`
	// Error is the failure of a failed task, why a task was skipped, or why a queued
	// task was requeued.
	Error string `json:"error,omitempty"`
	// Detail is the executor's summary of a done task.
	Detail string `json:"detail,omitempty"`
	// Cancelled marks a failed task an operator cancelled (POST /api/v1/tasks/{id}/cancel).
	Cancelled bool `json:"cancelled,omitempty"`
	// RetryOf is the id of the failed task this one retries (POST /api/v1/tasks/{id}/retry).
	RetryOf string `json:"retry_of,omitempty"`

	// Chain, in the answer to an optimize request, lists the ids of the chain's tasks
	// in the order they run (merge_wal, compact, cleanup); the task itself is the last
	// of them, and the chain is done when it is. Absent otherwise.
	Chain []string `json:"chain,omitempty"`
}

// TaskListResponse answers GET /api/v1/tasks (newest first).
type TaskListResponse struct {
	Tasks  []Task `json:"tasks"`
	Total  int    `json:"total"`
	Limit  int    `json:"limit"`
	Offset int    `json:"offset"`
}

// ClusterResponse answers GET /api/v1/cluster.
type ClusterResponse struct {
	Self        string               `json:"self"`
	Leader      *MasterInfo          `json:"leader"`
	Masters     []MasterInfo         `json:"masters"`
	Workers     []WorkerInfo         `json:"workers"`
	Stats       StatsInfo            `json:"stats"`
	Maintenance StatsMaintenanceInfo `json:"stats_maintenance"`
}

// MasterInfo describes a live master (a candidate of the planner election).
type MasterInfo struct {
	ID        string `json:"id"`
	Address   string `json:"address,omitempty"`
	StartedAt string `json:"started_at,omitempty"`
	Leader    bool   `json:"leader"`
}

// WorkerInfo describes a worker registered in etcd.
type WorkerInfo struct {
	// ID is the worker's stable identity (its WAL shard identity derives from it).
	ID string `json:"id"`
	// Endpoint is the worker's base URL, e.g. "http://worker-0.workers:8080".
	Endpoint string `json:"endpoint"`
	// Shards lists the WAL shards the worker writes.
	Shards []string `json:"shards,omitempty"`
	// StartedAt is when the worker process started.
	StartedAt time.Time `json:"started_at"`
}

// StatsInfo describes a master's stats snapshot.
type StatsInfo struct {
	Version     uint64     `json:"version"`
	Experiments int        `json:"experiments"`
	NewestScan  *time.Time `json:"newest_scan,omitempty"`
	SyncedAt    *time.Time `json:"synced_at,omitempty"`
	Stale       bool       `json:"stale"`
}

// StatsMaintenanceInfo is the fleet-wide bookkeeping of _stats maintenance (the
// compaction and cleanup of the stats table).
type StatsMaintenanceInfo struct {
	// LastSuccessVersion is the _stats version after the last successful pass (0: none).
	LastSuccessVersion uint64    `json:"last_success_version"`
	LastSuccessAt      time.Time `json:"last_success_at,omitzero"`
	// ConsecutiveFailures counts failed passes since the last success.
	ConsecutiveFailures int64 `json:"consecutive_failures"`
	// Unreclaimed versions measured when the version was MeasuredAtVersion.
	Unreclaimed       uint64 `json:"unreclaimed"`
	MeasuredAtVersion uint64 `json:"measured_at_version"`
	LastError         string `json:"last_error,omitempty"`
	// FailuresTotal counts every failed pass, fleet-wide.
	FailuresTotal int64     `json:"failures_total"`
	UpdatedAt     time.Time `json:"updated_at,omitzero"`
}

// MasterHealthResponse answers the master's GET /api/v1/health: 200 when every check
// is ok, else 503 with the failing checks naming the loop and why.
type MasterHealthResponse struct {
	Status   string        `json:"status"`
	MasterID string        `json:"master_id,omitempty"`
	Leader   bool          `json:"leader"`
	Checks   []HealthCheck `json:"checks"`
	// Failing lists the names of the failing checks, for a quick look.
	Failing []string `json:"failing,omitempty"`
}
