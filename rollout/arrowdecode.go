package rollout

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/internal/arrowrows"
)

// ParseAppendArrow decodes the Arrow IPC stream body of a columnar append
// (Content-Type application/vnd.apache.arrow.stream): one schema and any number of
// record batches whose columns are rollout columns, by name. The rules are the JSON
// route's, column by column: id and rollout_id are required and non-null; problem_id,
// sequence_order, role, content_type and created_at may be left out (the JSON
// defaults fill them: rollout_id, 0, "assistant", "text/plain", the request time) but
// are never null; the other columns are nullable; every value passes the same checks
// (ids, short labels, finite numbers, JSON metadata, payload sizes).
//
// Types may be what a columnar client naturally holds rather than the stored ones:
// 64-bit integers and floats, utf8 for large_utf8 (and back), a plain or differently
// indexed dictionary of strings for role, timestamps in any unit with no time zone or
// UTC, lists and structs whose item fields differ only in nullability. Values that do
// not fit the stored type (an int64 past int32) are refused, never wrapped.
//
// Every error is an *api.Error (400 or 413); nothing is kept of a refused body. The
// batches come back laid out as Schema() restricted to the columns the body has (plus
// the defaulted ones), validated; the caller releases them. A body is untrusted: the
// IPC reader runs under an allocation budget and every buffer is checked
// (arrowrows.Validate) before a value is read.
func ParseAppendArrow(body []byte, opts DecodeOptions) (recs []arrow.RecordBatch, err error) {
	opts = opts.WithDefaults()
	if int64(len(body)) > opts.MaxBodyBytes {
		return nil, api.PayloadTooLarge("request body is %d bytes, larger than the limit of %d bytes", len(body), opts.MaxBodyBytes)
	}
	if len(body) == 0 {
		return nil, api.InvalidRequest("request body is empty; send an Arrow IPC stream")
	}
	raw, err := readArrowStream(body, opts)
	if err != nil {
		return nil, err
	}
	defer releaseBatches(raw)
	now := opts.Now().UTC()
	var total int64
	defer func() {
		if err != nil {
			releaseBatches(recs)
			recs = nil
		}
	}()
	for _, r := range raw {
		if r.NumRows() == 0 {
			continue
		}
		if total+r.NumRows() > int64(opts.MaxRecords) {
			return recs, api.PayloadTooLarge("records: more than %d rows; at most %d per request", opts.MaxRecords, opts.MaxRecords)
		}
		out, err := fitArrowBatch(r, total, now, opts)
		if err != nil {
			return recs, err
		}
		recs = append(recs, out)
		total += r.NumRows()
	}
	if total == 0 {
		return recs, api.InvalidRequest("records: the Arrow stream has no rows; send at least one")
	}
	return recs, nil
}

func releaseBatches(recs []arrow.RecordBatch) {
	for _, r := range recs {
		r.Release()
	}
}

// errArrowBudget is the panic of budgetAllocator past its budget.
var errArrowBudget = errors.New("rollout: Arrow body allocates more than its budget")

// budgetAllocator hands out Go memory until a budget is spent, then panics with
// errArrowBudget: the IPC reader sizes buffers by lengths the body declares (a
// compressed buffer's uncompressed length), so a small hostile body could otherwise
// ask for gigabytes. The reader is single-goroutine, so no lock.
type budgetAllocator struct {
	mem  memory.Allocator
	left int64
	// over is set with the panic: the IPC reader turns some panics into errors of its
	// own, which must still be a 413.
	over bool
}

func (a *budgetAllocator) take(n int) {
	a.left -= int64(n)
	if a.left < 0 {
		a.over = true
		panic(errArrowBudget)
	}
}

func (a *budgetAllocator) Allocate(n int) []byte {
	a.take(n)
	return a.mem.Allocate(n)
}

func (a *budgetAllocator) Reallocate(n int, b []byte) []byte {
	if n > len(b) {
		a.take(n - len(b))
	}
	return a.mem.Reallocate(n, b)
}

