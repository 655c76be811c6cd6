package rollout

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/lancectx/lancectx/api"
)

// Limits of individual fields.
const (
	// MaxRoleLen bounds role, a dictionary-encoded column meant for a handful of values.
	MaxRoleLen = 64
	// MaxDistinctRoles is how many different roles one batch may carry: role is
	// Dictionary(Int8, Utf8), whose indices address 128 values.
	MaxDistinctRoles = 128
	// MaxContentTypeLen bounds content_type.
	MaxContentTypeLen = 255
	// MaxRelationLen bounds a relationship's relation name.
	MaxRelationLen = 256
)

// wireRecord is what the JSON of one record may hold. Every field is a pointer (or a
// nil-able slice) so a left-out field is told apart from a zero value, and the
// strict decoder refuses null where the Go type has none (inside number lists).
type wireRecord struct {
	ID                *string            `json:"id"`
	RolloutID         *string            `json:"rollout_id"`
	ProblemID         *string            `json:"problem_id"`
	Dataset           *string            `json:"dataset"`
	SequenceOrder     *int32             `json:"sequence_order"`
	Role              *string            `json:"role"`
	CreatedAt         *string            `json:"created_at"`
	Content           *string            `json:"content"`
	ContentType       *string            `json:"content_type"`
	ModelInputString  *string            `json:"model_input_string"`
	ModelOutputString *string            `json:"model_output_string"`
	Rationale         *string            `json:"rationale"`
	ProblemText       *string            `json:"problem_text"`
	UserMetadata      *string            `json:"user_metadata"`
	InputTokens       []int32            `json:"input_tokens"`
	OutputTokens      []int32            `json:"output_tokens"`
	NumInputTokens    *int32             `json:"num_input_tokens"`
	NumOutputTokens   *int32             `json:"num_output_tokens"`
	OutputLogprobs    []float32          `json:"output_logprobs"`
	InputLogprobs     []float32          `json:"input_logprobs"`
	RefLogprobs       []float32          `json:"ref_logprobs"`
	LossMask          []int8             `json:"loss_mask"`
	Advantage         *float32           `json:"advantage"`
	Reward            *float32           `json:"reward"`
	RawReward         *float32           `json:"raw_reward"`
	GraderID          *string            `json:"grader_id"`
	Score             *float32           `json:"score"`
	IncludeInTraining *bool              `json:"include_in_training"`
	ExcludeReason     *string            `json:"exclude_reason"`
	PolicyVersion     *string            `json:"policy_version"`
	Relationships     []wireRelationship `json:"relationships"`
	BinaryPayload     *string            `json:"binary_payload"`
	PayloadSize       *int64             `json:"payload_size"`
	PayloadChecksum   *string            `json:"payload_checksum"`
	ArtifactType      *string            `json:"artifact_type"`
	Metadata          json.RawMessage    `json:"metadata"`
}

type wireRelationship struct {
	TargetID *string  `json:"target_id"`
	Relation *string  `json:"relation"`
	Weight   *float32 `json:"weight"`
}

// appendWire is the body of a JSON append and the metadata part of a multipart one.
type appendWire struct {
	Records *[]wireRecord `json:"records"`
}

// appendDecoder is built once: a JSONDecoder is immutable.
var appendDecoder = api.NewJSONDecoder(&appendWire{})

// fieldErr is the 400 for one field of one record.
func fieldErr(i int, field, format string, args ...any) *api.Error {
	return api.InvalidRequest("records[%d].%s: %s", i, field, fmt.Sprintf(format, args...))
}

