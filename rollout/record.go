package rollout

import (
	"encoding/json"
	"math"
	"strconv"
	"time"
)

// AddRecord is one row of an append request (the reference's AddRolloutRequest). The
// decoders return records with the defaults applied (problem_id, role,
// content_type, created_at), validated and with BinaryPayload decoded, ready for
// ToBatch. A Go client can marshal an AddRecord as the request body: empty defaulted
// fields are left out so the server fills them.
//
// Optional fields are pointers or nil slices: nil is null in the dataset, which is not
// the same as "" or an empty list.
type AddRecord struct {
	ID                string          `json:"id"`
	RolloutID         string          `json:"rollout_id"`
	ProblemID         string          `json:"problem_id,omitempty"`
	Dataset           *string         `json:"dataset,omitempty"`
	SequenceOrder     int32           `json:"sequence_order"`
	Role              string          `json:"role,omitempty"`
	CreatedAt         time.Time       `json:"created_at,omitzero"`
	Content           *string         `json:"content,omitempty"`
	ContentType       string          `json:"content_type,omitempty"`
	ModelInputString  *string         `json:"model_input_string,omitempty"`
	ModelOutputString *string         `json:"model_output_string,omitempty"`
	Rationale         *string         `json:"rationale,omitempty"`
	ProblemText       *string         `json:"problem_text,omitempty"`
	UserMetadata      *string         `json:"user_metadata,omitempty"`
	InputTokens       []int32         `json:"input_tokens,omitzero"`
	OutputTokens      []int32         `json:"output_tokens,omitzero"`
	NumInputTokens    *int32          `json:"num_input_tokens,omitempty"`
	NumOutputTokens   *int32          `json:"num_output_tokens,omitempty"`
	OutputLogprobs    []float32       `json:"output_logprobs,omitzero"`
	InputLogprobs     []float32       `json:"input_logprobs,omitzero"`
	RefLogprobs       []float32       `json:"ref_logprobs,omitzero"`
	LossMask          []int8          `json:"loss_mask,omitzero"`
	Advantage         *float32        `json:"advantage,omitempty"`
	Reward            *float32        `json:"reward,omitempty"`
	RawReward         *float32        `json:"raw_reward,omitempty"`
	GraderID          *string         `json:"grader_id,omitempty"`
	Score             *float32        `json:"score,omitempty"`
	IncludeInTraining *bool           `json:"include_in_training,omitempty"`
	ExcludeReason     *string         `json:"exclude_reason,omitempty"`
	PolicyVersion     *string         `json:"policy_version,omitempty"`
	Relationships     []Relationship  `json:"relationships,omitzero"`
	BinaryPayload     []byte          `json:"binary_payload,omitzero"`
	PayloadSize       *int64          `json:"payload_size,omitempty"`
	PayloadChecksum   *string         `json:"payload_checksum,omitempty"`
	ArtifactType      *string         `json:"artifact_type,omitempty"`
	Metadata          json.RawMessage `json:"metadata,omitempty"`
}

// Relationship is one edge from a record to another (by id).
type Relationship struct {
	TargetID string   `json:"target_id"`
	Relation string   `json:"relation"`
	Weight   *float32 `json:"weight,omitempty"`
}

