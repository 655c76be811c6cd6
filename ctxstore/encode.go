package ctxstore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/google/uuid"

	"github.com/lancectx/lancectx/api"
)

// Limits of a record's fields (bytes).
const (
	MaxShortField    = 1024 // role, content_type, lifecycle_status, retention_policy, ...
	MaxMetadataBytes = 1 << 20
	MaxRelationships = 1024
)

// NewID returns a fresh record id (a random UUID, as the reference).
func NewID() string { return uuid.NewString() }

// Normalize checks the i-th record of a write (field names in errors are
// records[i].field) and returns it as stored: id and created_at filled when absent,
// role, content_type and lifecycle_status defaulted, metadata compacted. Every error
// is a 400 *api.Error. A record may not set the supersede chain; upserts do.
func Normalize(field string, in *api.AddContextRecord, now time.Time, o Options) (api.ContextRecord, error) {
	r := api.ContextRecord{ID: in.ID, ContextRecordFields: in.ContextRecordFields}
	if r.ID == "" {
		r.ID = NewID()
	} else if err := api.ValidateIDField(field+".id", r.ID); err != nil {
		return r, err
	}
	if in.CreatedAt != nil {
		r.CreatedAt = in.CreatedAt.UTC()
	} else {
		r.CreatedAt = now.UTC()
	}
	if err := checkTime(field+".created_at", r.CreatedAt); err != nil {
		return r, err
	}
	if err := api.ValidateIDField(field+".run_id", r.RunID); err != nil {
		return r, err
	}
	if r.Role == "" {
		r.Role = DefaultRole
	}
	if r.ContentType == "" {
		r.ContentType = DefaultContentType
	}
	if r.ContentType == ContentTypeTombstone {
		return r, api.InvalidRequest("%s.content_type: %s is reserved for deleted records; delete the record instead", field, ContentTypeTombstone)
	}
	if r.LifecycleStatus == "" {
		r.LifecycleStatus = StatusActive
	}
	if r.LifecycleStatus == StatusSuperseded {
		return r, api.InvalidRequest("%s.lifecycle_status: %s is set by upserts only", field, StatusSuperseded)
	}
	shorts := []struct {
		name string
		v    *string
	}{{"role", &r.Role}, {"content_type", &r.ContentType}, {"lifecycle_status", &r.LifecycleStatus},
		{"bot_id", r.BotID}, {"session_id", r.SessionID}, {"external_id", r.ExternalID}, {"tenant", r.Tenant}, {"source", r.Source},
		{"payload_checksum", r.PayloadChecksum}, {"retention_policy", r.RetentionPolicy}, {"retired_reason", r.RetiredReason}}
	for _, s := range shorts {
		if s.v == nil {
			continue
		}
		if err := api.ValidateIDField(field+"."+s.name, *s.v); err != nil {
			return r, err
		}
		if len(*s.v) > MaxShortField {
			return r, api.InvalidRequest("%s.%s: is %d bytes long; the limit is %d", field, s.name, len(*s.v), MaxShortField)
		}
	}
	if r.PayloadURI != nil && *r.PayloadURI == "" {
		return r, api.InvalidRequest("%s.payload_uri: must not be empty", field)
	}
	if r.PayloadSize != nil && *r.PayloadSize < 0 {
		return r, api.InvalidRequest("%s.payload_size: %d is negative", field, *r.PayloadSize)
	}
	if r.Embedding != nil {
		if len(r.Embedding) != o.EmbeddingDim {
			return r, api.InvalidRequest("%s.embedding: has %d values; the store's embedding_dim is %d", field, len(r.Embedding), o.EmbeddingDim)
		}
		for j, v := range r.Embedding {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return r, api.InvalidRequest("%s.embedding[%d]: not a finite number", field, j)
			}
		}
	}
	if r.Metadata != nil {
		m, err := compactObject(field+".metadata", r.Metadata)
		if err != nil {
			return r, err
		}
		r.Metadata = m
	}
	if len(r.Relationships) > MaxRelationships {
		return r, api.InvalidRequest("%s.relationships: %d entries; the limit is %d", field, len(r.Relationships), MaxRelationships)
	}
	for j, rel := range r.Relationships {
		f := fmt.Sprintf("%s.relationships[%d]", field, j)
		if err := api.ValidateIDField(f+".target_id", rel.TargetID); err != nil {
			return r, err
		}
		if err := api.ValidateIDField(f+".relation", rel.Relation); err != nil {
			return r, err
		}
		if rel.Weight != nil && (math.IsNaN(float64(*rel.Weight)) || math.IsInf(float64(*rel.Weight), 0)) {
			return r, api.InvalidRequest("%s.weight: not a finite number", f)
		}
	}
	for _, t := range []struct {
		name string
		v    *time.Time
	}{{"expires_at", r.ExpiresAt}, {"retired_at", r.RetiredAt}} {
		if t.v != nil {
			u := t.v.UTC()
			*t.v = u
			if err := checkTime(field+"."+t.name, u); err != nil {
				return r, err
			}
		}
	}
	return r, nil
}

// checkTime refuses times a microsecond timestamp cannot hold.
func checkTime(field string, t time.Time) error {
	if t.Year() < 1 || t.Year() > 9999 {
		return api.InvalidRequest("%s: year %d is out of range (1 to 9999)", field, t.Year())
	}
	return nil
}

// compactObject checks that raw is a JSON object (at most MaxMetadataBytes) and
// returns it compacted.
func compactObject(field string, raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) > MaxMetadataBytes {
		return nil, api.InvalidRequest("%s: is %d bytes; the limit is %d", field, len(raw), MaxMetadataBytes)
	}
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || t[0] != '{' {
		return nil, api.InvalidRequest("%s: must be a JSON object", field)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, t); err != nil {
		return nil, api.InvalidRequest("%s: %v", field, err)
	}
	return buf.Bytes(), nil
}

