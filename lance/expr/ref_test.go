package expr

import (
	"bytes"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// This file holds the test fixture (a record batch with a column of every supported
// type, nulls included) and a reference evaluator: a row-at-a-time interpreter of the
// parsed tree, written for obviousness rather than speed, against which Eval is checked.

type fixture struct {
	schema *arrow.Schema
	rec    arrow.RecordBatch
	cells  map[string][]any // column name -> row -> Go value, nil for NULL

	mu        sync.Mutex
	likeCache map[string]*regexp.Regexp // reference LIKE patterns, compiled once
}

var nyZone = func() string {
	if _, err := time.LoadLocation("America/New_York"); err == nil {
		return "America/New_York"
	}
	return "-05:00"
}()

func fixtureFields() []arrow.Field {
	f := func(name string, t arrow.DataType) arrow.Field {
		return arrow.Field{Name: name, Type: t, Nullable: true}
	}
	return []arrow.Field{
		f("i8", arrow.PrimitiveTypes.Int8),
		f("i16", arrow.PrimitiveTypes.Int16),
		f("i32", arrow.PrimitiveTypes.Int32),
		f("i64", arrow.PrimitiveTypes.Int64),
		f("u8", arrow.PrimitiveTypes.Uint8),
		f("u16", arrow.PrimitiveTypes.Uint16),
		f("u32", arrow.PrimitiveTypes.Uint32),
		f("u64", arrow.PrimitiveTypes.Uint64),
		f("f32", arrow.PrimitiveTypes.Float32),
		f("f64", arrow.PrimitiveTypes.Float64),
		f("s", arrow.BinaryTypes.String),
		f("ls", arrow.BinaryTypes.LargeString),
		f("bin", arrow.BinaryTypes.Binary),
		f("sv", arrow.BinaryTypes.StringView),
		f("d8", &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}),
		f("du16", &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Uint16, ValueType: arrow.BinaryTypes.LargeString}),
		f("di64", &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.PrimitiveTypes.Int64}),
		f("b", arrow.FixedWidthTypes.Boolean),
		f("b2", arrow.FixedWidthTypes.Boolean),
		f("ts_s", &arrow.TimestampType{Unit: arrow.Second}),
		f("ts_ms", &arrow.TimestampType{Unit: arrow.Millisecond, TimeZone: "UTC"}),
		f("ts_us", &arrow.TimestampType{Unit: arrow.Microsecond}),
		f("ts_ns", &arrow.TimestampType{Unit: arrow.Nanosecond}),
		f("ts_k", &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "+05:30"}),
		f("ts_ny", &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: nyZone}),
		f("d32", arrow.FixedWidthTypes.Date32),
		f("d64", arrow.FixedWidthTypes.Date64),
		f("weird name", arrow.PrimitiveTypes.Int64),
		f("Mixed", arrow.PrimitiveTypes.Int32),
		f("timestamp", &arrow.TimestampType{Unit: arrow.Millisecond}),
		f("lst", arrow.ListOf(arrow.PrimitiveTypes.Int64)),
		f("nul", arrow.Null),
	}
}

// Base instants that the literal pools revolve around, so comparisons hit equality.
var (
	baseTime = time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	baseDay  = baseTime.Unix() / 86400
)

var stringPool = []string{"", "a", "ab", "abc", "abd", "b", "ba", "héllo", "日本", "a%b", "a_b", `a\b`, "O'Brien", "A", "zz", "aé", "%", "_"}

func intPool(lo, hi int64) []int64 {
	p := []int64{lo, hi, 0, 1, -1, 2, 3, 5, 7, 100, -100, lo + 1, hi - 1}
	out := p[:0]
	for _, v := range p {
		if v >= lo && v <= hi {
			out = append(out, v)
		}
	}
	return out
}

func typeBounds(dt arrow.DataType) (int64, int64) {
	switch dt.ID() {
	case arrow.INT8:
		return math.MinInt8, math.MaxInt8
	case arrow.INT16:
		return math.MinInt16, math.MaxInt16
	case arrow.INT32:
		return math.MinInt32, math.MaxInt32
	case arrow.UINT8:
		return 0, math.MaxUint8
	case arrow.UINT16:
		return 0, math.MaxUint16
	case arrow.UINT32:
		return 0, math.MaxUint32
	case arrow.UINT64:
		return 0, math.MaxInt64
	}
	return math.MinInt64, math.MaxInt64
}