func (a *budgetAllocator) Free(b []byte) { a.mem.Free(b) }

// readArrowStream reads every batch of the stream, each checked by arrowrows.Validate.
// The IPC reader is third-party code fed with client bytes: its panics are a 400.
func readArrowStream(body []byte, opts DecodeOptions) (recs []arrow.RecordBatch, err error) {
	alloc := &budgetAllocator{mem: memory.DefaultAllocator, left: opts.MaxBodyBytes + int64(len(body))}
	defer func() {
		p := recover()
		if p != nil {
			releaseBatches(recs)
			recs = nil
			err = api.InvalidRequest("malformed Arrow IPC stream: %s", api.QuoteTrunc(fmt.Sprint(p), 200))
		}
		if alloc.over && err != nil {
			err = api.PayloadTooLarge("the Arrow stream decompresses to more than the limit of %d bytes", opts.MaxBodyBytes)
		}
	}()
	if err := checkIPCVectors(body); err != nil {
		return nil, api.InvalidRequest("%s", api.QuoteTrunc(err.Error(), 200))
	}
	rd, err := ipc.NewReader(bytes.NewReader(body), ipc.WithAllocator(alloc),
		ipc.WithBodySizeLimit(int64(len(body))), ipc.WithMetadataSizeLimit(int64(len(body))))
	if err != nil {
		return nil, api.InvalidRequest("malformed Arrow IPC stream: %s", api.QuoteTrunc(err.Error(), 200))
	}
	defer rd.Release()
	if err := checkArrowSchema(rd.Schema()); err != nil {
		return nil, err
	}
	for rd.Next() {
		rec := rd.RecordBatch()
		for i, c := range rec.Columns() {
			if err := arrowrows.Validate(c); err != nil {
				releaseBatches(recs)
				return nil, api.InvalidRequest("column %q: malformed Arrow data: %v", rec.Schema().Field(i).Name, err)
			}
		}
		rec.Retain()
		recs = append(recs, rec)
	}
	if err := rd.Err(); err != nil {
		releaseBatches(recs)
		return nil, api.InvalidRequest("malformed Arrow IPC stream: %s", api.QuoteTrunc(err.Error(), 200))
	}
	return recs, nil
}

// checkArrowSchema refuses columns the rollout schema does not have and columns
// named twice, before a batch is read.
func checkArrowSchema(s *arrow.Schema) error {
	seen := make(map[string]bool, s.NumFields())
	for _, f := range s.Fields() {
		if seen[f.Name] {
			return api.InvalidRequest("column %s appears more than once in the Arrow schema", api.QuoteTrunc(f.Name, 64))
		}
		seen[f.Name] = true
		if !rolloutSchema.HasField(f.Name) {
			return api.InvalidRequest("column %s is not a rollout column", api.QuoteTrunc(f.Name, 64))
		}
	}
	for _, c := range [...]string{ColID, ColRolloutID} {
		if !seen[c] {
			return api.InvalidRequest("column %q: required", c)
		}
	}
	return nil
}

// fitArrowBatch coerces the columns of r to the rollout types, adds the defaulted
// columns r lacks and checks every value. first is the index of r's first row in the
// request (for error messages).
func fitArrowBatch(r arrow.RecordBatch, first int64, now time.Time, opts DecodeOptions) (arrow.RecordBatch, error) {
	n := int(r.NumRows())
	var fields []arrow.Field
	var cols []arrow.Array
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	src := r.Schema()
	for _, f := range rolloutSchema.Fields() {
		var col arrow.Array
		if idx := src.FieldIndices(f.Name); len(idx) == 1 {
			c, err := coerce(r.Column(idx[0]), f.Type)
			if err != nil {
				return nil, api.InvalidRequest("column %q: %v", f.Name, err)
			}
			col = c
			if !f.Nullable && col.NullN() > 0 {
				row := first + int64(firstNull(col))
				col.Release()
				return nil, fieldErr(int(row), f.Name, "null; the column is not nullable (leave the column out to get the default)")
			}
		} else {
			col = defaultColumn(f.Name, r, now, n)
			if col == nil {
				continue // a nullable column the body leaves out: the WAL fills nulls
			}
		}
		fields = append(fields, f)
		cols = append(cols, col)
	}
	out := array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, int64(n))
	if err := checkArrowValues(out, int(first), opts); err != nil {
		out.Release()
		return nil, err
	}
	return out, nil
}

