package datagen

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lancectx/lancectx/api"
)

// ToRecord builds the Arrow rows of normalized events (the full table schema).
func ToRecord(evs []api.DatagenEvent) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, Schema())
	defer b.Release()
	str := func(i int) *array.StringBuilder { return b.Field(i).(*array.StringBuilder) }
	lstr := func(i int) *array.LargeStringBuilder { return b.Field(i).(*array.LargeStringBuilder) }
	optS := func(i int, v *string) {
		if v == nil {
			b.Field(i).AppendNull()
		} else {
			str(i).Append(*v)
		}
	}
	optL := func(i int, v []byte) {
		if v == nil {
			b.Field(i).AppendNull()
		} else {
			lstr(i).Append(string(v))
		}
	}
	i64 := func(i int) *array.Int64Builder { return b.Field(i).(*array.Int64Builder) }
	i32 := func(i int) *array.Int32Builder { return b.Field(i).(*array.Int32Builder) }
	b.Reserve(len(evs))
	for n := range evs {
		ev := &evs[n]
		str(0).Append(ev.EventID)
		str(1).Append(ev.ItemID)
		str(2).Append(ev.RootItemID)
		optS(3, ev.ParentItemID)
		i64(4).Append(ev.ItemSeq)
		str(5).Append(ev.CheckpointID)
		str(6).Append(ev.EventType)
		optS(7, ev.StepName)
		optS(8, ev.StepKind)
		if ev.StepIndex == nil {
			b.Field(9).AppendNull()
		} else {
			i64(9).Append(*ev.StepIndex)
		}
		optS(10, ev.EnclosingStep)
		optS(11, ev.SelectorStep)
		i32(12).Append(ev.Attempt)
		str(13).Append(ev.RunID)
		str(14).Append(ev.WriterEpoch)
		optS(15, ev.FieldName)
		optS(16, ev.FieldType)
		if ev.CodecVersion == nil {
			b.Field(17).AppendNull()
		} else {
			i32(17).Append(*ev.CodecVersion)
		}
		// value_kind .. payload_checksum (18..26): one of the value columns is set.
		if v := ev.Value; v == nil {
			for c := 18; c <= 26; c++ {
				b.Field(c).AppendNull()
			}
		} else {
			str(18).Append(v.Kind)
			var set [27]bool // the value columns (19..26) this value fills
			switch v.Kind {
			case KindInt:
				n, _ := strconv.ParseInt(string(v.Value), 10, 64)
				i64(19).Append(n)
				set[19] = true
			case KindFloat:
				f, _ := strconv.ParseFloat(string(v.Value), 64)
				b.Field(20).(*array.Float64Builder).Append(f)
				set[20] = true
			case KindBool:
				b.Field(21).(*array.BooleanBuilder).Append(string(v.Value) == "true")
				set[21] = true
			case KindStr:
				var s string
				_ = json.Unmarshal(v.Value, &s)
				lstr(22).Append(s)
				set[22] = true
			case KindJSON:
				lstr(23).Append(string(v.Value))
				set[23] = true
			case KindBlob:
				b.Field(24).(*array.BinaryBuilder).Append(v.Bytes)
				i64(25).Append(*v.Size)
				set[24], set[25] = true, true
				if v.Checksum != nil {
					str(26).Append(*v.Checksum)
					set[26] = true
				}
			}
			for c := 19; c <= 26; c++ {
				if !set[c] {
					b.Field(c).AppendNull()
				}
			}
		}
		optL(27, ev.QueryTags)
		optS(28, ev.Status)
		optS(29, ev.ErrorType)
		if ev.ErrorDump == nil {
			b.Field(30).AppendNull()
		} else {
			lstr(30).Append(*ev.ErrorDump)
		}
		if ev.Traceback == nil {
			b.Field(31).AppendNull()
		} else {
			lstr(31).Append(*ev.Traceback)
		}
		b.Field(32).(*array.TimestampBuilder).Append(arrow.Timestamp(ev.EventTS.UnixMicro()))
		i32(33).Append(ev.SchemaVersion)
	}
	return b.NewRecordBatch()
}