var floatPool = []float64{0, math.Copysign(0, -1), 1, -1, 1.5, 2.5, -2.5, 3, 100, 1e300, -1e300, math.NaN(), math.Inf(1), math.Inf(-1), 0.1, 7}

func tickPool(dt arrow.DataType) []int64 {
	unit := unitNanos(dt)
	base := baseTime.UnixNano() / unit
	if dt.ID() == arrow.DATE32 {
		return []int64{baseDay, baseDay - 1, baseDay + 1, 0, -1, baseDay + 365}
	}
	p := []int64{base, base - 1, base + 1, base + 1000, base - 1000, 0, -1}
	switch dt.ID() {
	case arrow.DATE64:
		return []int64{baseDay * 86400000, (baseDay - 1) * 86400000, (baseDay + 1) * 86400000, 0, -86400000, base + 1}
	}
	// Timestamps at midnight of the base day in UTC and in the column's zone.
	p = append(p, baseDay*86400*int64(time.Second)/unit)
	return p
}

// newFixture builds n rows of random values, about a fifth of them NULL.
func newFixture(seed uint64, n int) *fixture {
	rng := rand.New(rand.NewPCG(seed, 7))
	mem := memory.DefaultAllocator
	fields := fixtureFields()
	fx := &fixture{schema: arrow.NewSchema(fields, nil), cells: map[string][]any{}}
	cols := make([]arrow.Array, len(fields))
	isNull := func() bool { return rng.IntN(5) == 0 }
	for ci, f := range fields {
		cells := make([]any, n)
		switch dt := f.Type.(type) {
		case *arrow.Int8Type, *arrow.Int16Type, *arrow.Int32Type, *arrow.Int64Type:
			lo, hi := typeBounds(dt)
			pool := intPool(lo, hi)
			b := array.NewInt64Builder(mem)
			for i := range cells {
				if isNull() {
					b.AppendNull()
					continue
				}
				v := pool[rng.IntN(len(pool))]
				cells[i] = v
				b.Append(v)
			}
			tmp := b.NewArray()
			cols[ci] = castInts(tmp, dt)
			tmp.Release()
		case *arrow.Uint8Type, *arrow.Uint16Type, *arrow.Uint32Type, *arrow.Uint64Type:
			lo, hi := typeBounds(dt)
			pool := intPool(lo, hi)
			b := array.NewUint64Builder(mem)
			for i := range cells {
				if isNull() {
					b.AppendNull()
					continue
				}
				v := uint64(pool[rng.IntN(len(pool))])
				if dt.ID() == arrow.UINT64 && rng.IntN(10) == 0 {
					v = math.MaxUint64 - uint64(rng.IntN(2))
				}
				cells[i] = v
				b.Append(v)
			}
			tmp := b.NewArray()
			cols[ci] = castInts(tmp, dt)
			tmp.Release()
		case *arrow.Float32Type:
			b := array.NewFloat32Builder(mem)
			for i := range cells {
				if isNull() {
					b.AppendNull()
					continue
				}
				v := float32(floatPool[rng.IntN(len(floatPool))])
				cells[i] = float64(v)
				b.Append(v)
			}
			cols[ci] = b.NewArray()
		case *arrow.Float64Type:
			b := array.NewFloat64Builder(mem)
			for i := range cells {
				if isNull() {
					b.AppendNull()
					continue
				}
				v := floatPool[rng.IntN(len(floatPool))]
				cells[i] = v
				b.Append(v)
			}
			cols[ci] = b.NewArray()
		case *arrow.StringType, *arrow.LargeStringType, *arrow.BinaryType, *arrow.StringViewType:
			var b interface {
				array.Builder
				AppendString(string)
			}
			switch dt.ID() {
			case arrow.STRING:
				b = array.NewStringBuilder(mem)
			case arrow.LARGE_STRING:
				b = array.NewLargeStringBuilder(mem)
			case arrow.BINARY:
				b = array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary)
			default:
				b = array.NewStringViewBuilder(mem)
			}
			for i := range cells {
				if isNull() {
					b.AppendNull()
					continue
				}
				v := stringPool[rng.IntN(len(stringPool))]
				if rng.IntN(8) == 0 {
					v = strings.Repeat(v, 1+rng.IntN(6)) // long values, for views
				}
				cells[i] = v
				b.AppendString(v)
			}
			cols[ci] = b.NewArray()
		case *arrow.DictionaryType:
			cols[ci] = fx.dictColumn(rng, dt, cells)
		case *arrow.BooleanType:
			b := array.NewBooleanBuilder(mem)
			for i := range cells {
				if isNull() {
					b.AppendNull()
					continue
				}
				v := rng.IntN(2) == 0
				cells[i] = v
				b.Append(v)
			}
			cols[ci] = b.NewArray()
		case *arrow.TimestampType, *arrow.Date32Type, *arrow.Date64Type:
			pool := tickPool(dt)
			b := array.NewInt64Builder(mem)
			for i := range cells {
				if isNull() {
					b.AppendNull()
					continue
				}
				v := pool[rng.IntN(len(pool))]
				cells[i] = v
				b.Append(v)
			}
			tmp := b.NewArray()
			cols[ci] = castInts(tmp, dt)
			tmp.Release()
		case *arrow.ListType:
			b := array.NewListBuilder(mem, arrow.PrimitiveTypes.Int64)
			vb := b.ValueBuilder().(*array.Int64Builder)
			for i := range cells {
				if isNull() {
					b.AppendNull()
					continue
				}
				b.Append(true)
				vb.Append(int64(i))
				cells[i] = []int64{int64(i)}
			}
			cols[ci] = b.NewArray()
		case *arrow.NullType:
			cols[ci] = array.NewNull(n)
		default:
			panic(fmt.Sprintf("fixture: no generator for %s", dt))
		}
		fx.cells[f.Name] = cells
	}
	fx.rec = array.NewRecordBatch(fx.schema, cols, int64(n))
	for _, c := range cols {
		c.Release()
	}
	return fx
}