func firstNull(a arrow.Array) int {
	for i := 0; i < a.Len(); i++ {
		if a.IsNull(i) {
			return i
		}
	}
	return 0
}

// defaultColumn is the JSON route's default of a column the body leaves out (nil for
// a nullable column, which stays null).
func defaultColumn(name string, r arrow.RecordBatch, now time.Time, n int) arrow.Array {
	switch name {
	case ColProblemID:
		c := r.Column(r.Schema().FieldIndices(ColRolloutID)[0])
		if c.DataType().ID() == arrow.STRING {
			c.Retain()
			return c
		}
		out, _ := coerce(c, arrow.BinaryTypes.String)
		return out
	case ColSequenceOrder:
		return fromData(array.NewData(arrow.PrimitiveTypes.Int32, n, []*memory.Buffer{nil, memory.NewBufferBytes(make([]byte, 4*n))}, nil, 0, 0))
	case ColCreatedAt:
		vals := make([]int64, n)
		for i := range vals {
			vals[i] = now.UnixMicro()
		}
		return fromData(array.NewData(timestampType, n, []*memory.Buffer{nil, memory.NewBufferBytes(arrow.GetBytes(vals))}, nil, 0, 0))
	case ColRole:
		return constDict(DefaultRole, n)
	case ColContentType:
		return constString(DefaultContentType, n)
	}
	return nil
}

func constString(v string, n int) arrow.Array {
	offs := make([]int32, n+1)
	data := make([]byte, 0, len(v)*n)
	for i := 0; i < n; i++ {
		data = append(data, v...)
		offs[i+1] = int32(len(data))
	}
	return fromData(array.NewData(arrow.BinaryTypes.String, n, []*memory.Buffer{nil, memory.NewBufferBytes(arrow.GetBytes(offs)), memory.NewBufferBytes(data)}, nil, 0, 0))
}

func constDict(v string, n int) arrow.Array {
	dict := constString(v, 1)
	defer dict.Release()
	return fromData(array.NewDataWithDictionary(roleType, n, []*memory.Buffer{nil, memory.NewBufferBytes(make([]byte, n))}, 0, 0, dict.Data().(*array.Data)))
}

