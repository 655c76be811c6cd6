package rollout

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// FromBatch converts the rows of rec to Records. It reads the columns rec has, by
// name, so a projection works (columns left out stay zero) and columns it does not know
// (such as _rowid) are ignored. binary_payload is materialized only when withPayload.
// Strings and bytes are copied, so the records outlive rec. A known column of a type it
// cannot read is an error.
//
// Values JSON cannot carry are softened rather than failing a whole listing: a NaN or
// infinite scalar float reads as null, one inside a list is written as null by
// Float32List, and metadata text that is not valid JSON is returned as a JSON string.
func FromBatch(rec arrow.RecordBatch, withPayload bool) ([]Record, error) {
	n := int(rec.NumRows())
	out := make([]Record, n)
	for c, f := range rec.Schema().Fields() {
		if f.Name == ColBinaryPayload && !withPayload {
			continue
		}
		if err := fillColumn(out, f.Name, rec.Column(c)); err != nil {
			return nil, fmt.Errorf("rollout: read column %q (%s): %w", f.Name, f.Type, err)
		}
	}
	return out, nil
}

func fillColumn(out []Record, name string, arr arrow.Array) error {
	switch name {
	case ColID, ColRolloutID, ColProblemID, ColRole, ColContentType:
		get, err := stringGetter(arr)
		if err != nil {
			return err
		}
		for i := range out {
			s, _ := get(i)
			switch name {
			case ColID:
				out[i].ID = s
			case ColRolloutID:
				out[i].RolloutID = s
			case ColProblemID:
				out[i].ProblemID = s
			case ColRole:
				out[i].Role = s
			case ColContentType:
				out[i].ContentType = s
			}
		}
	case ColDataset, ColContent, ColModelInputString, ColModelOutputString, ColRationale, ColProblemText,
		ColUserMetadata, ColGraderID, ColExcludeReason, ColPolicyVersion, ColPayloadChecksum, ColArtifactType:
		get, err := stringGetter(arr)
		if err != nil {
			return err
		}
		for i := range out {
			if s, ok := get(i); ok {
				if p := optStringField(&out[i], name); p != nil {
					*p = &s
				}
			}
		}
	case ColSequenceOrder, ColNumInputTokens, ColNumOutputTokens:
		a, ok := arr.(*array.Int32)
		if !ok {
			return fmt.Errorf("expected int32")
		}
		for i := range out {
			if a.IsNull(i) {
				continue
			}
			v := a.Value(i)
			switch name {
			case ColSequenceOrder:
				out[i].SequenceOrder = v
			case ColNumInputTokens:
				out[i].NumInputTokens = &v
			case ColNumOutputTokens:
				out[i].NumOutputTokens = &v
			}
		}
	case ColCreatedAt:
		a, ok := arr.(*array.Timestamp)
		if !ok {
			return fmt.Errorf("expected a timestamp")
		}
		unit := a.DataType().(*arrow.TimestampType).Unit
		for i := range out {
			if !a.IsNull(i) {
				out[i].CreatedAt = a.Value(i).ToTime(unit).UTC()
			}
		}
	case ColAdvantage, ColReward, ColRawReward, ColScore:
		a, ok := arr.(*array.Float32)
		if !ok {
			return fmt.Errorf("expected float32")
		}
		for i := range out {
			if a.IsNull(i) || !finite(a.Value(i)) {
				continue
			}
			v := a.Value(i)
			switch name {
			case ColAdvantage:
				out[i].Advantage = &v
			case ColReward:
				out[i].Reward = &v
			case ColRawReward:
				out[i].RawReward = &v
			case ColScore:
				out[i].Score = &v
			}
		}
	case ColIncludeInTraining:
		a, ok := arr.(*array.Boolean)
		if !ok {
			return fmt.Errorf("expected boolean")
		}
		for i := range out {
			if !a.IsNull(i) {
				v := a.Value(i)
				out[i].IncludeInTraining = &v
			}
		}
	case ColPayloadSize:
		a, ok := arr.(*array.Int64)
		if !ok {
			return fmt.Errorf("expected int64")
		}
		for i := range out {
			if !a.IsNull(i) {
				v := a.Value(i)
				out[i].PayloadSize = &v
			}
		}
	case ColInputTokens, ColOutputTokens:
		get, err := listGetter[int32, *array.Int32](arr, 0)
		if err != nil {
			return err
		}
		for i := range out {
			if v, ok := get(i); ok {
				if name == ColInputTokens {
					out[i].InputTokens = v
				} else {
					out[i].OutputTokens = v
				}
			}
		}
	case ColOutputLogprobs, ColInputLogprobs, ColRefLogprobs:
		get, err := listGetter[float32, *array.Float32](arr, float32(math.NaN()))
		if err != nil {
			return err
		}
		for i := range out {
			if v, ok := get(i); ok {
				switch name {
				case ColOutputLogprobs:
					out[i].OutputLogprobs = v
				case ColInputLogprobs:
					out[i].InputLogprobs = v
				case ColRefLogprobs:
					out[i].RefLogprobs = v
				}
			}
		}
	case ColLossMask:
		get, err := listGetter[int8, *array.Int8](arr, 0)
		if err != nil {
			return err
		}
		for i := range out {
			if v, ok := get(i); ok {
				out[i].LossMask = v
			}
		}
	case ColRelationships:
		return fillRelationships(out, arr)
	case ColBinaryPayload:
		var get func(int) ([]byte, bool)
		switch a := arr.(type) {
		case *array.Binary:
			get = func(i int) ([]byte, bool) { return a.Value(i), a.IsValid(i) }
		case *array.LargeBinary:
			get = func(i int) ([]byte, bool) { return a.Value(i), a.IsValid(i) }
		default:
			return fmt.Errorf("expected binary")
		}
		for i := range out {
			if b, ok := get(i); ok {
				out[i].BinaryPayload = bytes.Clone(b)
				if out[i].BinaryPayload == nil {
					out[i].BinaryPayload = []byte{}
				}
			}
		}
	case ColMetadata:
		get, err := stringGetter(arr)
		if err != nil {
			return err
		}
		for i := range out {
			s, ok := get(i)
			if !ok {
				continue
			}
			if json.Valid([]byte(s)) {
				out[i].Metadata = json.RawMessage(s)
			} else {
				out[i].Metadata, _ = json.Marshal(s)
			}
		}
	}
	return nil
}