// castInts reinterprets an int64 or uint64 array's values as another fixed-width type
// (values are known to fit).
func castInts(src arrow.Array, dt arrow.DataType) arrow.Array {
	mem := memory.DefaultAllocator
	n := src.Len()
	b := array.NewBuilder(mem, dt)
	defer b.Release()
	for i := 0; i < n; i++ {
		if src.IsNull(i) {
			b.AppendNull()
			continue
		}
		var v int64
		var u uint64
		switch s := src.(type) {
		case *array.Int64:
			v, u = s.Value(i), uint64(s.Value(i))
		case *array.Uint64:
			v, u = int64(s.Value(i)), s.Value(i)
		}
		switch bb := b.(type) {
		case *array.Int8Builder:
			bb.Append(int8(v))
		case *array.Int16Builder:
			bb.Append(int16(v))
		case *array.Int32Builder:
			bb.Append(int32(v))
		case *array.Int64Builder:
			bb.Append(v)
		case *array.Uint8Builder:
			bb.Append(uint8(u))
		case *array.Uint16Builder:
			bb.Append(uint16(u))
		case *array.Uint32Builder:
			bb.Append(uint32(u))
		case *array.Uint64Builder:
			bb.Append(u)
		case *array.TimestampBuilder:
			bb.Append(arrow.Timestamp(v))
		case *array.Date32Builder:
			bb.Append(arrow.Date32(v))
		case *array.Date64Builder:
			bb.Append(arrow.Date64(v))
		default:
			panic(fmt.Sprintf("castInts: %T", b))
		}
	}
	return b.NewArray()
}