// checkArrowValues applies the JSON route's value rules to a coerced batch.
func checkArrowValues(rec arrow.RecordBatch, first int, opts DecodeOptions) error {
	s := rec.Schema()
	col := func(name string) arrow.Array {
		if idx := s.FieldIndices(name); len(idx) == 1 {
			return rec.Column(idx[0])
		}
		return nil
	}
	n := int(rec.NumRows())
	for _, name := range [...]string{ColID, ColRolloutID, ColProblemID} {
		c := col(name).(*array.String)
		for i := 0; i < n; i++ {
			if v := c.Value(i); api.ValidateIDField("x", v) != nil {
				return api.ValidateIDField(fmt.Sprintf("records[%d].%s", first+i, name), v)
			}
		}
	}
	role := col(ColRole).(*array.Dictionary)
	dict := role.Dictionary().(*array.String)
	for i := 0; i < n; i++ {
		if msg := checkShortText(dict.Value(role.GetValueIndex(i)), MaxRoleLen); msg != "" {
			return fieldErr(first+i, ColRole, "%s", msg)
		}
	}
	ct := col(ColContentType).(*array.String)
	for i := 0; i < n; i++ {
		if msg := checkShortText(ct.Value(i), MaxContentTypeLen); msg != "" {
			return fieldErr(first+i, ColContentType, "%s", msg)
		}
	}
	for _, name := range [...]string{ColNumInputTokens, ColNumOutputTokens} {
		if c, ok := col(name).(*array.Int32); ok {
			for i := 0; i < n; i++ {
				if c.IsValid(i) && c.Value(i) < 0 {
					return fieldErr(first+i, name, "must not be negative, got %d", c.Value(i))
				}
			}
		}
	}
	for _, name := range [...]string{ColAdvantage, ColReward, ColRawReward, ColScore} {
		if c, ok := col(name).(*array.Float32); ok {
			for i := 0; i < n; i++ {
				if c.IsValid(i) && !finite(c.Value(i)) {
					return fieldErr(first+i, name, "must be a finite number")
				}
			}
		}
	}
	for _, name := range [...]string{ColOutputLogprobs, ColInputLogprobs, ColRefLogprobs} {
		if c, ok := col(name).(*array.List); ok {
			vals := c.ListValues().(*array.Float32)
			for i := 0; i < n; i++ {
				if !c.IsValid(i) {
					continue
				}
				lo, hi := c.ValueOffsets(i)
				for j := lo; j < hi; j++ {
					if vals.IsValid(int(j)) && !finite(vals.Value(int(j))) {
						return fieldErr(first+i, fmt.Sprintf("%s[%d]", name, j-lo), "must be a finite number")
					}
				}
			}
		}
	}
	if c, ok := col(ColRelationships).(*array.List); ok {
		st := c.ListValues().(*array.Struct)
		targets, relations, weights := st.Field(0).(*array.String), st.Field(1).(*array.String), st.Field(2).(*array.Float32)
		for i := 0; i < n; i++ {
			if !c.IsValid(i) {
				continue
			}
			lo, hi := c.ValueOffsets(i)
			for j := lo; j < hi; j++ {
				k := int(j)
				field := fmt.Sprintf("relationships[%d]", j-lo)
				if !st.IsValid(k) {
					return fieldErr(first+i, field, "null; a relationship is an object")
				}
				if !targets.IsValid(k) {
					return fieldErr(first+i, field+".target_id", "required")
				}
				if err := api.ValidateIDField(fmt.Sprintf("records[%d].%s.target_id", first+i, field), targets.Value(k)); err != nil {
					return err
				}
				if !relations.IsValid(k) {
					return fieldErr(first+i, field+".relation", "required")
				}
				if msg := checkShortText(relations.Value(k), MaxRelationLen); msg != "" {
					return fieldErr(first+i, field+".relation", "%s", msg)
				}
				if weights.IsValid(k) && !finite(weights.Value(k)) {
					return fieldErr(first+i, field+".weight", "must be a finite number")
				}
			}
		}
	}
	payload, _ := col(ColBinaryPayload).(*array.LargeBinary)
	if payload != nil {
		for i := 0; i < n; i++ {
			if l := int64(len(payload.Value(i))); l > opts.MaxPartBytes {
				return api.PayloadTooLarge("records[%d].binary_payload: %d bytes, larger than the limit of %d bytes", first+i, l, opts.MaxPartBytes)
			}
		}
	}
	if c, ok := col(ColPayloadSize).(*array.Int64); ok {
		for i := 0; i < n; i++ {
			if !c.IsValid(i) {
				continue
			}
			if v := c.Value(i); v < 0 {
				return fieldErr(first+i, ColPayloadSize, "must not be negative, got %d", v)
			} else if payload != nil && payload.IsValid(i) && v != int64(len(payload.Value(i))) {
				return fieldErr(first+i, ColPayloadSize, "is %d but binary_payload has %d bytes", v, len(payload.Value(i)))
			}
		}
	}
	if c, ok := col(ColMetadata).(*array.LargeString); ok {
		for i := 0; i < n; i++ {
			if c.IsValid(i) && c.Value(i) != "" && !json.Valid([]byte(c.Value(i))) {
				return fieldErr(first+i, ColMetadata, "invalid JSON")
			}
		}
	}
	if c, ok := col(ColCreatedAt).(*array.Timestamp); ok {
		for i := 0; i < n; i++ {
			if c.Value(i) == 0 {
				return fieldErr(first+i, ColCreatedAt, "not set (the epoch); leave the column out to get the request time")
			}
		}
	}
	return nil
}