// Record is one row as reads return it (the reference's RolloutRecordDto). problem_id,
// sequence_order, role, created_at and content_type are always present; optional
// fields are left out when null; binary_payload only when the read materialized it
// (list and get never do; the blob route streams it).
type Record struct {
	ID                string          `json:"id"`
	RolloutID         string          `json:"rollout_id"`
	ProblemID         string          `json:"problem_id"`
	Dataset           *string         `json:"dataset,omitempty"`
	SequenceOrder     int32           `json:"sequence_order"`
	Role              string          `json:"role"`
	CreatedAt         time.Time       `json:"created_at"`
	Content           *string         `json:"content,omitempty"`
	ContentType       string          `json:"content_type"`
	ModelInputString  *string         `json:"model_input_string,omitempty"`
	ModelOutputString *string         `json:"model_output_string,omitempty"`
	Rationale         *string         `json:"rationale,omitempty"`
	ProblemText       *string         `json:"problem_text,omitempty"`
	UserMetadata      *string         `json:"user_metadata,omitempty"`
	InputTokens       []int32         `json:"input_tokens,omitzero"`
	OutputTokens      []int32         `json:"output_tokens,omitzero"`
	NumInputTokens    *int32          `json:"num_input_tokens,omitempty"`
	NumOutputTokens   *int32          `json:"num_output_tokens,omitempty"`
	OutputLogprobs    Float32List     `json:"output_logprobs,omitzero"`
	InputLogprobs     Float32List     `json:"input_logprobs,omitzero"`
	RefLogprobs       Float32List     `json:"ref_logprobs,omitzero"`
	LossMask          []int8          `json:"loss_mask,omitzero"`
	Advantage         *float32        `json:"advantage,omitempty"`
	Reward            *float32        `json:"reward,omitempty"`
	RawReward         *float32        `json:"raw_reward,omitempty"`
	GraderID          *string         `json:"grader_id,omitempty"`
	Score             *float32        `json:"score,omitempty"`
	IncludeInTraining *bool           `json:"include_in_training,omitempty"`
	ExcludeReason     *string         `json:"exclude_reason,omitempty"`
	PolicyVersion     *string         `json:"policy_version,omitempty"`
	Relationships     []Relationship  `json:"relationships,omitzero"`
	BinaryPayload     []byte          `json:"binary_payload,omitzero"`
	PayloadSize       *int64          `json:"payload_size,omitempty"`
	PayloadChecksum   *string         `json:"payload_checksum,omitempty"`
	ArtifactType      *string         `json:"artifact_type,omitempty"`
	Metadata          json.RawMessage `json:"metadata,omitempty"`
}

// Float32List is a list of float32 that encodes NaN and ±Inf (which JSON cannot carry,
// but a dataset written by another tool may hold, e.g. a -Inf logprob) as null instead
// of failing the whole response.
type Float32List []float32

// MarshalJSON writes the list with non-finite values as null.
func (l Float32List) MarshalJSON() ([]byte, error) {
	if l == nil {
		return []byte("null"), nil
	}
	b := make([]byte, 0, 2+len(l)*10)
	b = append(b, '[')
	for i, v := range l {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendFloat32(b, v)
	}
	return append(b, ']'), nil
}

// appendFloat32 formats v as encoding/json does for a float32, null when non-finite.
func appendFloat32(b []byte, v float32) []byte {
	f := float64(v)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, "null"...)
	}
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 32)
	if format == 'e' {
		// clean up e-09 to e-9, as encoding/json does
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// ToRecord is the record a read returns for r after it was stored (payload included).
// r must have its defaults applied.
func (r *AddRecord) ToRecord() Record {
	return Record{
		ID: r.ID, RolloutID: r.RolloutID, ProblemID: r.ProblemID, Dataset: r.Dataset,
		SequenceOrder: r.SequenceOrder, Role: r.Role, CreatedAt: r.CreatedAt, Content: r.Content,
		ContentType: r.ContentType, ModelInputString: r.ModelInputString, ModelOutputString: r.ModelOutputString,
		Rationale: r.Rationale, ProblemText: r.ProblemText, UserMetadata: r.UserMetadata,
		InputTokens: r.InputTokens, OutputTokens: r.OutputTokens, NumInputTokens: r.NumInputTokens,
		NumOutputTokens: r.NumOutputTokens, OutputLogprobs: r.OutputLogprobs, InputLogprobs: r.InputLogprobs,
		RefLogprobs: r.RefLogprobs, LossMask: r.LossMask, Advantage: r.Advantage, Reward: r.Reward,
		RawReward: r.RawReward, GraderID: r.GraderID, Score: r.Score, IncludeInTraining: r.IncludeInTraining,
		ExcludeReason: r.ExcludeReason, PolicyVersion: r.PolicyVersion, Relationships: r.Relationships,
		BinaryPayload: r.BinaryPayload, PayloadSize: r.PayloadSize, PayloadChecksum: r.PayloadChecksum,
		ArtifactType: r.ArtifactType, Metadata: r.Metadata,
	}
}