// dictColumn builds a dictionary column whose dictionary itself holds a NULL entry, so
// nulls come both from the indices and from the values.
func (fx *fixture) dictColumn(rng *rand.Rand, dt *arrow.DictionaryType, cells []any) arrow.Array {
	mem := memory.DefaultAllocator
	var dictVals []any
	var dict arrow.Array
	switch dt.ValueType.ID() {
	case arrow.STRING, arrow.LARGE_STRING:
		b := array.NewBuilder(mem, dt.ValueType)
		for i, s := range stringPool {
			if i == 3 {
				b.AppendNull()
				dictVals = append(dictVals, nil)
				continue
			}
			switch bb := b.(type) {
			case *array.StringBuilder:
				bb.Append(s)
			case *array.LargeStringBuilder:
				bb.Append(s)
			}
			dictVals = append(dictVals, s)
		}
		dict = b.NewArray()
		b.Release()
	case arrow.INT64:
		b := array.NewInt64Builder(mem)
		for i, v := range intPool(math.MinInt64, math.MaxInt64) {
			if i == 2 {
				b.AppendNull()
				dictVals = append(dictVals, nil)
				continue
			}
			b.Append(v)
			dictVals = append(dictVals, v)
		}
		dict = b.NewArray()
		b.Release()
	}
	ib := array.NewInt64Builder(mem)
	for i := range cells {
		if rng.IntN(6) == 0 {
			ib.AppendNull()
			continue
		}
		k := rng.IntN(len(dictVals))
		cells[i] = dictVals[k]
		ib.Append(int64(k))
	}
	tmp := ib.NewArray()
	ib.Release()
	idx := castInts(tmp, dt.IndexType)
	tmp.Release()
	out := array.NewDictionaryArray(dt, idx, dict)
	idx.Release()
	dict.Release()
	return out
}

// refTri is a reference three-valued result.
type refTri int8

const (
	rFalse refTri = iota
	rTrue
	rNull
)

func refOf(b bool) refTri {
	if b {
		return rTrue
	}
	return rFalse
}

func (r refTri) not() refTri {
	switch r {
	case rTrue:
		return rFalse
	case rFalse:
		return rTrue
	}
	return rNull
}

// refEval evaluates the tree for one row, straight from the SQL definitions.
func (fx *fixture) refEval(e Expr, row int) refTri {
	switch e := e.(type) {
	case *colRef:
		v := fx.cells[e.name][row]
		if v == nil {
			return rNull
		}
		return refOf(v.(bool))
	case *literal:
		if e.kind == litNull {
			return rNull
		}
		return refOf(e.b)
	case *compare:
		c, null := fx.refCompare(e.l, e.r, row)
		if null {
			return rNull
		}
		return refOf(e.op.holds(c))
	case *between:
		lo := fx.refEval(&compare{op: opGe, l: e.x, r: e.lo}, row)
		hi := fx.refEval(&compare{op: opLe, l: e.x, r: e.hi}, row)
		r := refAnd(lo, hi)
		if e.not {
			r = r.not()
		}
		return r
	case *inList:
		r := rFalse
		for _, l := range e.list {
			r = refOr(r, fx.refEval(&compare{op: opEq, l: e.x, r: l}, row))
		}
		if e.not {
			r = r.not()
		}
		return r
	case *like:
		var s string
		switch x := e.x.(type) {
		case *literal:
			if x.kind == litNull {
				return rNull
			}
			s = x.s
		case *colRef:
			v := fx.cells[x.name][row]
			if v == nil {
				return rNull
			}
			s = v.(string)
		}
		r := refOf(fx.likeRegexp(e.pattern).MatchString(s))
		if e.not {
			r = r.not()
		}
		return r
	case *isExpr:
		var v refTri
		if c, ok := e.x.(*colRef); ok && e.what == isNull {
			v = rTrue
			if fx.cells[c.name][row] == nil {
				v = rNull
			}
		} else if l, ok := e.x.(*literal); ok && e.what == isNull {
			v = rTrue
			if l.kind == litNull {
				v = rNull
			}
		} else {
			v = fx.refEval(e.x, row)
		}
		var r bool
		switch e.what {
		case isNull:
			r = v == rNull
		case isTrue:
			r = v == rTrue
		default:
			r = v == rFalse
		}
		return refOf(r != e.not)
	case *notExpr:
		return fx.refEval(e.x, row).not()
	case *andExpr:
		r := rTrue
		for _, t := range e.terms {
			r = refAnd(r, fx.refEval(t, row))
		}
		return r
	case *orExpr:
		r := rFalse
		for _, t := range e.terms {
			r = refOr(r, fx.refEval(t, row))
		}
		return r
	}
	panic(fmt.Sprintf("refEval: %T", e))
}

