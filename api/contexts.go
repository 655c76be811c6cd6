package api

import (
	"encoding/json"
	"time"
)

// Context stores (/api/v1/contexts): agent memory. Records carry text or binary
// payloads and an embedding; they are upserted by external id (a new row superseding
// the old one, the chain kept), expire, retire, relate to each other, and are found
// by vector (exact k-nearest neighbours) and hybrid (BM25 + vector, fused by
// reciprocal rank) search. The wire shapes follow the reference's context DTOs
// (CreateContextRequest, RecordDto, SearchRequest, RetrieveRequest).

// CreateContextStoreRequest is the body of POST /api/v1/contexts. Every option is
// persisted in the dataset; creating an existing store with other options is a 409.
type CreateContextStoreRequest struct {
	Name string `json:"name"`
	// StorageOptions are refused when set (see CreateRolloutStoreRequest).
	StorageOptions map[string]string `json:"storage_options,omitempty"`
	// IDIndexType is none (default), zonemap or btree: the index the reference builds
	// on id. Recorded; lancectx's point reads use its key cache instead.
	IDIndexType *string `json:"id_index_type,omitempty"`
	// BlobColumns ⊆ {text_payload, binary_payload}: columns left out of list and search
	// answers (marked lance-context:blob in the schema, as generic stores' blobs).
	BlobColumns []string `json:"blob_columns,omitempty"`
	// EmbeddingDim is the length of every embedding (default 1536, 1 to 65536).
	EmbeddingDim *int `json:"embedding_dim,omitempty"`
	// DistanceMetric is l2 (default), cosine or dot: how search ranks (smaller is closer).
	DistanceMetric *string `json:"distance_metric,omitempty"`
}

// ContextStoreInfo describes one context store: the answer to a create and to
// GET /api/v1/contexts/{name}.
type ContextStoreInfo struct {
	Name string `json:"name"`
	// URI is the store's dataset location ({data_dir}/{name}.context.lance).
	URI            string   `json:"uri"`
	Version        uint64   `json:"version"`
	EmbeddingDim   int      `json:"embedding_dim"`
	DistanceMetric string   `json:"distance_metric"`
	IDIndexType    string   `json:"id_index_type"`
	BlobColumns    []string `json:"blob_columns"`
}

// ListContextStoresResponse is the answer to GET /api/v1/contexts: every context
// store of the registry (the reference lists the resident ones only).
type ListContextStoresResponse struct {
	Contexts []StoreSummary `json:"contexts"`
}

// ContextStateMetadata is a record's agent state (the reference's StateMetadata).
type ContextStateMetadata struct {
	Step         *int32  `json:"step,omitempty"`
	ActivePlanID *string `json:"active_plan_id,omitempty"`
	TokensUsed   *int32  `json:"tokens_used,omitempty"`
	Custom       *string `json:"custom,omitempty"`
}

// ContextRelationship links a record to another record (by id).
type ContextRelationship struct {
	TargetID string   `json:"target_id"`
	Relation string   `json:"relation"`
	Weight   *float32 `json:"weight,omitempty"`
}

// ContextRecordFields are the fields a client sets on a record: what an add or an
// upsert sends, and (with the server-set fields of ContextRecord) what reads return.
type ContextRecordFields struct {
	RunID           string                `json:"run_id"`
	BotID           *string               `json:"bot_id,omitempty"`
	SessionID       *string               `json:"session_id,omitempty"`
	Role            string                `json:"role,omitempty"`
	StateMetadata   *ContextStateMetadata `json:"state_metadata,omitempty"`
	ContentType     string                `json:"content_type,omitempty"`
	TextPayload     *string               `json:"text_payload,omitempty"`
	BinaryPayload   []byte                `json:"binary_payload,omitempty"`
	Embedding       []float32             `json:"embedding,omitempty"`
	ExternalID      *string               `json:"external_id,omitempty"`
	Tenant          *string               `json:"tenant,omitempty"`
	Source          *string               `json:"source,omitempty"`
	PayloadURI      *string               `json:"payload_uri,omitempty"`
	PayloadSize     *int64                `json:"payload_size,omitempty"`
	PayloadChecksum *string               `json:"payload_checksum,omitempty"`
	Metadata        json.RawMessage       `json:"metadata,omitempty"`
	Relationships   []ContextRelationship `json:"relationships,omitempty"`
	ExpiresAt       *time.Time            `json:"expires_at,omitempty"`
	RetentionPolicy *string               `json:"retention_policy,omitempty"`
	LifecycleStatus string                `json:"lifecycle_status,omitempty"`
	RetiredAt       *time.Time            `json:"retired_at,omitempty"`
	RetiredReason   *string               `json:"retired_reason,omitempty"`
}

