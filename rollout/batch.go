package rollout

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"
	"weak"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lancectx/lancectx/api"
)

// ToBatch builds one Arrow record batch of records in exactly s's column order, for
// appending to a dataset whose on-disk schema is s (nil means Schema()). s may be an
// older rollout schema with fewer nullable columns, or a newer one with nullable
// columns this package does not know (filled with nulls). Refused: a record that sets
// a field s has no column for (a 400 *api.Error naming the record and field), and a
// schema whose known columns have other types or that requires a column this package
// cannot fill (a plain error: the store, not the request, is wrong).
//
// Records must have their defaults applied (the decoders do that); ToBatch fills the
// fixed defaults (problem_id, role, content_type) when they are empty, and refuses a
// zero created_at. Columns are built straight from Go slices (a few allocations per
// column, no builders), so the batch lives in Go memory; the caller releases it.
func ToBatch(records []AddRecord, s *arrow.Schema) (arrow.RecordBatch, error) {
	if s == nil {
		s = rolloutSchema
	}
	for i := range records {
		if records[i].CreatedAt.IsZero() {
			return nil, fieldErr(i, "created_at", "not set")
		}
	}
	p, err := planFor(s)
	if err != nil {
		return nil, err
	}
	// A field the record sets but the schema lacks would be silently dropped.
	for _, col := range p.missing {
		for i := range records {
			if col.spec.set(&records[i]) {
				return nil, api.InvalidRequest("records[%d].%s: this store's dataset has no %s column", i, col.name, col.name)
			}
		}
	}
	// The columns are gathered in a pooled slice: NewRecordBatch copies it.
	cp := colSlices.Get().(*[]arrow.Array)
	cols := (*cp)[:0]
	release := func() {
		for _, c := range cols {
			c.Release()
		}
		clear(cols)
		*cp = cols[:0]
		colSlices.Put(cp)
	}
	n := len(records)
	for _, pc := range p.cols {
		var arr arrow.Array
		col := pc.spec
		switch {
		case col.build == nil:
			arr = array.MakeArrayOfNull(memory.DefaultAllocator, pc.field.Type, n)
		default:
			anySet := col.required
			for i := 0; i < n && !anySet; i++ {
				anySet = pc.present(&records[i])
			}
			if !pc.field.Nullable && !col.required {
				for i := range records {
					if !col.set(&records[i]) {
						release()
						return nil, api.InvalidRequest("records[%d].%s: required by this store's dataset", i, pc.field.Name)
					}
				}
			}
			if !anySet {
				arr = pc.nulls(n)
				break
			}
			var err error
			switch {
			case pc.lastDict != nil:
				arr, err = buildRoleCached(records, pc.lastDict)
			case pc.repeats >= 0 && allProblemIDsDefault(records):
				// Every problem_id is its rollout_id: the rollout_id column (built
				// before, immutable) serves as both.
				arr = cols[pc.repeats]
				arr.Retain()
			case pc.lastDefault != nil && allContentTypesDefault(records):
				arr = pc.defaults(n)
			default:
				arr, err = col.build(records)
			}
			if err != nil {
				release()
				return nil, err
			}
		}
		cols = append(cols, arr)
	}
	rec := array.NewRecordBatch(s, cols, int64(n))
	release()
	return rec, nil
}

// colSlices recycles ToBatch's column lists (one slot per dataset column, about 600
// bytes a batch otherwise).
var colSlices = sync.Pool{New: func() any { return new([]arrow.Array) }}

// batchPlan is what ToBatch works out once per dataset schema: each column's builder,
// with the schema's types and nullability checked, and the rollout columns the
// schema lacks.
type batchPlan struct {
	cols    []planCol
	missing []missingCol
}

type planCol struct {
	field arrow.Field
	spec  colSpec // build is nil for a nullable column unknown to this package
	// present reports whether a record's value of the column is not null: spec.set,
	// except for relationships, where an empty list is not null yet sets nothing a
	// store must have a column for.
	present func(*AddRecord) bool
	// lastNulls is the all-null column of the last length asked for: appends of one
	// client are mostly the same size, and an all-null column is immutable, so
	// batches share it.
	lastNulls *atomic.Pointer[nullCol]
	// repeats is, for problem_id, the index among the plan's columns of rollout_id
	// when that comes first (-1 otherwise): a problem_id left out is the rollout_id.
	repeats int
	// lastDefault is, for content_type, the column of the last length asked for
	// whose every value is DefaultContentType (most appends leave it out); shared
	// like lastNulls.
	lastDefault *atomic.Pointer[nullCol]
	// lastDict is the role dictionary of the last batch (role columns only): a
	// store's batches mostly hold the same few roles in the same order, and a
	// dictionary is immutable, so batches share it. Tests call it through
	// buildRoleCached.
	lastDict *atomic.Pointer[roleDict]
}