// fromWireInto turns the decoded JSON of record i into an AddRecord with defaults
// applied, written into *r, which must be zero (the records of a request are one
// slice, pooled on the append route and cleared when handed back), refusing what the
// schema cannot hold. multipart says the payload comes in a part, so binary_payload
// must be null here.
func fromWireInto(r *AddRecord, i int, w *wireRecord, now time.Time, multipart bool) error {
	if w.ID == nil {
		return fieldErr(i, "id", "required")
	}
	if err := validID(*w.ID, func() string { return fmt.Sprintf("records[%d].id", i) }); err != nil {
		return err
	}
	if w.RolloutID == nil {
		return fieldErr(i, "rollout_id", "required")
	}
	if err := validID(*w.RolloutID, func() string { return fmt.Sprintf("records[%d].rollout_id", i) }); err != nil {
		return err
	}
	r.ID, r.RolloutID = *w.ID, *w.RolloutID
	r.ProblemID = r.RolloutID
	if w.ProblemID != nil {
		if err := validID(*w.ProblemID, func() string { return fmt.Sprintf("records[%d].problem_id", i) }); err != nil {
			return err
		}
		r.ProblemID = *w.ProblemID
	}
	r.Role = DefaultRole
	if w.Role != nil {
		if msg := checkShortText(*w.Role, MaxRoleLen); msg != "" {
			return fieldErr(i, "role", "%s", msg)
		}
		r.Role = *w.Role
	}
	r.ContentType = DefaultContentType
	if w.ContentType != nil {
		if msg := checkShortText(*w.ContentType, MaxContentTypeLen); msg != "" {
			return fieldErr(i, "content_type", "%s", msg)
		}
		r.ContentType = *w.ContentType
	}
	r.CreatedAt = now
	if w.CreatedAt != nil {
		t, err := time.Parse(time.RFC3339Nano, *w.CreatedAt)
		if err != nil {
			return fieldErr(i, "created_at", "%s is not an RFC 3339 timestamp (like 2024-05-01T12:00:00Z)", quote(*w.CreatedAt, 40))
		}
		r.CreatedAt = t
	}
	r.CreatedAt = r.CreatedAt.UTC().Truncate(time.Microsecond)
	if w.SequenceOrder != nil {
		r.SequenceOrder = *w.SequenceOrder
	}
	for _, f := range [...]struct {
		name string
		v    *int32
	}{{"num_input_tokens", w.NumInputTokens}, {"num_output_tokens", w.NumOutputTokens}} {
		if f.v != nil && *f.v < 0 {
			return fieldErr(i, f.name, "must not be negative, got %d", *f.v)
		}
	}
	r.NumInputTokens, r.NumOutputTokens = w.NumInputTokens, w.NumOutputTokens

	r.Dataset, r.Content = w.Dataset, w.Content
	r.ModelInputString, r.ModelOutputString = w.ModelInputString, w.ModelOutputString
	r.Rationale, r.ProblemText, r.UserMetadata = w.Rationale, w.ProblemText, w.UserMetadata
	r.InputTokens, r.OutputTokens = w.InputTokens, w.OutputTokens
	r.OutputLogprobs, r.InputLogprobs, r.RefLogprobs = w.OutputLogprobs, w.InputLogprobs, w.RefLogprobs
	r.LossMask = w.LossMask
	r.Advantage, r.Reward, r.RawReward, r.Score = w.Advantage, w.Reward, w.RawReward, w.Score
	r.GraderID, r.IncludeInTraining = w.GraderID, w.IncludeInTraining
	r.ExcludeReason, r.PolicyVersion = w.ExcludeReason, w.PolicyVersion
	r.PayloadChecksum, r.ArtifactType = w.PayloadChecksum, w.ArtifactType

	if w.Relationships != nil {
		r.Relationships = make([]Relationship, len(w.Relationships))
		for j, wr := range w.Relationships {
			field := fmt.Sprintf("relationships[%d]", j)
			if wr.TargetID == nil {
				return fieldErr(i, field+".target_id", "required")
			}
			if err := validID(*wr.TargetID, func() string { return fmt.Sprintf("records[%d].%s.target_id", i, field) }); err != nil {
				return err
			}
			if wr.Relation == nil {
				return fieldErr(i, field+".relation", "required")
			}
			if msg := checkShortText(*wr.Relation, MaxRelationLen); msg != "" {
				return fieldErr(i, field+".relation", "%s", msg)
			}
			r.Relationships[j] = Relationship{TargetID: *wr.TargetID, Relation: *wr.Relation, Weight: wr.Weight}
		}
	}

	if w.PayloadSize != nil && *w.PayloadSize < 0 {
		return fieldErr(i, "payload_size", "must not be negative, got %d", *w.PayloadSize)
	}
	r.PayloadSize = w.PayloadSize
	if w.BinaryPayload != nil {
		if multipart {
			return fieldErr(i, "binary_payload", "must be null in a multipart request; send the bytes as part %q", fmt.Sprint(i))
		}
		b, err := decodeBase64(*w.BinaryPayload)
		if err != nil {
			return fieldErr(i, "binary_payload", "%v", err)
		}
		if r.PayloadSize != nil && *r.PayloadSize != int64(len(b)) {
			return fieldErr(i, "payload_size", "is %d but binary_payload decodes to %d bytes", *r.PayloadSize, len(b))
		}
		if r.PayloadSize == nil {
			n := int64(len(b))
			r.PayloadSize = &n
		}
		r.BinaryPayload = b
	}

	if len(w.Metadata) > 0 && !bytes.Equal(w.Metadata, []byte("null")) {
		var buf bytes.Buffer
		buf.Grow(len(w.Metadata))
		if err := json.Compact(&buf, w.Metadata); err != nil {
			return fieldErr(i, "metadata", "invalid JSON")
		}
		r.Metadata = buf.Bytes()
	}
	return nil
}