// coerce returns a laid out as type to (see ParseAppendArrow), or an error saying why
// it cannot be.
func coerce(a arrow.Array, to arrow.DataType) (arrow.Array, error) {
	from := a.DataType()
	if arrow.TypeEqual(from, to) {
		a.Retain()
		return a, nil
	}
	d := a.Data()
	switch to.ID() {
	case arrow.STRING, arrow.LARGE_STRING, arrow.LARGE_BINARY, arrow.BINARY:
		text := to.ID() == arrow.STRING || to.ID() == arrow.LARGE_STRING
		var offs []int64
		var data []byte
		switch c := a.(type) {
		case *array.String:
			if !text {
				return nil, fmt.Errorf("has type %s, want %s", from, to)
			}
			offs, data = widen(c.ValueOffsets()), c.ValueBytes()
		case *array.LargeString:
			if !text {
				return nil, fmt.Errorf("has type %s, want %s", from, to)
			}
			offs, data = c.ValueOffsets(), c.ValueBytes()
		case *array.Binary:
			if text {
				return nil, fmt.Errorf("has type %s, want %s", from, to)
			}
			offs, data = widen(c.ValueOffsets()), c.ValueBytes()
		case *array.LargeBinary:
			if text {
				return nil, fmt.Errorf("has type %s, want %s", from, to)
			}
			offs, data = c.ValueOffsets(), c.ValueBytes()
		default:
			return nil, fmt.Errorf("has type %s, want %s", from, to)
		}
		return reoffset(a, to, offs, data)
	case arrow.DICTIONARY:
		return toRoleDict(a)
	case arrow.INT8, arrow.INT32, arrow.INT64:
		return coerceInt(a, to)
	case arrow.FLOAT32:
		c, ok := a.(*array.Float64)
		if !ok {
			return nil, fmt.Errorf("has type %s, want %s", from, to)
		}
		vals := make([]float32, c.Len())
		for i := range vals {
			vals[i] = float32(c.Value(i))
		}
		bits, nulls := validityOf(c.Len(), c.IsValid)
		return fromData(array.NewData(to, c.Len(), []*memory.Buffer{goBuffer(bits), memory.NewBufferBytes(arrow.GetBytes(vals))}, nil, nulls, 0)), nil
	case arrow.TIMESTAMP:
		ft, ok := from.(*arrow.TimestampType)
		if !ok {
			return nil, fmt.Errorf("has type %s, want %s", from, to)
		}
		if ft.TimeZone != "" && ft.TimeZone != "UTC" && ft.TimeZone != "+00:00" && ft.TimeZone != "Z" {
			return nil, fmt.Errorf("has time zone %q; send UTC or no time zone", ft.TimeZone)
		}
		c := a.(*array.Timestamp)
		vals := make([]int64, c.Len())
		for i := range vals {
			v := int64(c.Value(i))
			switch ft.Unit {
			case arrow.Second:
				if v > math.MaxInt64/1_000_000 || v < math.MinInt64/1_000_000 {
					return nil, fmt.Errorf("row %d: timestamp out of range", i)
				}
				v *= 1_000_000
			case arrow.Millisecond:
				if v > math.MaxInt64/1000 || v < math.MinInt64/1000 {
					return nil, fmt.Errorf("row %d: timestamp out of range", i)
				}
				v *= 1000
			case arrow.Nanosecond:
				q := v / 1000
				if v%1000 != 0 && v < 0 {
					q-- // floor, not truncation
				}
				v = q
			}
			vals[i] = v
		}
		bits, nulls := validityOf(c.Len(), c.IsValid)
		return fromData(array.NewData(to, c.Len(), []*memory.Buffer{goBuffer(bits), memory.NewBufferBytes(arrow.GetBytes(vals))}, nil, nulls, 0)), nil
	case arrow.LIST:
		lt := to.(*arrow.ListType)
		c, ok := a.(*array.List)
		if !ok {
			return nil, fmt.Errorf("has type %s, want %s", from, to)
		}
		child, err := coerce(c.ListValues(), lt.Elem())
		if err != nil {
			return nil, fmt.Errorf("items: %w", err)
		}
		defer child.Release()
		if !lt.ElemField().Nullable && child.NullN() > 0 {
			return nil, fmt.Errorf("items: null, the item type is not nullable")
		}
		return fromData(array.NewData(to, c.Len(), d.Buffers()[:2], []arrow.ArrayData{child.Data()}, c.NullN(), d.Offset())), nil
	case arrow.STRUCT:
		st := to.(*arrow.StructType)
		c, ok := a.(*array.Struct)
		if !ok {
			return nil, fmt.Errorf("has type %s, want %s", from, to)
		}
		ft := from.(*arrow.StructType)
		if ft.NumFields() != st.NumFields() {
			return nil, fmt.Errorf("has type %s, want %s", from, to)
		}
		kids := make([]arrow.ArrayData, st.NumFields())
		defer func() {
			for _, k := range kids {
				if k != nil {
					k.Release()
				}
			}
		}()
		for i, f := range st.Fields() {
			idx, ok := ft.FieldIdx(f.Name)
			if !ok {
				return nil, fmt.Errorf("struct field %q is missing", f.Name)
			}
			k, err := coerce(array.MakeFromData(d.Children()[idx]), f.Type)
			if err != nil {
				return nil, fmt.Errorf("struct field %q: %w", f.Name, err)
			}
			kd := k.Data()
			kd.Retain()
			k.Release()
			kids[i] = kd
		}
		return fromData(array.NewData(to, c.Len(), d.Buffers()[:1], kids, c.NullN(), d.Offset())), nil
	}
	return nil, fmt.Errorf("has type %s, want %s", from, to)
}