// roleDict is a role dictionary and the values it holds, in order.
type roleDict struct {
	values []string
	arr    arrow.Array
}

type nullCol struct {
	n   int
	arr arrow.Array
}

// nulls returns a column of n nulls of the column's type (the caller releases it).
func (pc planCol) nulls(n int) arrow.Array {
	if c := pc.lastNulls.Load(); c != nil && c.n == n && c.arr.Data().Buffers() != nil {
		// (Buffers is nil only if a caller released the column more often than it
		// retained it; then it is rebuilt rather than handed out broken.)
		c.arr.Retain()
		return c.arr
	}
	arr := nullColumn(pc.field.Type, n)
	arr.Retain() // the cache's reference, kept for good
	pc.lastNulls.Store(&nullCol{n: n, arr: arr})
	return arr
}

// defaults returns a column of n DefaultContentType values (the caller releases it),
// from the cache when it has that length.
func (pc planCol) defaults(n int) arrow.Array {
	if c := pc.lastDefault.Load(); c != nil && c.n == n && c.arr.Data().Buffers() != nil {
		c.arr.Retain()
		return c.arr
	}
	values := make([]string, n)
	for i := range values {
		values[i] = DefaultContentType
	}
	arr := stringArray(values)
	arr.Retain() // the cache's reference, kept for good (see nulls)
	pc.lastDefault.Store(&nullCol{n: n, arr: arr})
	return arr
}

// allProblemIDsDefault reports whether every record's problem_id is its rollout_id.
func allProblemIDsDefault(recs []AddRecord) bool {
	for i := range recs {
		if r := &recs[i]; r.ProblemID != "" && r.ProblemID != r.RolloutID {
			return false
		}
	}
	return true
}

// allContentTypesDefault reports whether every record's content_type is the default.
func allContentTypesDefault(recs []AddRecord) bool {
	for i := range recs {
		if ct := recs[i].ContentType; ct != "" && ct != DefaultContentType {
			return false
		}
	}
	return true
}

type missingCol struct {
	name string
	spec colSpec
}

// plans caches the plans by schema (a store's schema is one value for the life of its
// shard), weakly: an entry goes when its schema is collected (after its shard closed),
// so a worker that opens and closes many stores does not pin their schemas.
var plans sync.Map // weak.Pointer[arrow.Schema] -> *batchPlan

func planFor(s *arrow.Schema) (*batchPlan, error) {
	key := weak.Make(s)
	if p, ok := plans.Load(key); ok {
		return p.(*batchPlan), nil
	}
	p := &batchPlan{}
	for i := range rolloutSchema.NumFields() {
		f := rolloutSchema.Field(i) // Field, not Fields: Fields copies the slice
		if s.HasField(f.Name) {
			continue
		}
		col := column(f.Name)
		if col.required {
			return nil, fmt.Errorf("rollout: dataset schema lacks required column %q", f.Name)
		}
		p.missing = append(p.missing, missingCol{name: f.Name, spec: col})
	}
	for fi := range s.NumFields() {
		f := s.Field(fi)
		col := column(f.Name)
		switch {
		case col.build == nil:
			if !f.Nullable {
				return nil, fmt.Errorf("rollout: dataset column %q is not nullable and unknown to the rollout schema", f.Name)
			}
		case !arrow.TypeEqual(f.Type, col.typ):
			return nil, fmt.Errorf("rollout: dataset column %q has type %s; the rollout schema has %s", f.Name, f.Type, col.typ)
		}
		pc := planCol{field: f, spec: col, present: col.set, lastNulls: new(atomic.Pointer[nullCol])}
		pc.repeats = -1
		switch f.Name {
		case ColRole:
			pc.lastDict = new(atomic.Pointer[roleDict])
		case ColProblemID:
			for j, prev := range p.cols {
				if prev.field.Name == ColRolloutID {
					pc.repeats = j
				}
			}
		case ColContentType:
			pc.lastDefault = new(atomic.Pointer[nullCol])
		}
		if f.Name == ColRelationships {
			pc.present = func(r *AddRecord) bool { return r.Relationships != nil }
		}
		p.cols = append(p.cols, pc)
	}
	if _, loaded := plans.LoadOrStore(key, p); !loaded {
		// The plan holds the fields' types, not the schema: the schema can go.
		runtime.AddCleanup(s, func(k weak.Pointer[arrow.Schema]) { plans.Delete(k) }, key)
	}
	return p, nil
}