func optStringField(r *Record, name string) **string {
	switch name {
	case ColDataset:
		return &r.Dataset
	case ColContent:
		return &r.Content
	case ColModelInputString:
		return &r.ModelInputString
	case ColModelOutputString:
		return &r.ModelOutputString
	case ColRationale:
		return &r.Rationale
	case ColProblemText:
		return &r.ProblemText
	case ColUserMetadata:
		return &r.UserMetadata
	case ColGraderID:
		return &r.GraderID
	case ColExcludeReason:
		return &r.ExcludeReason
	case ColPolicyVersion:
		return &r.PolicyVersion
	case ColPayloadChecksum:
		return &r.PayloadChecksum
	case ColArtifactType:
		return &r.ArtifactType
	}
	return nil
}

// stringGetter reads any string-like column (utf8, large utf8, string view, or a
// dictionary of those), copying each value.
func stringGetter(arr arrow.Array) (func(int) (string, bool), error) {
	switch a := arr.(type) {
	case *array.String:
		return func(i int) (string, bool) {
			if a.IsNull(i) {
				return "", false
			}
			return strings.Clone(a.Value(i)), true
		}, nil
	case *array.LargeString:
		return func(i int) (string, bool) {
			if a.IsNull(i) {
				return "", false
			}
			return strings.Clone(a.Value(i)), true
		}, nil
	case *array.StringView:
		return func(i int) (string, bool) {
			if a.IsNull(i) {
				return "", false
			}
			return strings.Clone(a.Value(i)), true
		}, nil
	case *array.Dictionary:
		inner, err := stringGetter(a.Dictionary())
		if err != nil {
			return nil, err
		}
		vals := make([]string, a.Dictionary().Len())
		valid := make([]bool, len(vals))
		for k := range vals {
			vals[k], valid[k] = inner(k)
		}
		return func(i int) (string, bool) {
			if a.IsNull(i) {
				return "", false
			}
			k := a.GetValueIndex(i)
			if k < 0 || k >= len(vals) {
				return "", false
			}
			return vals[k], valid[k]
		}, nil
	}
	return nil, fmt.Errorf("expected a string type")
}

type typedValues[T any] interface {
	arrow.Array
	Values() []T
}

// listGetter reads a list (or large list) of T, copying each list; a null item reads
// as nullItem.
func listGetter[T any, A typedValues[T]](arr arrow.Array, nullItem T) (func(int) ([]T, bool), error) {
	var values arrow.Array
	var offsets func(int) (int64, int64)
	switch l := arr.(type) {
	case *array.List:
		values, offsets = l.ListValues(), l.ValueOffsets
	case *array.LargeList:
		values, offsets = l.ListValues(), l.ValueOffsets
	default:
		return nil, fmt.Errorf("expected a list")
	}
	typed, ok := values.(A)
	if !ok {
		return nil, fmt.Errorf("unexpected list item type %s", values.DataType())
	}
	vals := typed.Values()
	return func(i int) ([]T, bool) {
		if arr.IsNull(i) {
			return nil, false
		}
		s, e := offsets(i)
		if s < 0 || e < s || e > int64(len(vals)) {
			return nil, false
		}
		out := make([]T, e-s)
		copy(out, vals[s:e])
		if typed.NullN() > 0 {
			for j := s; j < e; j++ {
				if typed.IsNull(int(j)) {
					out[j-s] = nullItem
				}
			}
		}
		return out, true
	}, nil
}