// widen returns 32-bit offsets as 64-bit ones.
func widen(offs []int32) []int64 {
	out := make([]int64, len(offs))
	for i, o := range offs {
		out[i] = int64(o)
	}
	return out
}

// reoffset lays a variable-width column out as to over the same value bytes: offs
// are the column's n+1 offsets (absolute), data its values from offs[0] on. Only the
// offsets are new.
func reoffset(a arrow.Array, to arrow.DataType, offs []int64, data []byte) (arrow.Array, error) {
	n := a.Len()
	base := offs[0]
	var ob []byte
	switch to.ID() {
	case arrow.LARGE_STRING, arrow.LARGE_BINARY:
		o := make([]int64, n+1)
		for i := range o {
			o[i] = offs[i] - base
		}
		ob = arrow.GetBytes(o)
	default:
		if offs[n]-base > math.MaxInt32 {
			return nil, fmt.Errorf("more than 2 GiB of values do not fit %s", to)
		}
		o := make([]int32, n+1)
		for i := range o {
			o[i] = int32(offs[i] - base)
		}
		ob = arrow.GetBytes(o)
	}
	bits, nulls := validityOf(n, a.IsValid)
	return fromData(array.NewData(to, n, []*memory.Buffer{goBuffer(bits), memory.NewBufferBytes(ob), memory.NewBufferBytes(data)}, nil, nulls, 0)), nil
}