// Rows reads events out of record batches of any projection of the table: columns
// a batch lacks stay zero (a value without value_blob reads as a blob of size
// payload_size with no bytes). Columns are found once, by name, when the Rows is
// made (a fold decodes every field of thousands of rows: a lookup by name per field
// was a third of its time).
type Rows struct {
	rec  arrow.RecordBatch
	cols [numColumns]arrow.Array
	// What the events' pointer fields point into: one slice per column, made on first
	// use, instead of an allocation per field of every event.
	strs   [numColumns][]string
	i64s   [numColumns][]int64
	i32s   [numColumns][]int32
	values []api.DatagenValue
}

// NewRows wraps rec (not retained: it must outlive the Rows).
func NewRows(rec arrow.RecordBatch) *Rows {
	r := &Rows{rec: rec}
	for i, f := range rec.Schema().Fields() {
		if c := columnID(f.Name); c >= 0 {
			r.cols[c] = rec.Column(i)
		}
	}
	return r
}

// Len is the number of rows.
func (r *Rows) Len() int { return int(r.rec.NumRows()) }

func (r *Rows) col(name string) arrow.Array {
	if c := columnID(name); c >= 0 {
		return r.cols[c]
	}
	return nil
}

// String returns a string column's value ("" when null or absent).
func (r *Rows) String(col string, i int) string { return str(r.col(col), i) }

// Int64 returns an int64 column's value (0 when null or absent).
func (r *Rows) Int64(col string, i int) int64 {
	if p := optInt64(r.col(col), i); p != nil {
		return *p
	}
	return 0
}

func str(c arrow.Array, i int) string {
	switch a := c.(type) {
	case *array.String:
		if a.IsValid(i) {
			return a.Value(i)
		}
	case *array.LargeString:
		if a.IsValid(i) {
			return a.Value(i)
		}
	}
	return ""
}

func optString(c arrow.Array, i int) *string {
	if c == nil || c.IsNull(i) {
		return nil
	}
	s := str(c, i)
	return &s
}

func optInt64(c arrow.Array, i int) *int64 {
	if a, ok := c.(*array.Int64); ok && a.IsValid(i) {
		v := a.Value(i)
		return &v
	}
	return nil
}

func (r *Rows) pStr(c, i int) *string {
	if r.cols[c] == nil || r.cols[c].IsNull(i) {
		return nil
	}
	if r.strs[c] == nil {
		r.strs[c] = make([]string, r.Len())
	}
	r.strs[c][i] = str(r.cols[c], i)
	return &r.strs[c][i]
}

func (r *Rows) pI64(c, i int) *int64 {
	a, ok := r.cols[c].(*array.Int64)
	if !ok || !a.IsValid(i) {
		return nil
	}
	if r.i64s[c] == nil {
		r.i64s[c] = make([]int64, r.Len())
	}
	r.i64s[c][i] = a.Value(i)
	return &r.i64s[c][i]
}

func (r *Rows) pI32(c, i int) *int32 {
	a, ok := r.cols[c].(*array.Int32)
	if !ok || !a.IsValid(i) {
		return nil
	}
	if r.i32s[c] == nil {
		r.i32s[c] = make([]int32, r.Len())
	}
	r.i32s[c][i] = a.Value(i)
	return &r.i32s[c][i]
}