func fillRelationships(out []Record, arr arrow.Array) error {
	var values arrow.Array
	var offsets func(int) (int64, int64)
	switch l := arr.(type) {
	case *array.List:
		values, offsets = l.ListValues(), l.ValueOffsets
	case *array.LargeList:
		values, offsets = l.ListValues(), l.ValueOffsets
	default:
		return fmt.Errorf("expected a list")
	}
	st, ok := values.(*array.Struct)
	if !ok {
		return fmt.Errorf("expected a list of structs")
	}
	stt := st.DataType().(*arrow.StructType)
	field := func(name string) arrow.Array {
		if idx, ok := stt.FieldIdx(name); ok {
			return st.Field(idx)
		}
		return nil
	}
	var targets, relations func(int) (string, bool)
	var err error
	if f := field("target_id"); f != nil {
		if targets, err = stringGetter(f); err != nil {
			return fmt.Errorf("target_id: %w", err)
		}
	}
	if f := field("relation"); f != nil {
		if relations, err = stringGetter(f); err != nil {
			return fmt.Errorf("relation: %w", err)
		}
	}
	var weights *array.Float32
	if f := field("weight"); f != nil {
		if weights, ok = f.(*array.Float32); !ok {
			return fmt.Errorf("weight: expected float32")
		}
	}
	for i := range out {
		if arr.IsNull(i) {
			continue
		}
		s, e := offsets(i)
		if s < 0 || e < s || e > int64(st.Len()) {
			return fmt.Errorf("row %d: list offsets out of range", i)
		}
		rels := make([]Relationship, 0, e-s)
		for j := int(s); j < int(e); j++ {
			if st.IsNull(j) {
				continue
			}
			var rel Relationship
			if targets != nil {
				rel.TargetID, _ = targets(j)
			}
			if relations != nil {
				rel.Relation, _ = relations(j)
			}
			if weights != nil && weights.IsValid(j) && finite(weights.Value(j)) {
				w := weights.Value(j)
				rel.Weight = &w
			}
			rels = append(rels, rel)
		}
		out[i].Relationships = rels
	}
	return nil
}

// ListWriter streams a listing response, {"records":[...],"has_more":…,"limit":…,
// "offset":…}, the same JSON as api.ListRecordsResponse[Record], without holding the
// whole page as one encoded document. Write errors are sticky: once one fails, every
// later call returns it. Once the first record is written the HTTP status is sent,
// so the caller must have finished everything that can fail with a status of its own.
type ListWriter struct {
	w       io.Writer
	buf     []byte
	n       int
	err     error
	started bool
}

// listFlushBytes is how much encoded JSON ListWriter buffers before writing.
const listFlushBytes = 64 << 10

// NewListWriter returns a ListWriter that writes to w.
func NewListWriter(w io.Writer) *ListWriter {
	return &ListWriter{w: w, buf: make([]byte, 0, listFlushBytes+4096)}
}

// Write appends one record.
func (l *ListWriter) Write(r *Record) error {
	if l.err != nil {
		return l.err
	}
	if !l.started {
		l.buf = append(l.buf, `{"records":[`...)
		l.started = true
	} else {
		l.buf = append(l.buf, ',')
	}
	b, err := json.Marshal(r)
	if err != nil {
		l.err = fmt.Errorf("rollout: encode record %q: %w", r.ID, err)
		return l.err
	}
	l.buf = append(l.buf, b...)
	l.n++
	if len(l.buf) >= listFlushBytes {
		return l.flush()
	}
	return nil
}

// WriteBatch appends every row of rec (see FromBatch).
func (l *ListWriter) WriteBatch(rec arrow.RecordBatch, withPayload bool) error {
	if l.err != nil {
		return l.err
	}
	recs, err := FromBatch(rec, withPayload)
	if err != nil {
		l.err = err
		return err
	}
	for i := range recs {
		if err := l.Write(&recs[i]); err != nil {
			return err
		}
	}
	return nil
}

// Count is the number of records written so far.
func (l *ListWriter) Count() int { return l.n }

// Close writes the end of the document and flushes it.
func (l *ListWriter) Close(hasMore bool, limit, offset int) error {
	if l.err != nil {
		return l.err
	}
	if !l.started {
		l.buf = append(l.buf, `{"records":[`...)
		l.started = true
	}
	l.buf = append(l.buf, `],"has_more":`...)
	l.buf = strconv.AppendBool(l.buf, hasMore)
	l.buf = append(l.buf, `,"limit":`...)
	l.buf = strconv.AppendInt(l.buf, int64(limit), 10)
	l.buf = append(l.buf, `,"offset":`...)
	l.buf = strconv.AppendInt(l.buf, int64(offset), 10)
	l.buf = append(l.buf, "}\n"...)
	if err := l.flush(); err != nil {
		return err
	}
	l.err = fmt.Errorf("rollout: ListWriter is closed")
	return nil
}

func (l *ListWriter) flush() error {
	if len(l.buf) == 0 {
		return nil
	}
	_, err := l.w.Write(l.buf)
	l.buf = l.buf[:0]
	if err != nil {
		l.err = err
	}
	return err
}