// decodeBase64 decodes standard base64 with padding and refuses what the standard
// decoder would let through: line breaks, and non-zero bits in the final padding.
func decodeBase64(s string) ([]byte, error) {
	if i := strings.IndexAny(s, "\r\n"); i >= 0 {
		return nil, fmt.Errorf("invalid base64: line break at byte %d (use standard base64 without line breaks)", i)
	}
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil {
		var ce base64.CorruptInputError
		if errors.As(err, &ce) {
			return nil, fmt.Errorf("invalid base64 at byte %d (standard alphabet with '=' padding expected)", int64(ce))
		}
		return nil, fmt.Errorf("invalid base64")
	}
	return b, nil
}

// checkShortText checks a short label (role, content_type, relation): non-empty,
// at most max bytes, no control characters. "" means fine.
func checkShortText(s string, max int) string {
	if s == "" {
		return "must not be empty"
	}
	if len(s) > max {
		return fmt.Sprintf("is %d bytes long; the limit is %d", len(s), max)
	}
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				return fmt.Sprintf("invalid UTF-8 at byte %d", i)
			}
		}
		if unicode.IsControl(r) {
			return fmt.Sprintf("control character U+%04X at byte %d is not allowed", r, i)
		}
	}
	return ""
}

func quote(s string, n int) string {
	if len(s) > n {
		cut := n
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return fmt.Sprintf("%q...", s[:cut])
	}
	return fmt.Sprintf("%q", s)
}

