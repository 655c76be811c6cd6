package ctxstore

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lancectx/lancectx/api"
)

// Rows reads the records of a batch of any projection of the record schema (a
// column left out reads as absent).
type Rows struct {
	rec  arrow.RecordBatch
	cols map[string]arrow.Array
}

// NewRows wraps rec (which the caller keeps and releases).
func NewRows(rec arrow.RecordBatch) *Rows {
	r := &Rows{rec: rec, cols: make(map[string]arrow.Array, rec.NumCols())}
	for i, f := range rec.Schema().Fields() {
		r.cols[f.Name] = rec.Column(i)
	}
	return r
}

// Len is the number of rows.
func (r *Rows) Len() int { return int(r.rec.NumRows()) }

// Has reports whether the batch has column c.
func (r *Rows) Has(c string) bool { return r.cols[c] != nil }

// Str returns string column c at row i (nil when null or absent). Dictionary,
// string and large string columns are read alike.
func (r *Rows) Str(c string, i int) *string {
	a := r.cols[c]
	if a == nil || a.IsNull(i) {
		return nil
	}
	var s string
	switch a := a.(type) {
	case *array.String:
		s = a.Value(i)
	case *array.LargeString:
		s = a.Value(i)
	case *array.Dictionary:
		d := a.Dictionary()
		k := a.GetValueIndex(i)
		switch d := d.(type) {
		case *array.String:
			s = d.Value(k)
		case *array.LargeString:
			s = d.Value(k)
		default:
			return nil
		}
	default:
		return nil
	}
	return &s
}

// String is Str with "" for null.
func (r *Rows) String(c string, i int) string {
	if p := r.Str(c, i); p != nil {
		return *p
	}
	return ""
}

// Time returns timestamp column c at row i (nil when null or absent).
func (r *Rows) Time(c string, i int) *time.Time {
	a, ok := r.cols[c].(*array.Timestamp)
	if !ok || a.IsNull(i) {
		return nil
	}
	unit := a.DataType().(*arrow.TimestampType).Unit
	t := a.Value(i).ToTime(unit).UTC()
	return &t
}

// Embedding returns row i's embedding, a view into the batch (nil when null or
// absent): valid while the batch is.
func (r *Rows) Embedding(i int) []float32 {
	a, ok := r.cols[ColEmbedding].(*array.FixedSizeList)
	if !ok || a.IsNull(i) {
		return nil
	}
	n := int(a.DataType().(*arrow.FixedSizeListType).Len())
	vals := a.ListValues().(*array.Float32).Float32Values()
	off := (a.Offset() + i) * n
	return vals[off : off+n]
}

// Record decodes row i into a wire record (absent columns stay empty).
func (r *Rows) Record(i int) (api.ContextRecord, error) {
	var out api.ContextRecord
	out.ID = r.String(ColID, i)
	if t := r.Time(ColCreatedAt, i); t != nil {
		out.CreatedAt = *t
	}
	out.RunID = r.String(ColRunID, i)
	out.BotID = r.Str(ColBotID, i)
	out.SessionID = r.Str(ColSessionID, i)
	out.Role = r.String(ColRole, i)
	if a, ok := r.cols[ColStateMetadata].(*array.Struct); ok && a.IsValid(i) {
		sm := &api.ContextStateMetadata{}
		for k := 0; k < a.NumField(); k++ {
			f := a.Field(k)
			if f.IsNull(i) {
				continue
			}
			switch a.DataType().(*arrow.StructType).Field(k).Name {
			case "step":
				v := f.(*array.Int32).Value(i)
				sm.Step = &v
			case "active_plan_id":
				v := f.(*array.String).Value(i)
				sm.ActivePlanID = &v
			case "tokens_used":
				v := f.(*array.Int32).Value(i)
				sm.TokensUsed = &v
			case "custom":
				v := f.(*array.String).Value(i)
				sm.Custom = &v
			}
		}
		if *sm != (api.ContextStateMetadata{}) {
			out.StateMetadata = sm
		}
	}
	out.ContentType = r.String(ColContentType, i)
	out.TextPayload = r.Str(ColTextPayload, i)
	if a, ok := r.cols[ColBinaryPayload].(*array.LargeBinary); ok && a.IsValid(i) {
		out.BinaryPayload = append([]byte{}, a.Value(i)...)
	}
	if e := r.Embedding(i); e != nil {
		out.Embedding = append([]float32(nil), e...)
	}
	out.ExternalID = r.Str(ColExternalID, i)
	out.Tenant = r.Str(ColTenant, i)
	out.Source = r.Str(ColSource, i)
	out.PayloadURI = r.Str(ColPayloadURI, i)
	if a, ok := r.cols[ColPayloadSize].(*array.Int64); ok && a.IsValid(i) {
		v := a.Value(i)
		out.PayloadSize = &v
	}
	out.PayloadChecksum = r.Str(ColPayloadChecksum, i)
	if m := r.Str(ColMetadata, i); m != nil {
		if !json.Valid([]byte(*m)) {
			return out, fmt.Errorf("ctxstore: record %q: metadata is not JSON", out.ID)
		}
		out.Metadata = json.RawMessage(*m)
	}
	rels, err := r.Relationships(i)
	if err != nil {
		return out, err
	}
	out.Relationships = rels
	out.ExpiresAt = r.Time(ColExpiresAt, i)
	out.RetentionPolicy = r.Str(ColRetentionPolicy, i)
	out.LifecycleStatus = r.String(ColLifecycleStatus, i)
	out.RetiredAt = r.Time(ColRetiredAt, i)
	out.RetiredReason = r.Str(ColRetiredReason, i)
	out.SupersedesID = r.Str(ColSupersedesID, i)
	out.SupersededByID = r.Str(ColSupersededByID, i)
	return out, nil
}

// Relationships returns row i's relationships (nil when null or absent).
func (r *Rows) Relationships(i int) ([]api.ContextRelationship, error) {
	a, ok := r.cols[ColRelationships].(*array.List)
	if !ok || a.IsNull(i) {
		return nil, nil
	}
	st, ok := a.ListValues().(*array.Struct)
	if !ok || st.NumField() != 3 {
		return nil, fmt.Errorf("ctxstore: relationships is %s, not a list of structs", a.DataType())
	}
	tgt, ok1 := st.Field(0).(*array.String)
	rel, ok2 := st.Field(1).(*array.String)
	w, ok3 := st.Field(2).(*array.Float32)
	if !ok1 || !ok2 || !ok3 {
		return nil, fmt.Errorf("ctxstore: relationships is %s, not the record schema's", a.DataType())
	}
	start, end := a.ValueOffsets(i)
	out := make([]api.ContextRelationship, 0, end-start)
	for j := int(start); j < int(end); j++ {
		if st.IsNull(j) {
			continue
		}
		c := api.ContextRelationship{TargetID: tgt.Value(j), Relation: rel.Value(j)}
		if w.IsValid(j) {
			v := w.Value(j)
			c.Weight = &v
		}
		out = append(out, c)
	}
	return out, nil
}