func refAnd(a, b refTri) refTri {
	switch {
	case a == rFalse || b == rFalse:
		return rFalse
	case a == rTrue && b == rTrue:
		return rTrue
	}
	return rNull
}

func refOr(a, b refTri) refTri {
	switch {
	case a == rTrue || b == rTrue:
		return rTrue
	case a == rFalse && b == rFalse:
		return rFalse
	}
	return rNull
}

func (fx *fixture) likeRegexp(p string) *regexp.Regexp {
	fx.mu.Lock()
	defer fx.mu.Unlock()
	re, ok := fx.likeCache[p]
	if !ok {
		re = likeRegexp(p)
		if fx.likeCache == nil {
			fx.likeCache = map[string]*regexp.Regexp{}
		}
		fx.likeCache[p] = re
	}
	return re
}

// likeRegexp translates a LIKE pattern to a regular expression, independently of the
// matcher under test.
func likeRegexp(p string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString(`(?s)^`)
	for i := 0; i < len(p); {
		r, w := utf8.DecodeRuneInString(p[i:])
		switch {
		case r == '\\' && i+1 < len(p):
			r2, w2 := utf8.DecodeRuneInString(p[i+1:])
			b.WriteString(regexp.QuoteMeta(string(r2)))
			i += 1 + w2
			continue
		case r == '%':
			b.WriteString(`.*`)
		case r == '_':
			b.WriteString(`.`)
		default:
			b.WriteString(regexp.QuoteMeta(string(r)))
		}
		i += w
	}
	b.WriteString(`$`)
	return regexp.MustCompile(b.String())
}

// refValue is an operand's value for a row: a literal, or a column cell with its type.
type refValue struct {
	dt  arrow.DataType // nil for a literal
	v   any            // cell value (nil = NULL) for a column
	lit *literal
}

func (fx *fixture) operand(e Expr, row int) refValue {
	switch e := e.(type) {
	case *colRef:
		f, _ := fx.schema.FieldsByName(e.name)
		dt := f[0].Type
		if d, ok := dt.(*arrow.DictionaryType); ok {
			dt = d.ValueType
		}
		return refValue{dt: dt, v: fx.cells[e.name][row]}
	case *literal:
		return refValue{lit: e}
	}
	panic("operand")
}

func (r refValue) isNull() bool {
	if r.lit != nil {
		return r.lit.kind == litNull
	}
	return r.v == nil
}

// refCompare orders two operands; null reports a NULL result.
func (fx *fixture) refCompare(l, r Expr, row int) (c int, null bool) {
	a, b := fx.operand(l, row), fx.operand(r, row)
	if a.isNull() || b.isNull() {
		return 0, true
	}
	switch {
	case a.dt != nil && b.dt != nil:
		return refColCol(a, b), false
	case a.dt != nil:
		return refColLit(a, b.lit), false
	case b.dt != nil:
		return -refColLit(b, a.lit), false
	}
	c, err := compareLiterals(a.lit, b.lit)
	if err != nil {
		panic(err)
	}
	return c, false
}

func isFloatType(dt arrow.DataType) bool {
	return dt.ID() == arrow.FLOAT32 || dt.ID() == arrow.FLOAT64
}

func isTemporal(dt arrow.DataType) bool {
	switch dt.ID() {
	case arrow.TIMESTAMP, arrow.DATE32, arrow.DATE64:
		return true
	}
	return false
}

func ratOf(v any) *big.Rat {
	switch v := v.(type) {
	case int64:
		return new(big.Rat).SetInt64(v)
	case uint64:
		return new(big.Rat).SetInt(new(big.Int).SetUint64(v))
	case float64:
		return new(big.Rat).SetFloat64(v)
	}
	panic(fmt.Sprintf("ratOf %T", v))
}