// Event decodes row i. Its pointer fields point into slices the Rows shares between
// its events (one per column): an event decoded twice shares them with itself.
func (r *Rows) Event(i int) (api.DatagenEvent, error) {
	ev := api.DatagenEvent{
		EventID: str(r.cols[idEventID], i), ItemID: str(r.cols[idItemID], i), RootItemID: str(r.cols[idRootItemID], i),
		ParentItemID: r.pStr(idParentItemID, i), ItemSeq: r.int64At(idItemSeq, i),
		CheckpointID: str(r.cols[idCheckpointID], i), EventType: str(r.cols[idEventType], i),
		StepName: r.pStr(idStepName, i), StepKind: r.pStr(idStepKind, i), StepIndex: r.pI64(idStepIndex, i),
		EnclosingStep: r.pStr(idEnclosingStep, i), SelectorStep: r.pStr(idSelectorStep, i),
		RunID: str(r.cols[idRunID], i), WriterEpoch: str(r.cols[idWriterEpoch], i),
		FieldName: r.pStr(idFieldName, i), FieldType: r.pStr(idFieldType, i),
		CodecVersion: r.pI32(idCodecVersion, i), Status: r.pStr(idStatus, i),
		ErrorType: r.pStr(idErrorType, i), ErrorDump: r.pStr(idErrorDump, i),
		Traceback: r.pStr(idTraceback, i),
	}
	if p := r.pI32(idAttempt, i); p != nil {
		ev.Attempt = *p
	}
	if p := r.pI32(idSchemaVersion, i); p != nil {
		ev.SchemaVersion = *p
	}
	if p := r.pStr(idQueryTags, i); p != nil {
		ev.QueryTags = json.RawMessage(*p)
	}
	if a, ok := r.cols[idEventTS].(*array.Timestamp); ok && a.IsValid(i) {
		t := time.UnixMicro(int64(a.Value(i))).UTC()
		ev.EventTS = &t
	}
	kind := r.pStr(idValueKind, i)
	if kind == nil {
		return ev, nil
	}
	if r.values == nil {
		r.values = make([]api.DatagenValue, r.Len())
	}
	v := &r.values[i]
	*v = api.DatagenValue{Kind: *kind}
	switch *kind {
	case KindInt:
		p := r.pI64(idValueI64, i)
		if p == nil {
			return ev, fmt.Errorf("datagen: event %q: kind int without value_i64", ev.EventID)
		}
		v.Value = strconv.AppendInt(nil, *p, 10)
	case KindFloat:
		a, ok := r.cols[idValueF64].(*array.Float64)
		if !ok || !a.IsValid(i) {
			return ev, fmt.Errorf("datagen: event %q: kind float without value_f64", ev.EventID)
		}
		v.Value = strconv.AppendFloat(nil, a.Value(i), 'g', -1, 64)
	case KindBool:
		a, ok := r.cols[idValueBool].(*array.Boolean)
		if !ok || !a.IsValid(i) {
			return ev, fmt.Errorf("datagen: event %q: kind bool without value_bool", ev.EventID)
		}
		v.Value = []byte(strconv.FormatBool(a.Value(i)))
	case KindStr:
		v.Value, _ = json.Marshal(str(r.cols[idValueStr], i))
	case KindJSON:
		v.Value = json.RawMessage(str(r.cols[idValueJSON], i))
	case KindBlob:
		v.Size = r.pI64(idPayloadSize, i)
		v.Checksum = r.pStr(idPayloadCksum, i)
		if a, ok := r.cols[idValueBlob].(*array.LargeBinary); ok && a.IsValid(i) {
			v.Bytes = append([]byte{}, a.Value(i)...)
		}
	}
	ev.Value = v
	return ev, nil
}

// OverviewRow reads what Overview needs of row i (the columns it lacks stay zero),
// without decoding the rest of the event.
func (r *Rows) OverviewRow(i int) OverviewRow {
	return OverviewRow{ItemID: str(r.cols[idItemID], i), RootItemID: str(r.cols[idRootItemID], i), EventType: str(r.cols[idEventType], i),
		RunID: str(r.cols[idRunID], i), ParentItemID: optString(r.cols[idParentItemID], i), Status: optString(r.cols[idStatus], i),
		ErrorType: optString(r.cols[idErrorType], i), StepName: optString(r.cols[idStepName], i), ItemSeq: r.int64At(idItemSeq, i)}
}

func (r *Rows) int64At(c int, i int) int64 {
	if p := optInt64(r.cols[c], i); p != nil {
		return *p
	}
	return 0
}