// zeros backs the validity bitmaps and offsets of all-null columns: every bit clear
// and every offset 0 is what a column of n nulls holds. Buffers made with
// memory.NewBufferBytes are never freed or written through, so every such column can
// share it; a request's unset optional columns (most of them, usually) then cost no
// bytes beyond the array headers.
var zeros = make([]byte, 64<<10)

// nullColumn returns a column of n nulls of type t (one of the rollout column types).
func nullColumn(t arrow.DataType, n int) arrow.Array {
	bits := bitutil.BytesForBits(int64(n))
	var width int64
	switch t.ID() {
	case arrow.STRING, arrow.BINARY, arrow.LIST:
		width = 4
	case arrow.LARGE_STRING, arrow.LARGE_BINARY, arrow.LARGE_LIST:
		width = 8
	case arrow.INT32, arrow.FLOAT32:
		width = 4
	case arrow.INT64, arrow.TIMESTAMP:
		width = 8
	case arrow.INT8:
		width = 1
	case arrow.BOOL:
		width = 0 // a bitmap, as long as the validity
	default:
		return array.MakeArrayOfNull(memory.DefaultAllocator, t, n)
	}
	valuesLen := width * int64(n+1)
	if t.ID() == arrow.BOOL {
		valuesLen = bits
	}
	if max(bits, valuesLen) > int64(len(zeros)) {
		return array.MakeArrayOfNull(memory.DefaultAllocator, t, n)
	}
	validity := memory.NewBufferBytes(zeros[:bits])
	values := memory.NewBufferBytes(zeros[:valuesLen])
	var d *array.Data
	switch t.ID() {
	case arrow.STRING, arrow.BINARY, arrow.LARGE_STRING, arrow.LARGE_BINARY:
		d = array.NewData(t, n, []*memory.Buffer{validity, values, memory.NewBufferBytes(zeros[:0])}, nil, n, 0)
	case arrow.LIST, arrow.LARGE_LIST:
		child := array.MakeArrayOfNull(memory.DefaultAllocator, t.(arrow.ListLikeType).Elem(), 0)
		d = array.NewData(t, n, []*memory.Buffer{validity, values}, []arrow.ArrayData{child.Data()}, n, 0)
		child.Release()
	default:
		if t.ID() != arrow.BOOL {
			values = memory.NewBufferBytes(zeros[:width*int64(n)])
		}
		d = array.NewData(t, n, []*memory.Buffer{validity, values}, nil, n, 0)
	}
	return fromData(d)
}

// colSpec says how one rollout column is built from records.
type colSpec struct {
	typ      arrow.DataType
	required bool
	set      func(*AddRecord) bool // the record has a non-null value
	build    func([]AddRecord) (arrow.Array, error)
}

func always(*AddRecord) bool { return true }