// refFloatCmp is IEEE 754 totalOrder: -NaN < -Inf < ... < -0 < +0 < ... < +Inf < +NaN.
func refFloatCmp(x, y float64) int {
	nanClass := func(f float64) int {
		switch {
		case !math.IsNaN(f):
			return 0
		case math.Signbit(f):
			return -1
		}
		return 1
	}
	if xn, yn := nanClass(x), nanClass(y); xn != 0 || yn != 0 {
		if xn == yn { // two NaNs of one sign: ordered by payload, reversed when negative
			c := cmpInt(int64(math.Float64bits(x)&^(1<<63)), int64(math.Float64bits(y)&^(1<<63)))
			return c * xn
		}
		return cmpInt(int64(xn), int64(yn))
	}
	if x == 0 && y == 0 {
		sign := func(f float64) int64 {
			if math.Signbit(f) {
				return -1
			}
			return 0
		}
		return cmpInt(sign(x), sign(y))
	}
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

func toFloat(v any) float64 {
	switch v := v.(type) {
	case int64:
		return float64(v)
	case uint64:
		return float64(v)
	case float64:
		return v
	}
	panic("toFloat")
}

func refColCol(a, b refValue) int {
	switch {
	case isFloatType(a.dt) || isFloatType(b.dt):
		return refFloatCmp(toFloat(a.v), toFloat(b.v))
	case isTemporal(a.dt):
		return ratOf(a.v).Cmp(ratOf(b.v))
	}
	switch x := a.v.(type) {
	case string:
		return strings.Compare(x, b.v.(string))
	case bool:
		y := b.v.(bool)
		switch {
		case x == y:
			return 0
		case x:
			return 1
		}
		return -1
	}
	return ratOf(a.v).Cmp(ratOf(b.v))
}

// refColLit compares a column value with a literal the way Bind documents it.
func refColLit(a refValue, lit *literal) int {
	switch {
	case isFloatType(a.dt):
		y := lit.f
		if lit.kind == litInt {
			y = float64(lit.i)
		}
		if a.dt.ID() == arrow.FLOAT32 { // the literal is rounded to the column's type
			if lit.kind == litInt {
				y = float64(float32(lit.i))
			} else {
				y = float64(float32(lit.f))
			}
		}
		return refFloatCmp(a.v.(float64), y)
	case isTemporal(a.dt):
		unit := unitNanos(a.dt)
		colNanos := new(big.Int).Mul(big.NewInt(a.v.(int64)), big.NewInt(unit))
		var litNanos *big.Int
		loc := time.UTC
		if ts, ok := a.dt.(*arrow.TimestampType); ok && ts.TimeZone != "" {
			var err error
			loc, err = loadZone(ts.TimeZone)
			if err != nil {
				panic(err)
			}
		}
		switch lit.kind {
		case litInt:
			return big.NewInt(a.v.(int64)).Cmp(big.NewInt(lit.i))
		case litDate: // midnight UTC, whatever the column's zone
			litNanos = new(big.Int).Mul(big.NewInt(lit.i*86400), big.NewInt(1e9))
		case litTimestamp:
			var t time.Time
			w := time.Unix(lit.ts.wall, int64(lit.ts.nsec)).UTC()
			if lit.ts.hasOffset {
				t = time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), w.Nanosecond(), time.FixedZone("", int(lit.ts.offset)))
			} else {
				t = time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), w.Nanosecond(), loc)
			}
			litNanos = new(big.Int).Add(new(big.Int).Mul(big.NewInt(t.Unix()), big.NewInt(1e9)), big.NewInt(int64(t.Nanosecond())))
		}
		return colNanos.Cmp(litNanos)
	}
	switch x := a.v.(type) {
	case string:
		return bytes.Compare([]byte(x), []byte(lit.s))
	case bool:
		switch {
		case x == lit.b:
			return 0
		case x:
			return 1
		}
		return -1
	}
	var y *big.Rat
	if lit.kind == litInt {
		y = new(big.Rat).SetInt64(lit.i)
	} else {
		y = new(big.Rat).SetFloat64(lit.f)
	}
	return ratOf(a.v).Cmp(y)
}