// AddContextRecord is one record of an add or upsert: the client fields, and
// optionally its id and creation time (generated when absent).
type AddContextRecord struct {
	ID        string     `json:"id,omitempty"`
	CreatedAt *time.Time `json:"created_at,omitempty"`
	ContextRecordFields
}

// ContextRecord is a stored record as reads return it (the reference's RecordDto).
type ContextRecord struct {
	ID        string    `json:"id"`
	CreatedAt time.Time `json:"created_at"`
	ContextRecordFields
	// SupersedesID and SupersededByID chain the versions of one external id.
	SupersedesID   *string `json:"supersedes_id,omitempty"`
	SupersededByID *string `json:"superseded_by_id,omitempty"`
}

// AddContextRecordsRequest is the body of POST /api/v1/contexts/{name}/records.
type AddContextRecordsRequest struct {
	Records []AddContextRecord `json:"records"`
}

// AddContextRecordsResponse answers an add: the base version, the ids written (in
// request order) and their count.
type AddContextRecordsResponse struct {
	Version uint64   `json:"version"`
	IDs     []string `json:"ids"`
	Count   int      `json:"count"`
	// Durable and Visible are always true in a 201: every write of a context store
	// is sealed before its answer (see AppendResponse).
	Durable bool `json:"durable"`
	Visible bool `json:"visible"`
}

// UpsertContextRecordRequest is the body of PUT /api/v1/contexts/{name}/records.
// Key must be "external_id" (the default).
type UpsertContextRecordRequest struct {
	Record AddContextRecord `json:"record"`
	Key    string           `json:"key,omitempty"`
}

// UpsertContextRecordResponse answers an upsert: inserted is false when the record
// superseded an existing one (replaced_id).
type UpsertContextRecordResponse struct {
	Version    uint64        `json:"version"`
	Inserted   bool          `json:"inserted"`
	ReplacedID *string       `json:"replaced_id,omitempty"`
	Record     ContextRecord `json:"record"`
}

// UpsertContextRecordsRequest is the body of PUT /api/v1/contexts/{name}/records/batch.
type UpsertContextRecordsRequest struct {
	Records []AddContextRecord `json:"records"`
	Key     string             `json:"key,omitempty"`
}

// UpsertContextResult is one record's outcome in a batch upsert.
type UpsertContextResult struct {
	Inserted   bool          `json:"inserted"`
	ReplacedID *string       `json:"replaced_id,omitempty"`
	Record     ContextRecord `json:"record"`
}

// UpsertContextRecordsResponse answers a batch upsert, one result per record in
// request order; the whole batch is one durable write.
type UpsertContextRecordsResponse struct {
	Version uint64                `json:"version"`
	Results []UpsertContextResult `json:"results"`
}

// PatchContextRecordRequest is the body of PATCH /api/v1/contexts/{name}/records:
// exactly one of id and external_id (the live record of it), and the fields to set.
// Patch keys are ContextRecordFields names; a null value clears a nullable field.
type PatchContextRecordRequest struct {
	ID         *string         `json:"id,omitempty"`
	ExternalID *string         `json:"external_id,omitempty"`
	Patch      json.RawMessage `json:"patch"`
}

// PatchContextRecordResponse answers a patch: updated is false (and record absent)
// when no live record matched. The record keeps its id (replaced_id is never set by
// lancectx; it is in the shape for the reference's clients).
type PatchContextRecordResponse struct {
	Version    uint64         `json:"version"`
	Updated    bool           `json:"updated"`
	ReplacedID *string        `json:"replaced_id,omitempty"`
	Record     *ContextRecord `json:"record,omitempty"`
}

// DeleteContextRecordsResponse answers a delete: how many records were tombstoned.
type DeleteContextRecordsResponse struct {
	Deleted int    `json:"deleted"`
	Version uint64 `json:"version"`
}

// GetContextRecordResponse answers a point read; record is null when absent.
type GetContextRecordResponse struct {
	Record *ContextRecord `json:"record"`
}

// ListContextRecordsResponse answers a list or a related-records read.
type ListContextRecordsResponse struct {
	Records []ContextRecord `json:"records"`
}

