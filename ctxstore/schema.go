package ctxstore

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lancectx/lancectx/api"
)

// KeyColumn is the primary key of a context store: reads keep the newest row per id,
// and a WAL merge keeps one.
const KeyColumn = ColID

// Columns of the record schema, in table order (the reference's context schema with
// the newer RecordDto fields appended).
const (
	ColID              = "id"
	ColRunID           = "run_id"
	ColBotID           = "bot_id"
	ColSessionID       = "session_id"
	ColCreatedAt       = "created_at"
	ColRole            = "role"
	ColStateMetadata   = "state_metadata"
	ColContentType     = "content_type"
	ColTextPayload     = "text_payload"
	ColBinaryPayload   = "binary_payload"
	ColEmbedding       = "embedding"
	ColExternalID      = "external_id"
	ColTenant          = "tenant"
	ColSource          = "source"
	ColPayloadURI      = "payload_uri"
	ColPayloadSize     = "payload_size"
	ColPayloadChecksum = "payload_checksum"
	ColMetadata        = "metadata"
	ColRelationships   = "relationships"
	ColExpiresAt       = "expires_at"
	ColRetentionPolicy = "retention_policy"
	ColLifecycleStatus = "lifecycle_status"
	ColRetiredAt       = "retired_at"
	ColRetiredReason   = "retired_reason"
	ColSupersedesID    = "supersedes_id"
	ColSupersededByID  = "superseded_by_id"
)

// Schema metadata keys.
const (
	// MetaOptions holds the canonical JSON of the create options (Options).
	MetaOptions = "lance-context:context_options"
	// MetaBlob marks a blob column's field ("true"), as generic stores do.
	MetaBlob = "lance-context:blob"
	// MetaPrimaryKey marks the key column, the key Lance reads.
	MetaPrimaryKey = "lance-schema:unenforced-primary-key"
)

// Record states.
const (
	// ContentTypeTombstone is the content_type of a deleted record's row (same id):
	// reads never return it.
	ContentTypeTombstone = "application/x-lance-context-tombstone"
	// StatusActive is the default lifecycle_status.
	StatusActive = "active"
	// StatusRetired marks a record retired by a client.
	StatusRetired = "retired"
	// StatusSuperseded marks a record an upsert replaced (superseded_by_id says by
	// what); it counts as retired for reads.
	StatusSuperseded = "superseded"
	// DefaultRole and DefaultContentType fill a record that does not say.
	DefaultRole        = "user"
	DefaultContentType = "text/plain"
)

// Option values and limits.
const (
	DefaultEmbeddingDim = 1536
	MaxEmbeddingDim     = 65536
	MetricL2            = "l2"
	MetricCosine        = "cosine"
	MetricDot           = "dot"
	IDIndexNone         = "none"
	IDIndexZonemap      = "zonemap"
	IDIndexBTree        = "btree"
)

// Options are a store's create options, persisted in its schema metadata: a table
// opened with other options than it was created with is refused.
type Options struct {
	EmbeddingDim   int      `json:"embedding_dim"`
	DistanceMetric string   `json:"distance_metric"`
	IDIndexType    string   `json:"id_index_type"`
	BlobColumns    []string `json:"blob_columns"`
}