func column(name string) colSpec {
	str := arrow.BinaryTypes.String
	large := arrow.BinaryTypes.LargeString
	switch name {
	case ColID:
		return reqString(func(r *AddRecord) string { return r.ID })
	case ColRolloutID:
		return reqString(func(r *AddRecord) string { return r.RolloutID })
	case ColProblemID:
		return reqString(func(r *AddRecord) string {
			if r.ProblemID == "" {
				return r.RolloutID
			}
			return r.ProblemID
		})
	case ColDataset:
		return optString(str, func(r *AddRecord) *string { return r.Dataset })
	case ColSequenceOrder:
		return colSpec{arrow.PrimitiveTypes.Int32, true, always, func(recs []AddRecord) (arrow.Array, error) {
			return fixedArray(arrow.PrimitiveTypes.Int32, recs, func(r *AddRecord) (int32, bool) { return r.SequenceOrder, true }), nil
		}}
	case ColRole:
		return colSpec{roleType, true, always, buildRole}
	case ColCreatedAt:
		return colSpec{timestampType, true, always, func(recs []AddRecord) (arrow.Array, error) {
			return fixedArray(timestampType, recs, func(r *AddRecord) (int64, bool) { return r.CreatedAt.UnixMicro(), true }), nil
		}}
	case ColContent:
		return optString(large, func(r *AddRecord) *string { return r.Content })
	case ColContentType:
		return reqString(func(r *AddRecord) string {
			if r.ContentType == "" {
				return DefaultContentType
			}
			return r.ContentType
		})
	case ColModelInputString:
		return optString(large, func(r *AddRecord) *string { return r.ModelInputString })
	case ColModelOutputString:
		return optString(large, func(r *AddRecord) *string { return r.ModelOutputString })
	case ColRationale:
		return optString(large, func(r *AddRecord) *string { return r.Rationale })
	case ColProblemText:
		return optString(large, func(r *AddRecord) *string { return r.ProblemText })
	case ColUserMetadata:
		return optString(large, func(r *AddRecord) *string { return r.UserMetadata })
	case ColInputTokens:
		return optList(int32List, func(r *AddRecord) []int32 { return r.InputTokens })
	case ColOutputTokens:
		return optList(int32List, func(r *AddRecord) []int32 { return r.OutputTokens })
	case ColNumInputTokens:
		return optFixed(arrow.PrimitiveTypes.Int32, func(r *AddRecord) *int32 { return r.NumInputTokens })
	case ColNumOutputTokens:
		return optFixed(arrow.PrimitiveTypes.Int32, func(r *AddRecord) *int32 { return r.NumOutputTokens })
	case ColOutputLogprobs:
		return optList(float32List, func(r *AddRecord) []float32 { return r.OutputLogprobs })
	case ColInputLogprobs:
		return optList(float32List, func(r *AddRecord) []float32 { return r.InputLogprobs })
	case ColRefLogprobs:
		return optList(float32List, func(r *AddRecord) []float32 { return r.RefLogprobs })
	case ColLossMask:
		return optList(int8List, func(r *AddRecord) []int8 { return r.LossMask })
	case ColAdvantage:
		return optFixed(arrow.PrimitiveTypes.Float32, func(r *AddRecord) *float32 { return r.Advantage })
	case ColReward:
		return optFixed(arrow.PrimitiveTypes.Float32, func(r *AddRecord) *float32 { return r.Reward })
	case ColRawReward:
		return optFixed(arrow.PrimitiveTypes.Float32, func(r *AddRecord) *float32 { return r.RawReward })
	case ColGraderID:
		return optString(str, func(r *AddRecord) *string { return r.GraderID })
	case ColScore:
		return optFixed(arrow.PrimitiveTypes.Float32, func(r *AddRecord) *float32 { return r.Score })
	case ColIncludeInTraining:
		return colSpec{arrow.FixedWidthTypes.Boolean, false, func(r *AddRecord) bool { return r.IncludeInTraining != nil }, buildIncludeInTraining}
	case ColExcludeReason:
		return optString(str, func(r *AddRecord) *string { return r.ExcludeReason })
	case ColPolicyVersion:
		return optString(str, func(r *AddRecord) *string { return r.PolicyVersion })
	case ColRelationships:
		return colSpec{relList, false, func(r *AddRecord) bool { return len(r.Relationships) > 0 }, buildRelationships}
	case ColBinaryPayload:
		return colSpec{arrow.BinaryTypes.LargeBinary, false, func(r *AddRecord) bool { return r.BinaryPayload != nil },
			func(recs []AddRecord) (arrow.Array, error) {
				return varArray(arrow.BinaryTypes.LargeBinary, recs, func(r *AddRecord) ([]byte, bool) { return r.BinaryPayload, r.BinaryPayload != nil })
			}}
	case ColPayloadSize:
		return optFixed(arrow.PrimitiveTypes.Int64, func(r *AddRecord) *int64 { return r.PayloadSize })
	case ColPayloadChecksum:
		return optString(str, func(r *AddRecord) *string { return r.PayloadChecksum })
	case ColArtifactType:
		return optString(str, func(r *AddRecord) *string { return r.ArtifactType })
	case ColMetadata:
		return colSpec{large, false, func(r *AddRecord) bool { return len(r.Metadata) > 0 },
			func(recs []AddRecord) (arrow.Array, error) {
				return varArray(large, recs, func(r *AddRecord) ([]byte, bool) { return r.Metadata, len(r.Metadata) > 0 })
			}}
	}
	return colSpec{}
}