// ToRecord builds the Arrow rows of recs (the store's schema for o). It fails only
// when a batch holds more than 127 distinct roles (the role dictionary's Int8 index):
// a 400.
func ToRecord(recs []api.ContextRecord, o Options) (arrow.RecordBatch, error) {
	sch := Schema(o)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
	defer b.Release()
	str := func(i int) *array.StringBuilder { return b.Field(i).(*array.StringBuilder) }
	optStr := func(i int, v *string) {
		if v == nil {
			b.Field(i).AppendNull()
		} else {
			str(i).Append(*v)
		}
	}
	ts := func(i int, t *time.Time) {
		if t == nil {
			b.Field(i).AppendNull()
		} else {
			b.Field(i).(*array.TimestampBuilder).Append(arrow.Timestamp(t.UnixMicro()))
		}
	}
	idx := map[string]int{}
	for i, f := range sch.Fields() {
		idx[f.Name] = i
	}
	roles := map[string]bool{}
	for i := range recs {
		r := &recs[i]
		str(idx[ColID]).Append(r.ID)
		str(idx[ColRunID]).Append(r.RunID)
		optStr(idx[ColBotID], r.BotID)
		optStr(idx[ColSessionID], r.SessionID)
		ts(idx[ColCreatedAt], &r.CreatedAt)
		roles[r.Role] = true
		if len(roles) > 127 {
			return nil, api.InvalidRequest("a write holds more than 127 distinct roles; split it")
		}
		if err := b.Field(idx[ColRole]).(*array.BinaryDictionaryBuilder).AppendString(r.Role); err != nil {
			return nil, fmt.Errorf("ctxstore: role: %w", err)
		}
		sb := b.Field(idx[ColStateMetadata]).(*array.StructBuilder)
		if r.StateMetadata == nil {
			sb.AppendNull()
		} else {
			sb.Append(true)
			sm := r.StateMetadata
			appendI32(sb.FieldBuilder(0).(*array.Int32Builder), sm.Step)
			appendStr(sb.FieldBuilder(1).(*array.StringBuilder), sm.ActivePlanID)
			appendI32(sb.FieldBuilder(2).(*array.Int32Builder), sm.TokensUsed)
			appendStr(sb.FieldBuilder(3).(*array.StringBuilder), sm.Custom)
		}
		str(idx[ColContentType]).Append(r.ContentType)
		if r.TextPayload == nil {
			b.Field(idx[ColTextPayload]).AppendNull()
		} else {
			b.Field(idx[ColTextPayload]).(*array.LargeStringBuilder).Append(*r.TextPayload)
		}
		if r.BinaryPayload == nil {
			b.Field(idx[ColBinaryPayload]).AppendNull()
		} else {
			b.Field(idx[ColBinaryPayload]).(*array.BinaryBuilder).Append(r.BinaryPayload)
		}
		eb := b.Field(idx[ColEmbedding]).(*array.FixedSizeListBuilder)
		if r.Embedding == nil {
			eb.AppendNull()
		} else {
			eb.Append(true)
			eb.ValueBuilder().(*array.Float32Builder).AppendValues(r.Embedding, nil)
		}
		optStr(idx[ColExternalID], r.ExternalID)
		optStr(idx[ColTenant], r.Tenant)
		optStr(idx[ColSource], r.Source)
		optStr(idx[ColPayloadURI], r.PayloadURI)
		if r.PayloadSize == nil {
			b.Field(idx[ColPayloadSize]).AppendNull()
		} else {
			b.Field(idx[ColPayloadSize]).(*array.Int64Builder).Append(*r.PayloadSize)
		}
		optStr(idx[ColPayloadChecksum], r.PayloadChecksum)
		if r.Metadata == nil {
			b.Field(idx[ColMetadata]).AppendNull()
		} else {
			b.Field(idx[ColMetadata]).(*array.LargeStringBuilder).Append(string(r.Metadata))
		}
		lb := b.Field(idx[ColRelationships]).(*array.ListBuilder)
		if r.Relationships == nil {
			lb.AppendNull()
		} else {
			lb.Append(true)
			rb := lb.ValueBuilder().(*array.StructBuilder)
			for _, rel := range r.Relationships {
				rb.Append(true)
				rb.FieldBuilder(0).(*array.StringBuilder).Append(rel.TargetID)
				rb.FieldBuilder(1).(*array.StringBuilder).Append(rel.Relation)
				if rel.Weight == nil {
					rb.FieldBuilder(2).AppendNull()
				} else {
					rb.FieldBuilder(2).(*array.Float32Builder).Append(*rel.Weight)
				}
			}
		}
		ts(idx[ColExpiresAt], r.ExpiresAt)
		optStr(idx[ColRetentionPolicy], r.RetentionPolicy)
		str(idx[ColLifecycleStatus]).Append(r.LifecycleStatus)
		ts(idx[ColRetiredAt], r.RetiredAt)
		optStr(idx[ColRetiredReason], r.RetiredReason)
		optStr(idx[ColSupersedesID], r.SupersedesID)
		optStr(idx[ColSupersededByID], r.SupersededByID)
	}
	return b.NewRecordBatch(), nil
}

func appendI32(b *array.Int32Builder, v *int32) {
	if v == nil {
		b.AppendNull()
	} else {
		b.Append(*v)
	}
}

func appendStr(b *array.StringBuilder, v *string) {
	if v == nil {
		b.AppendNull()
	} else {
		b.Append(*v)
	}
}