// ParseOptions checks a create request's options and fills the defaults. Every
// error is a 400 *api.Error naming the field.
func ParseOptions(req *api.CreateContextStoreRequest) (Options, error) {
	o := Options{EmbeddingDim: DefaultEmbeddingDim, DistanceMetric: MetricL2, IDIndexType: IDIndexNone, BlobColumns: []string{}}
	if req.EmbeddingDim != nil {
		if d := *req.EmbeddingDim; d < 1 || d > MaxEmbeddingDim {
			return Options{}, api.InvalidRequest("embedding_dim: %d is out of range; it must be 1 to %d", d, MaxEmbeddingDim)
		}
		o.EmbeddingDim = *req.EmbeddingDim
	}
	if req.DistanceMetric != nil {
		switch m := *req.DistanceMetric; m {
		case MetricL2, MetricCosine, MetricDot:
			o.DistanceMetric = m
		default:
			return Options{}, api.InvalidRequest("distance_metric: %s is not one of l2, cosine, dot", api.QuoteTrunc(m, 40))
		}
	}
	if req.IDIndexType != nil {
		switch t := *req.IDIndexType; t {
		case IDIndexNone, IDIndexZonemap, IDIndexBTree:
			o.IDIndexType = t
		default:
			return Options{}, api.InvalidRequest("id_index_type: %s is not one of none, zonemap, btree", api.QuoteTrunc(t, 40))
		}
	}
	for i, c := range req.BlobColumns {
		if c != ColTextPayload && c != ColBinaryPayload {
			return Options{}, api.InvalidRequest("blob_columns[%d]: %s is not text_payload or binary_payload", i, api.QuoteTrunc(c, 60))
		}
		if slices.Contains(o.BlobColumns, c) {
			return Options{}, api.InvalidRequest("blob_columns[%d]: %s is listed twice", i, c)
		}
		o.BlobColumns = append(o.BlobColumns, c)
	}
	slices.Sort(o.BlobColumns)
	return o, nil
}

// IsBlob reports whether column c is one of the store's blob columns.
func (o Options) IsBlob(c string) bool { return slices.Contains(o.BlobColumns, c) }

// Diff describes how o differs from other ("" when equal), for a 409's message.
func (o Options) Diff(other Options) string {
	var d []string
	if o.EmbeddingDim != other.EmbeddingDim {
		d = append(d, fmt.Sprintf("embedding_dim %d, not %d", o.EmbeddingDim, other.EmbeddingDim))
	}
	if o.DistanceMetric != other.DistanceMetric {
		d = append(d, fmt.Sprintf("distance_metric %s, not %s", o.DistanceMetric, other.DistanceMetric))
	}
	if o.IDIndexType != other.IDIndexType {
		d = append(d, fmt.Sprintf("id_index_type %s, not %s", o.IDIndexType, other.IDIndexType))
	}
	if !slices.Equal(o.BlobColumns, other.BlobColumns) {
		d = append(d, fmt.Sprintf("blob_columns %v, not %v", o.BlobColumns, other.BlobColumns))
	}
	return strings.Join(d, "; ")
}