// goBuffer wraps Go memory as an Arrow buffer (nil stays nil: no validity bitmap).
func goBuffer(b []byte) *memory.Buffer {
	if b == nil {
		return nil
	}
	return memory.NewBufferBytes(b)
}

// validityOf returns the validity bitmap of n values (nil when none is null) and the
// null count.
func validityOf(n int, valid func(i int) bool) ([]byte, int) {
	nulls := 0
	for i := 0; i < n; i++ {
		if !valid(i) {
			nulls++
		}
	}
	if nulls == 0 {
		return nil, 0
	}
	bits := make([]byte, bitutil.BytesForBits(int64(n)))
	for i := 0; i < n; i++ {
		if valid(i) {
			bitutil.SetBit(bits, i)
		}
	}
	return bits, nulls
}

func fromData(d arrow.ArrayData) arrow.Array {
	defer d.Release()
	return array.MakeFromData(d)
}

// fixedArray builds a fixed-width column; get reports false for a null. The values
// and the validity bitmap share one allocation.
func fixedArray[T int32 | int64 | float32 | int8](t arrow.DataType, recs []AddRecord, get func(*AddRecord) (T, bool)) arrow.Array {
	n := len(recs)
	nulls := 0
	for i := range recs {
		if _, ok := get(&recs[i]); !ok {
			nulls++
		}
	}
	width := int(unsafe.Sizeof(T(0)))
	valLen := width * n
	bitsLen := 0
	if nulls > 0 {
		bitsLen = int(bitutil.BytesForBits(int64(n)))
	}
	mem := make([]byte, valLen+bitsLen) // values first: aligned as the allocation is
	vals := arrow.GetData[T](mem[:valLen:valLen])
	var bits []byte
	if nulls > 0 {
		bits = mem[valLen : valLen+bitsLen : valLen+bitsLen]
	}
	for i := range recs {
		v, ok := get(&recs[i])
		vals[i] = v
		if ok && bits != nil {
			bitutil.SetBit(bits, i)
		}
	}
	return fromData(array.NewData(t, n, []*memory.Buffer{goBuffer(bits), memory.NewBufferBytes(mem[:valLen:valLen])}, nil, nulls, 0))
}

func optFixed[T int32 | int64 | float32](t arrow.DataType, get func(*AddRecord) *T) colSpec {
	return colSpec{t, false, func(r *AddRecord) bool { return get(r) != nil }, func(recs []AddRecord) (arrow.Array, error) {
		return fixedArray(t, recs, func(r *AddRecord) (T, bool) {
			if p := get(r); p != nil {
				return *p, true
			}
			var zero T
			return zero, false
		}), nil
	}}
}

// varArray builds a string or binary column (32- or 64-bit offsets by type). The
// offsets, the validity bitmap and the values share one allocation (three otherwise,
// for each string column of each batch).
func varArray[S string | []byte](t arrow.DataType, recs []AddRecord, get func(*AddRecord) (S, bool)) (arrow.Array, error) {
	n := len(recs)
	total, nulls := 0, 0
	for i := range recs {
		v, ok := get(&recs[i])
		total += len(v)
		if !ok {
			nulls++
		}
	}
	large := t.ID() == arrow.LARGE_STRING || t.ID() == arrow.LARGE_BINARY
	width := 4
	if large {
		width = 8
	} else if total > 1<<31-1 {
		return nil, fmt.Errorf("rollout: %d bytes do not fit a %s column", total, t)
	}
	offLen := width * (n + 1)
	bitsLen := 0
	if nulls > 0 {
		bitsLen = int(bitutil.BytesForBits(int64(n)))
	}
	// Offsets first (aligned as the allocation is), then the bitmap, then the values.
	mem := make([]byte, offLen+bitsLen+total)
	offsets := mem[:offLen:offLen]
	var bits []byte
	if nulls > 0 {
		bits = mem[offLen : offLen+bitsLen : offLen+bitsLen]
	}
	data := mem[offLen+bitsLen : offLen+bitsLen : len(mem)]
	var offs32 []int32
	var offs64 []int64
	if large {
		offs64 = arrow.GetData[int64](offsets)
	} else {
		offs32 = arrow.GetData[int32](offsets)
	}
	for i := range recs {
		v, ok := get(&recs[i])
		if ok {
			data = append(data, v...)
			if bits != nil {
				bitutil.SetBit(bits, i)
			}
		}
		if large {
			offs64[i+1] = int64(len(data))
		} else {
			offs32[i+1] = int32(len(data))
		}
	}
	return fromData(array.NewData(t, n, []*memory.Buffer{goBuffer(bits), memory.NewBufferBytes(offsets), memory.NewBufferBytes(data)}, nil, nulls, 0)), nil
}

