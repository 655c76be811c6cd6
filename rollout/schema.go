package rollout

import (
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/google/uuid"
)

// KeyColumn is the primary key of a rollout dataset: reads keep the newest row per
// id, and merges delete older copies of a retried id.
const KeyColumn = "id"

// Column names of the rollout schema, in the order Schema lists them.
const (
	ColID                = "id"
	ColRolloutID         = "rollout_id"
	ColProblemID         = "problem_id"
	ColDataset           = "dataset"
	ColSequenceOrder     = "sequence_order"
	ColRole              = "role"
	ColCreatedAt         = "created_at"
	ColContent           = "content"
	ColContentType       = "content_type"
	ColModelInputString  = "model_input_string"
	ColModelOutputString = "model_output_string"
	ColRationale         = "rationale"
	ColProblemText       = "problem_text"
	ColUserMetadata      = "user_metadata"
	ColInputTokens       = "input_tokens"
	ColOutputTokens      = "output_tokens"
	ColNumInputTokens    = "num_input_tokens"
	ColNumOutputTokens   = "num_output_tokens"
	ColOutputLogprobs    = "output_logprobs"
	ColInputLogprobs     = "input_logprobs"
	ColRefLogprobs       = "ref_logprobs"
	ColLossMask          = "loss_mask"
	ColAdvantage         = "advantage"
	ColReward            = "reward"
	ColRawReward         = "raw_reward"
	ColGraderID          = "grader_id"
	ColScore             = "score"
	ColIncludeInTraining = "include_in_training"
	ColExcludeReason     = "exclude_reason"
	ColPolicyVersion     = "policy_version"
	ColRelationships     = "relationships"
	ColBinaryPayload     = "binary_payload"
	ColPayloadSize       = "payload_size"
	ColPayloadChecksum   = "payload_checksum"
	ColArtifactType      = "artifact_type"
	ColMetadata          = "metadata"
)

// Well-known roles. Role is free text (see MaxRoleLen); these are the ones the
// reference system names.
const (
	RoleArtifact  = "artifact"
	RoleAssistant = "assistant"
	RoleGrade     = "grade"
	RoleTool      = "tool"
)

// Defaults applied to an appended record that leaves the field out.
const (
	DefaultRole        = RoleAssistant
	DefaultContentType = "text/plain"
)

// MetaPrimaryKey is the Arrow field metadata key that marks the key column, the same
// key Lance reads (lance-schema:unenforced-primary-key).
const MetaPrimaryKey = "lance-schema:unenforced-primary-key"

// NamespaceShard is the UUIDv5 namespace of WAL shard ids, the same as the reference
// system's, so a worker with the same id maps to the same shard in both.
var NamespaceShard = uuid.NameSpaceOID

// ShardID is the WAL shard id of a worker: UUIDv5(NamespaceShard, workerID), so a
// restarted worker with a stable id (a StatefulSet pod name) resumes its own shard.
// An empty workerID maps to "default", as in the reference system.
func ShardID(workerID string) string {
	if workerID == "" {
		workerID = "default"
	}
	return uuid.NewSHA1(NamespaceShard, []byte(workerID)).String()
}

// Arrow types of the rollout columns.
var (
	roleType      = &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}
	timestampType = &arrow.TimestampType{Unit: arrow.Microsecond}
	int32List     = arrow.ListOfField(arrow.Field{Name: "item", Type: arrow.PrimitiveTypes.Int32, Nullable: true})
	float32List   = arrow.ListOfField(arrow.Field{Name: "item", Type: arrow.PrimitiveTypes.Float32, Nullable: true})
	int8List      = arrow.ListOfField(arrow.Field{Name: "item", Type: arrow.PrimitiveTypes.Int8, Nullable: true})
	relStruct     = arrow.StructOf(
		arrow.Field{Name: "target_id", Type: arrow.BinaryTypes.String},
		arrow.Field{Name: "relation", Type: arrow.BinaryTypes.String},
		arrow.Field{Name: "weight", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
	)
	relList = arrow.ListOfField(arrow.Field{Name: "item", Type: relStruct, Nullable: true})
)

// schema is built once; *arrow.Schema is immutable, so sharing it is safe.
var rolloutSchema = buildSchema()

func buildSchema() *arrow.Schema {
	str := arrow.BinaryTypes.String
	large := arrow.BinaryTypes.LargeString
	f32 := arrow.PrimitiveTypes.Float32
	i32 := arrow.PrimitiveTypes.Int32
	return arrow.NewSchema([]arrow.Field{
		{Name: ColID, Type: str, Metadata: arrow.NewMetadata([]string{MetaPrimaryKey}, []string{"true"})},
		{Name: ColRolloutID, Type: str},
		{Name: ColProblemID, Type: str},
		{Name: ColDataset, Type: str, Nullable: true},
		{Name: ColSequenceOrder, Type: i32},
		{Name: ColRole, Type: roleType},
		{Name: ColCreatedAt, Type: timestampType},
		{Name: ColContent, Type: large, Nullable: true},
		{Name: ColContentType, Type: str},
		{Name: ColModelInputString, Type: large, Nullable: true},
		{Name: ColModelOutputString, Type: large, Nullable: true},
		{Name: ColRationale, Type: large, Nullable: true},
		{Name: ColProblemText, Type: large, Nullable: true},
		{Name: ColUserMetadata, Type: large, Nullable: true},
		{Name: ColInputTokens, Type: int32List, Nullable: true},
		{Name: ColOutputTokens, Type: int32List, Nullable: true},
		{Name: ColNumInputTokens, Type: i32, Nullable: true},
		{Name: ColNumOutputTokens, Type: i32, Nullable: true},
		{Name: ColOutputLogprobs, Type: float32List, Nullable: true},
		{Name: ColInputLogprobs, Type: float32List, Nullable: true},
		{Name: ColRefLogprobs, Type: float32List, Nullable: true},
		{Name: ColLossMask, Type: int8List, Nullable: true},
		{Name: ColAdvantage, Type: f32, Nullable: true},
		{Name: ColReward, Type: f32, Nullable: true},
		{Name: ColRawReward, Type: f32, Nullable: true},
		{Name: ColGraderID, Type: str, Nullable: true},
		{Name: ColScore, Type: f32, Nullable: true},
		{Name: ColIncludeInTraining, Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: ColExcludeReason, Type: str, Nullable: true},
		{Name: ColPolicyVersion, Type: str, Nullable: true},
		{Name: ColRelationships, Type: relList, Nullable: true},
		{Name: ColBinaryPayload, Type: arrow.BinaryTypes.LargeBinary, Nullable: true},
		{Name: ColPayloadSize, Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: ColPayloadChecksum, Type: str, Nullable: true},
		{Name: ColArtifactType, Type: str, Nullable: true},
		{Name: ColMetadata, Type: large, Nullable: true},
	}, nil)
}

// Schema is the latest rollout schema, in the column order new datasets are created
// with. Older datasets may lack some nullable columns; the worker adds them (all
// null) on open, and ToBatch accepts either. The returned schema is shared and
// immutable.
func Schema() *arrow.Schema { return rolloutSchema }

// DefaultReadColumns are the columns a read returns unless it names others: every
// column of s but binary_payload, which only the blob route materializes.
func DefaultReadColumns(s *arrow.Schema) []string {
	if s == nil {
		s = rolloutSchema
	}
	out := make([]string, 0, s.NumFields())
	for _, f := range s.Fields() {
		if f.Name != ColBinaryPayload {
			out = append(out, f.Name)
		}
	}
	return out
}