// Arrow types of the record columns.
var (
	roleType      = &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}
	timestampType = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}
	stateType     = arrow.StructOf(
		arrow.Field{Name: "step", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		arrow.Field{Name: "active_plan_id", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "tokens_used", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		arrow.Field{Name: "custom", Type: arrow.BinaryTypes.String, Nullable: true},
	)
	relStruct = arrow.StructOf(
		arrow.Field{Name: "target_id", Type: arrow.BinaryTypes.String},
		arrow.Field{Name: "relation", Type: arrow.BinaryTypes.String},
		arrow.Field{Name: "weight", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
	)
	relList = arrow.ListOfField(arrow.Field{Name: "item", Type: relStruct, Nullable: true})
)

// EmbeddingType is the embedding column's type for dimension dim: what LanceDB
// recognises as a vector column.
func EmbeddingType(dim int) *arrow.FixedSizeListType {
	return arrow.FixedSizeListOfField(int32(dim), arrow.Field{Name: "item", Type: arrow.PrimitiveTypes.Float32, Nullable: true})
}

// Schema is the record table's schema for the options, with the options in its
// metadata and the primary-key mark on id.
func Schema(o Options) *arrow.Schema {
	str, large := arrow.BinaryTypes.String, arrow.BinaryTypes.LargeString
	blob := func(c string) arrow.Metadata {
		if o.IsBlob(c) {
			return arrow.NewMetadata([]string{MetaBlob}, []string{"true"})
		}
		return arrow.Metadata{}
	}
	opts, _ := json.Marshal(o) // plain struct: cannot fail
	return arrow.NewSchema([]arrow.Field{
		{Name: ColID, Type: str, Metadata: arrow.NewMetadata([]string{MetaPrimaryKey}, []string{"true"})},
		{Name: ColRunID, Type: str},
		{Name: ColBotID, Type: str, Nullable: true},
		{Name: ColSessionID, Type: str, Nullable: true},
		{Name: ColCreatedAt, Type: timestampType},
		{Name: ColRole, Type: roleType},
		{Name: ColStateMetadata, Type: stateType, Nullable: true},
		{Name: ColContentType, Type: str},
		{Name: ColTextPayload, Type: large, Nullable: true, Metadata: blob(ColTextPayload)},
		{Name: ColBinaryPayload, Type: arrow.BinaryTypes.LargeBinary, Nullable: true, Metadata: blob(ColBinaryPayload)},
		{Name: ColEmbedding, Type: EmbeddingType(o.EmbeddingDim), Nullable: true},
		{Name: ColExternalID, Type: str, Nullable: true},
		{Name: ColTenant, Type: str, Nullable: true},
		{Name: ColSource, Type: str, Nullable: true},
		{Name: ColPayloadURI, Type: str, Nullable: true},
		{Name: ColPayloadSize, Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: ColPayloadChecksum, Type: str, Nullable: true},
		{Name: ColMetadata, Type: large, Nullable: true},
		{Name: ColRelationships, Type: relList, Nullable: true},
		{Name: ColExpiresAt, Type: timestampType, Nullable: true},
		{Name: ColRetentionPolicy, Type: str, Nullable: true},
		{Name: ColLifecycleStatus, Type: str},
		{Name: ColRetiredAt, Type: timestampType, Nullable: true},
		{Name: ColRetiredReason, Type: str, Nullable: true},
		{Name: ColSupersedesID, Type: str, Nullable: true},
		{Name: ColSupersededByID, Type: str, Nullable: true},
	}, func() *arrow.Metadata {
		md := arrow.NewMetadata([]string{MetaOptions}, []string{string(opts)})
		return &md
	}())
}

// FromArrow reads the options a table was created with and checks that its columns
// are the record schema of those options (names, types, nullability, order): another
// tool's table, or one whose embedding dimension was changed, is refused.
func FromArrow(sch *arrow.Schema) (Options, error) {
	raw, ok := sch.Metadata().GetValue(MetaOptions)
	if !ok {
		return Options{}, fmt.Errorf("ctxstore: the schema has no %s metadata: not a context store", MetaOptions)
	}
	var o Options
	if err := json.Unmarshal([]byte(raw), &o); err != nil {
		return Options{}, fmt.Errorf("ctxstore: bad %s metadata: %w", MetaOptions, err)
	}
	if o.BlobColumns == nil {
		o.BlobColumns = []string{}
	}
	want := Schema(o)
	if sch.NumFields() != want.NumFields() {
		return Options{}, fmt.Errorf("ctxstore: the table has %d columns; the record schema has %d", sch.NumFields(), want.NumFields())
	}
	for i, f := range want.Fields() {
		g := sch.Field(i)
		if g.Name != f.Name || !arrow.TypeEqual(g.Type, f.Type) || g.Nullable != f.Nullable {
			return Options{}, fmt.Errorf("ctxstore: column %d is %s %s (nullable %t); the record schema (embedding_dim %d) has %s %s (nullable %t)",
				i, g.Name, g.Type, g.Nullable, o.EmbeddingDim, f.Name, f.Type, f.Nullable)
		}
	}
	return o, nil
}

// Projection is the columns reads return by default: every column but the blob
// columns (and, without relationships, the relationships column).
func (o Options) Projection(relationships bool) []string {
	var out []string
	for _, f := range Schema(o).Fields() {
		if o.IsBlob(f.Name) || (!relationships && f.Name == ColRelationships) {
			continue
		}
		out = append(out, f.Name)
	}
	return out
}