func reqString(get func(*AddRecord) string) colSpec {
	return colSpec{arrow.BinaryTypes.String, true, always, func(recs []AddRecord) (arrow.Array, error) {
		return varArray(arrow.BinaryTypes.String, recs, func(r *AddRecord) (string, bool) { return get(r), true })
	}}
}

func optString(t arrow.DataType, get func(*AddRecord) *string) colSpec {
	return colSpec{t, false, func(r *AddRecord) bool { return get(r) != nil }, func(recs []AddRecord) (arrow.Array, error) {
		return varArray(t, recs, func(r *AddRecord) (string, bool) {
			if p := get(r); p != nil {
				return *p, true
			}
			return "", false
		})
	}}
}

// listData builds the offsets and validity of a list column whose rows have
// lengths(i) items (-1 for a null row).
func listData(n int, length func(i int) int) (offsets []int32, bits []byte, nulls int, total int, err error) {
	offsets = make([]int32, n+1)
	for i := 0; i < n; i++ {
		if l := length(i); l > 0 {
			total += l
		}
		if total > 1<<31-1 {
			return nil, nil, 0, 0, fmt.Errorf("rollout: %d list items do not fit a list column", total)
		}
		offsets[i+1] = int32(total)
	}
	bits, nulls = validityOf(n, func(i int) bool { return length(i) >= 0 })
	return offsets, bits, nulls, total, nil
}

func optList[T int32 | int8 | float32](t *arrow.ListType, get func(*AddRecord) []T) colSpec {
	return colSpec{t, false, func(r *AddRecord) bool { return get(r) != nil }, func(recs []AddRecord) (arrow.Array, error) {
		offsets, bits, nulls, total, err := listData(len(recs), func(i int) int {
			if v := get(&recs[i]); v != nil {
				return len(v)
			}
			return -1
		})
		if err != nil {
			return nil, err
		}
		vals := make([]T, 0, total)
		for i := range recs {
			vals = append(vals, get(&recs[i])...)
		}
		child := array.NewData(t.Elem(), total, []*memory.Buffer{nil, memory.NewBufferBytes(arrow.GetBytes(vals))}, nil, 0, 0)
		defer child.Release()
		return fromData(array.NewData(t, len(recs), []*memory.Buffer{goBuffer(bits), memory.NewBufferBytes(arrow.GetBytes(offsets))},
			[]arrow.ArrayData{child}, nulls, 0)), nil
	}}
}

func buildIncludeInTraining(recs []AddRecord) (arrow.Array, error) {
	n := len(recs)
	vals := make([]byte, bitutil.BytesForBits(int64(n)))
	for i := range recs {
		if p := recs[i].IncludeInTraining; p != nil && *p {
			bitutil.SetBit(vals, i)
		}
	}
	bits, nulls := validityOf(n, func(i int) bool { return recs[i].IncludeInTraining != nil })
	return fromData(array.NewData(arrow.FixedWidthTypes.Boolean, n, []*memory.Buffer{goBuffer(bits), memory.NewBufferBytes(vals)}, nil, nulls, 0)), nil
}

func roleOf(r *AddRecord) string {
	if r.Role == "" {
		return DefaultRole
	}
	return r.Role
}

// buildRole builds the Dictionary(Int8, Utf8) role column: the distinct roles in
// first-seen order and one index per row.
func buildRole(recs []AddRecord) (arrow.Array, error) {
	return buildRoleCached(recs, nil)
}