// ContextFilters narrow lists and searches: each set field must equal the record's.
// Empty strings are ignored (as the reference's rollout filters).
type ContextFilters struct {
	RunID           *string `json:"run_id,omitempty"`
	BotID           *string `json:"bot_id,omitempty"`
	SessionID       *string `json:"session_id,omitempty"`
	Role            *string `json:"role,omitempty"`
	ContentType     *string `json:"content_type,omitempty"`
	ExternalID      *string `json:"external_id,omitempty"`
	Tenant          *string `json:"tenant,omitempty"`
	Source          *string `json:"source,omitempty"`
	LifecycleStatus *string `json:"lifecycle_status,omitempty"`
	RetentionPolicy *string `json:"retention_policy,omitempty"`
}

// SearchContextRequest is the body of POST /api/v1/contexts/{name}/search.
type SearchContextRequest struct {
	Query                []float32       `json:"query"`
	Limit                *int            `json:"limit,omitempty"`
	Filters              *ContextFilters `json:"filters,omitempty"`
	IncludeExpired       bool            `json:"include_expired,omitempty"`
	IncludeRetired       bool            `json:"include_retired,omitempty"`
	IncludeRelationships bool            `json:"include_relationships,omitempty"`
}

// SearchContextResult is one search hit: distance in the store's metric (smaller is
// closer), equal to LanceDB's _distance for the same metric.
type SearchContextResult struct {
	Record   ContextRecord `json:"record"`
	Distance float32       `json:"distance"`
}

// SearchContextResponse answers a search, nearest first.
type SearchContextResponse struct {
	Results []SearchContextResult `json:"results"`
}

// RetrieveContextRequest is the body of POST /api/v1/contexts/{name}/retrieve: text
// (BM25 over text_payload), vector, or both; fusion must be "rrf" (the default).
type RetrieveContextRequest struct {
	Text                 *string         `json:"text,omitempty"`
	Vector               []float32       `json:"vector,omitempty"`
	Limit                *int            `json:"limit,omitempty"`
	Filters              *ContextFilters `json:"filters,omitempty"`
	IncludeExpired       bool            `json:"include_expired,omitempty"`
	IncludeRetired       bool            `json:"include_retired,omitempty"`
	IncludeRelationships bool            `json:"include_relationships,omitempty"`
	Fusion               string          `json:"fusion,omitempty"`
}

// RetrieveContextResult is one hybrid hit: the fused score (higher is better), the
// channel scores where the record was ranked, and the channels that ranked it
// ("vector", "text").
type RetrieveContextResult struct {
	Record          ContextRecord `json:"record"`
	Score           float64       `json:"score"`
	VectorDistance  *float32      `json:"vector_distance,omitempty"`
	TextScore       *float64      `json:"text_score,omitempty"`
	MatchedChannels []string      `json:"matched_channels"`
}

// RetrieveContextResponse answers a retrieve, best first.
type RetrieveContextResponse struct {
	Results []RetrieveContextResult `json:"results"`
}

// ContextVersionResponse is the answer to GET .../version and POST .../checkout.
type ContextVersionResponse struct {
	Version uint64 `json:"version"`
}

// ContextCheckoutRequest is the body of POST .../checkout: version pins the store
// (on this worker) to that base version; latest unpins it.
type ContextCheckoutRequest struct {
	Version *uint64 `json:"version,omitempty"`
	Latest  bool    `json:"latest,omitempty"`
}

// ContextCompactRequest is the body of POST .../compact (every field optional).
type ContextCompactRequest struct {
	TargetRowsPerFragment *int64   `json:"target_rows_per_fragment,omitempty"`
	MaterializeDeletions  *float64 `json:"materialize_deletions,omitempty"`
}

// ContextCompactResponse answers a compaction.
type ContextCompactResponse struct {
	FragmentsRemoved int    `json:"fragments_removed"`
	FragmentsAdded   int    `json:"fragments_added"`
	FilesRemoved     int    `json:"files_removed"`
	FilesAdded       int    `json:"files_added"`
	Version          uint64 `json:"version"`
}

// ContextCompactStatsResponse answers GET .../compact/stats: this worker's view
// (the master's compactions are counted in its stats rows, not here).
type ContextCompactStatsResponse struct {
	TotalFragments   int     `json:"total_fragments"`
	IsCompacting     bool    `json:"is_compacting"`
	LastCompaction   *int64  `json:"last_compaction,omitempty"`
	LastError        *string `json:"last_error,omitempty"`
	TotalCompactions int64   `json:"total_compactions"`
}