// toRoleDict lays a string column (plain or dictionary-encoded) out as the role type.
func toRoleDict(a arrow.Array) (arrow.Array, error) {
	var str func(i int) string
	switch c := a.(type) {
	case *array.String:
		str = c.Value
	case *array.LargeString:
		str = c.Value
	case *array.Dictionary:
		switch dv := c.Dictionary().(type) {
		case *array.String:
			str = func(i int) string { return dv.Value(c.GetValueIndex(i)) }
		case *array.LargeString:
			str = func(i int) string { return dv.Value(c.GetValueIndex(i)) }
		default:
			return nil, fmt.Errorf("has type %s, want a dictionary of strings", a.DataType())
		}
	default:
		return nil, fmt.Errorf("has type %s, want strings", a.DataType())
	}
	n := a.Len()
	index := make(map[string]int8, 4)
	var values []string
	keys := make([]int8, n)
	for i := 0; i < n; i++ {
		if a.IsNull(i) {
			continue
		}
		v := str(i)
		k, ok := index[v]
		if !ok {
			if len(values) == MaxDistinctRoles {
				return nil, fmt.Errorf("row %d: more than %d distinct role values in one batch", i, MaxDistinctRoles)
			}
			k = int8(len(values))
			index[v] = k
			values = append(values, v)
		}
		keys[i] = k
	}
	offs := make([]int32, len(values)+1)
	var data []byte
	for i, v := range values {
		data = append(data, v...)
		offs[i+1] = int32(len(data))
	}
	dict := array.NewData(arrow.BinaryTypes.String, len(values), []*memory.Buffer{nil, memory.NewBufferBytes(arrow.GetBytes(offs)), memory.NewBufferBytes(data)}, nil, 0, 0)
	defer dict.Release()
	bits, nulls := validityOf(n, a.IsValid)
	return fromData(array.NewDataWithDictionary(roleType, n, []*memory.Buffer{goBuffer(bits), memory.NewBufferBytes(arrow.GetBytes(keys))}, nulls, 0, dict)), nil
}

// coerceInt converts a column of any integer type to to (int8, int32 or int64),
// refusing a value out of range.
func coerceInt(a arrow.Array, to arrow.DataType) (arrow.Array, error) {
	var get func(int) int64
	switch c := a.(type) {
	case *array.Int8:
		get = func(i int) int64 { return int64(c.Value(i)) }
	case *array.Int16:
		get = func(i int) int64 { return int64(c.Value(i)) }
	case *array.Int32:
		get = func(i int) int64 { return int64(c.Value(i)) }
	case *array.Int64:
		get = c.Value
	case *array.Uint8:
		get = func(i int) int64 { return int64(c.Value(i)) }
	case *array.Uint16:
		get = func(i int) int64 { return int64(c.Value(i)) }
	case *array.Uint32:
		get = func(i int) int64 { return int64(c.Value(i)) }
	default:
		return nil, fmt.Errorf("has type %s, want %s", a.DataType(), to)
	}
	n := a.Len()
	var lo, hi int64
	switch to.ID() {
	case arrow.INT8:
		lo, hi = math.MinInt8, math.MaxInt8
	case arrow.INT32:
		lo, hi = math.MinInt32, math.MaxInt32
	default:
		lo, hi = math.MinInt64, math.MaxInt64
	}
	buf := make([]byte, n*to.(arrow.FixedWidthDataType).BitWidth()/8)
	for i := 0; i < n; i++ {
		if a.IsNull(i) {
			continue
		}
		v := get(i)
		if v < lo || v > hi {
			return nil, fmt.Errorf("row %d: %d does not fit %s", i, v, to)
		}
		switch to.ID() {
		case arrow.INT8:
			buf[i] = byte(int8(v))
		case arrow.INT32:
			arrow.Int32Traits.CastFromBytes(buf)[i] = int32(v)
		default:
			arrow.Int64Traits.CastFromBytes(buf)[i] = v
		}
	}
	bits, nulls := validityOf(n, a.IsValid)
	return fromData(array.NewData(to, n, []*memory.Buffer{goBuffer(bits), memory.NewBufferBytes(buf)}, nil, nulls, 0)), nil
}