// buildRoleCached is buildRole that takes the dictionary from cache when it holds the
// same values in the same order, and leaves its own there otherwise (cache may be
// nil). The batches that share a dictionary each hold a reference to it.
func buildRoleCached(recs []AddRecord, cache *atomic.Pointer[roleDict]) (arrow.Array, error) {
	// A handful of roles is the rule: they are looked up in a short list (the last
	// one found first), and in a map only past a few.
	var small [8]string
	values := small[:0]
	var index map[string]int8
	keys := make([]int8, len(recs))
	last := -1
	for i := range recs {
		role := roleOf(&recs[i])
		k := -1
		switch {
		case last >= 0 && values[last] == role:
			k = last
		case index != nil:
			if v, ok := index[role]; ok {
				k = int(v)
			}
		default:
			for j, v := range values {
				if v == role {
					k = j
					break
				}
			}
		}
		if k < 0 {
			// The Int8 indices address MaxDistinctRoles values.
			if len(values) == MaxDistinctRoles {
				return nil, api.InvalidRequest("records[%d].role: more than %d distinct role values in one batch", i, MaxDistinctRoles)
			}
			k = len(values)
			values = append(values, role)
			if index == nil && len(values) > len(small) {
				index = make(map[string]int8, 2*len(values))
				for j, v := range values {
					index[v] = int8(j)
				}
			} else if index != nil {
				index[role] = int8(k)
			}
		}
		keys[i] = int8(k)
		last = k
	}
	var dict arrow.Array
	if cache != nil {
		if c := cache.Load(); c != nil && slices.Equal(c.values, values) && c.arr.Data().Buffers() != nil {
			// (Buffers is nil only after more releases than retains; see planCol.nulls.)
			c.arr.Retain()
			dict = c.arr
		}
	}
	if dict == nil {
		dict = stringArray(values)
		if cache != nil {
			// The cache's reference is never given back, also when another
			// dictionary replaces this one: a batch may be taking it at that moment.
			// (Go memory: the collector frees it once no batch holds it.)
			dict.Retain()
			cache.Store(&roleDict{values: slices.Clone(values), arr: dict})
		}
	}
	defer dict.Release()
	return fromData(array.NewDataWithDictionary(roleType, len(recs), []*memory.Buffer{nil, memory.NewBufferBytes(arrow.GetBytes(keys))},
		0, 0, dict.Data().(*array.Data))), nil
}

// stringArray builds a Utf8 column of values (none null).
func stringArray(values []string) arrow.Array {
	total := 0
	for _, v := range values {
		total += len(v)
	}
	offs := make([]int32, len(values)+1)
	data := make([]byte, 0, total)
	for i, v := range values {
		data = append(data, v...)
		offs[i+1] = int32(len(data))
	}
	return fromData(array.NewData(arrow.BinaryTypes.String, len(values),
		[]*memory.Buffer{nil, memory.NewBufferBytes(arrow.GetBytes(offs)), memory.NewBufferBytes(data)}, nil, 0, 0))
}

func buildRelationships(recs []AddRecord) (arrow.Array, error) {
	offsets, bits, nulls, total, err := listData(len(recs), func(i int) int {
		if rels := recs[i].Relationships; rels != nil {
			return len(rels)
		}
		return -1
	})
	if err != nil {
		return nil, err
	}
	// Flatten the items into pseudo-records so the column helpers can build the
	// struct's children.
	items := make([]AddRecord, 0, total)
	for i := range recs {
		for _, rel := range recs[i].Relationships {
			items = append(items, AddRecord{ID: rel.TargetID, RolloutID: rel.Relation, Reward: rel.Weight})
		}
	}
	targets, err := varArray(arrow.BinaryTypes.String, items, func(r *AddRecord) (string, bool) { return r.ID, true })
	if err != nil {
		return nil, err
	}
	defer targets.Release()
	relations, err := varArray(arrow.BinaryTypes.String, items, func(r *AddRecord) (string, bool) { return r.RolloutID, true })
	if err != nil {
		return nil, err
	}
	defer relations.Release()
	weights := fixedArray(arrow.PrimitiveTypes.Float32, items, func(r *AddRecord) (float32, bool) {
		if r.Reward != nil {
			return *r.Reward, true
		}
		return 0, false
	})
	defer weights.Release()
	st := array.NewData(relStruct, total, []*memory.Buffer{nil}, []arrow.ArrayData{targets.Data(), relations.Data(), weights.Data()}, 0, 0)
	defer st.Release()
	return fromData(array.NewData(relList, len(recs), []*memory.Buffer{goBuffer(bits), memory.NewBufferBytes(arrow.GetBytes(offsets))},
		[]arrow.ArrayData{st}, nulls, 0)), nil
}