// ValidateRecords checks records that a Go caller built (the decoders already did):
// the same rules as an HTTP append, on records whose defaults are applied. Errors are
// 400 *api.Error values naming the record index and field.
func ValidateRecords(records []AddRecord) error {
	if len(records) == 0 {
		return api.InvalidRequest("records: must contain at least one record")
	}
	roles := map[string]struct{}{}
	for i := range records {
		r := &records[i]
		if err := validID(r.ID, func() string { return fmt.Sprintf("records[%d].id", i) }); err != nil {
			return err
		}
		if err := validID(r.RolloutID, func() string { return fmt.Sprintf("records[%d].rollout_id", i) }); err != nil {
			return err
		}
		if err := validID(r.ProblemID, func() string { return fmt.Sprintf("records[%d].problem_id", i) }); err != nil {
			return err
		}
		if msg := checkShortText(r.Role, MaxRoleLen); msg != "" {
			return fieldErr(i, "role", "%s", msg)
		}
		roles[r.Role] = struct{}{}
		if msg := checkShortText(r.ContentType, MaxContentTypeLen); msg != "" {
			return fieldErr(i, "content_type", "%s", msg)
		}
		if r.CreatedAt.IsZero() {
			return fieldErr(i, "created_at", "not set")
		}
		for _, s := range [...]struct {
			name string
			v    *string
		}{{"dataset", r.Dataset}, {"content", r.Content}, {"model_input_string", r.ModelInputString},
			{"model_output_string", r.ModelOutputString}, {"rationale", r.Rationale}, {"problem_text", r.ProblemText},
			{"user_metadata", r.UserMetadata}, {"grader_id", r.GraderID}, {"exclude_reason", r.ExcludeReason},
			{"policy_version", r.PolicyVersion}, {"payload_checksum", r.PayloadChecksum}, {"artifact_type", r.ArtifactType}} {
			if s.v != nil && !utf8.ValidString(*s.v) {
				return fieldErr(i, s.name, "invalid UTF-8")
			}
		}
		for _, n := range [...]struct {
			name string
			v    *int32
		}{{"num_input_tokens", r.NumInputTokens}, {"num_output_tokens", r.NumOutputTokens}} {
			if n.v != nil && *n.v < 0 {
				return fieldErr(i, n.name, "must not be negative, got %d", *n.v)
			}
		}
		for _, f := range [...]struct {
			name string
			v    *float32
		}{{"advantage", r.Advantage}, {"reward", r.Reward}, {"raw_reward", r.RawReward}, {"score", r.Score}} {
			if f.v != nil && !finite(*f.v) {
				return fieldErr(i, f.name, "must be a finite number")
			}
		}
		for _, l := range [...]struct {
			name string
			v    []float32
		}{{"output_logprobs", r.OutputLogprobs}, {"input_logprobs", r.InputLogprobs}, {"ref_logprobs", r.RefLogprobs}} {
			for j, v := range l.v {
				if !finite(v) {
					return fieldErr(i, fmt.Sprintf("%s[%d]", l.name, j), "must be a finite number")
				}
			}
		}
		for j, rel := range r.Relationships {
			if err := validID(rel.TargetID, func() string { return fmt.Sprintf("records[%d].relationships[%d].target_id", i, j) }); err != nil {
				return err
			}
			if msg := checkShortText(rel.Relation, MaxRelationLen); msg != "" {
				return fieldErr(i, fmt.Sprintf("relationships[%d].relation", j), "%s", msg)
			}
			if rel.Weight != nil && !finite(*rel.Weight) {
				return fieldErr(i, fmt.Sprintf("relationships[%d].weight", j), "must be a finite number")
			}
		}
		if r.PayloadSize != nil {
			if *r.PayloadSize < 0 {
				return fieldErr(i, "payload_size", "must not be negative, got %d", *r.PayloadSize)
			}
			if r.BinaryPayload != nil && *r.PayloadSize != int64(len(r.BinaryPayload)) {
				return fieldErr(i, "payload_size", "is %d but binary_payload has %d bytes", *r.PayloadSize, len(r.BinaryPayload))
			}
		}
		if len(r.Metadata) > 0 && !json.Valid(r.Metadata) {
			return fieldErr(i, "metadata", "invalid JSON")
		}
	}
	if len(roles) > MaxDistinctRoles {
		return api.InvalidRequest("records: %d distinct role values; at most %d per request", len(roles), MaxDistinctRoles)
	}
	return nil
}

// validID is api.ValidateIDField with the field name built only for an error: an
// append checks three ids a row, and formatting their names cost three allocations a
// row.
func validID(id string, field func() string) error {
	if api.ValidateIDField("", id) == nil {
		return nil
	}
	return api.ValidateIDField(field(), id)
}

func finite(v float32) bool {
	f := float64(v)
	return !math.IsNaN(f) && !math.IsInf(f, 0)
}
