package expr

import (
	"fmt"
	"math"
	"math/big"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

// Bound is a filter resolved against a schema: every column found, every comparison
// type-checked, and an evaluation plan chosen for the column types. It is immutable and
// safe for concurrent use; String and Columns are those of the parsed filter.
type Bound struct {
	src    Expr
	schema *arrow.Schema
	root   pnode
}

var _ Expr = (*Bound)(nil)

// String is the canonical SQL of the filter as parsed.
func (b *Bound) String() string { return b.src.String() }

// Columns lists the columns the filter reads, in order of first appearance.
func (b *Bound) Columns() []string { return b.src.Columns() }

func (b *Bound) write(sb *strings.Builder)  { b.src.write(sb) }
func (b *Bound) cols(dst []string) []string { return b.src.cols(dst) }
func (b *Bound) offset() int                { return b.src.offset() }

// Schema is the schema the filter was bound to; Eval accepts batches of this schema.
func (b *Bound) Schema() *arrow.Schema { return b.schema }

// Bind resolves e against schema s. Errors are *BindError values that name the column
// and, for an unknown column, list the valid ones; they wrap ErrInvalid. Comparisons
// between types that cannot be compared are errors, never silently false:
//
//   - integer columns take integer and float literals (compared exactly: x < 2.5 is
//     x <= 2; an int8 column compared with 1000 is decided without reading values);
//   - float columns take numbers, and compare in IEEE 754 total order as Lance does:
//     -0 < +0, NaN above +Inf and equal to itself; a float32 column compares with the
//     literal rounded to float32;
//   - string, large_string, binary and their view types, and dictionaries of these,
//     take string literals (compared bytewise);
//   - boolean columns take TRUE and FALSE, and may stand alone as a condition;
//   - timestamp columns (any unit, with or without time zone) take TIMESTAMP and DATE
//     literals, and integers in the column's unit. A TIMESTAMP literal without a UTC
//     offset is wall-clock time in the column's time zone; one with an offset is an
//     instant, and is refused for a column whose zone is not UTC (Lance reads it
//     differently there). A DATE literal is midnight UTC, and is refused for such a
//     column too. A literal finer than the column's unit is an error, because Lance
//     would truncate it;
//   - date32 and date64 columns take DATE and TIMESTAMP literals;
//   - two columns compare when both are numbers, strings, booleans, or dates or
//     timestamps of the same type, unit and time zone;
//   - NULL compares with anything (the result is NULL), and IS [NOT] NULL works on
//     columns of every type.
//
// Where both accept a filter, Lance (LanceDB 0.31) selects the same rows; the interop
// test checks this. Lance refuses a few filters that Bind accepts: an integer column
// against a float literal (even 3.0) or an integer outside the column's range, a
// timestamp column against an integer, and a binary column against a string.
func Bind(e Expr, s *arrow.Schema) (*Bound, error) {
	if b, ok := e.(*Bound); ok {
		e = b.src
	}
	if e == nil || s == nil {
		return nil, fmt.Errorf("%w: nil filter or schema", ErrInvalid)
	}
	bd := &binder{schema: s}
	root, err := bd.pred(e)
	if err != nil {
		return nil, err
	}
	return &Bound{src: e, schema: s, root: root}, nil
}

type binder struct {
	schema *arrow.Schema
}

// The constant results; never modified.
var (
	constTrue  = &constNode{t: true}
	constFalse = &constNode{f: true}
	constNull  = &constNode{}
)

func constOf(b bool) *constNode {
	if b {
		return constTrue
	}
	return constFalse
}

// pred binds e as a condition.
func (bd *binder) pred(e Expr) (pnode, error) {
	switch e := e.(type) {
	case *colRef:
		i, f, err := bd.column(e)
		if err != nil {
			return nil, err
		}
		k, err := boolCondition(f.Type)
		if err != nil {
			return nil, bindErrorf(e, e.name, "column %s has type %s; only a boolean column can stand alone as a condition (did you mean %s IS NOT NULL?)",
				QuoteIdent(e.name), f.Type, QuoteIdent(e.name))
		}
		return &leafNode{col: i, name: f.Name, typ: f.Type, k: k}, nil
	case *literal:
		switch e.kind {
		case litBool:
			return constOf(e.b), nil
		case litNull:
			return constNull, nil
		}
		return nil, bindErrorf(e, "", "%s literal %s cannot stand alone as a condition", e.kind, e)
	case *compare:
		return bd.compare(e.op, e.l, e.r, e)
	case *between:
		lo, err := bd.compare(opGe, e.x, e.lo, e)
		if err != nil {
			return nil, err
		}
		hi, err := bd.compare(opLe, e.x, e.hi, e)
		if err != nil {
			return nil, err
		}
		var n pnode = &andNode{kids: []pnode{lo, hi}}
		if e.not {
			n = &notNode{kid: n}
		}
		return n, nil
	case *inList:
		n, err := bd.in(e)
		if err != nil {
			return nil, err
		}
		if e.not {
			n = &notNode{kid: n}
		}
		return n, nil
	case *like:
		n, err := bd.like(e)
		if err != nil {
			return nil, err
		}
		if e.not {
			n = &notNode{kid: n}
		}
		return n, nil
	case *isExpr:
		var kid pnode
		switch x := e.x.(type) {
		case *colRef:
			if e.what == isNull {
				i, f, err := bd.column(x)
				if err != nil {
					return nil, err
				}
				kid = &leafNode{col: i, name: f.Name, typ: f.Type, k: presenceFor(f.Type)}
			}
		case *literal:
			if e.what == isNull {
				// Presence: TRUE for a value, NULL for NULL (never FALSE).
				kid = constTrue
				if x.kind == litNull {
					kid = constNull
				}
			}
		}
		if kid == nil {
			var err error
			if kid, err = bd.pred(e.x); err != nil {
				return nil, err
			}
		}
		return &isNode{kid: kid, what: e.what, not: e.not}, nil
	case *notExpr:
		kid, err := bd.pred(e.x)
		if err != nil {
			return nil, err
		}
		return &notNode{kid: kid}, nil
	case *andExpr:
		kids, err := bd.preds(e.terms)
		if err != nil {
			return nil, err
		}
		return &andNode{kids: kids}, nil
	case *orExpr:
		kids, err := bd.preds(e.terms)
		if err != nil {
			return nil, err
		}
		return &orNode{kids: kids}, nil
	case *Bound:
		return bd.pred(e.src)
	}
	return nil, fmt.Errorf("%w: unknown node %T", ErrInvalid, e)
}

func (bd *binder) preds(terms []Expr) ([]pnode, error) {
	out := make([]pnode, len(terms))
	for i, t := range terms {
		n, err := bd.pred(t)
		if err != nil {
			return nil, err
		}
		out[i] = n
	}
	return out, nil
}

// column resolves a column reference.
func (bd *binder) column(c *colRef) (int, arrow.Field, error) {
	idx := bd.schema.FieldIndices(c.name)
	switch len(idx) {
	case 1:
		return idx[0], bd.schema.Field(idx[0]), nil
	case 0:
		names := make([]string, 0, bd.schema.NumFields())
		for _, f := range bd.schema.Fields() {
			names = append(names, QuoteIdent(f.Name))
		}
		hint := ""
		for _, f := range bd.schema.Fields() {
			if strings.EqualFold(f.Name, c.name) {
				hint = fmt.Sprintf(" (column names are case-sensitive: did you mean %s?)", QuoteIdent(f.Name))
				break
			}
		}
		list := strings.Join(names, ", ")
		if len(list) > 2000 {
			list = clip(list, 2000)
		}
		return 0, arrow.Field{}, bindErrorf(c, c.name, "unknown column %s%s; valid columns: %s", QuoteIdent(c.name), hint, list)
	default:
		return 0, arrow.Field{}, bindErrorf(c, c.name, "column name %s is ambiguous: the schema has %d columns of that name", QuoteIdent(c.name), len(idx))
	}
}

// presenceFor is the kernel behind IS NULL. A dictionary value is NULL when its index
// is null or when the dictionary entry it points at is.
func presenceFor(dt arrow.DataType) kernel {
	if d, ok := dt.(*arrow.DictionaryType); ok {
		return &dictKernel{inner: presenceFor(d.ValueType)}
	}
	return presenceKernel{}
}

// boolCondition is the kernel for a column standing alone as a condition.
func boolCondition(dt arrow.DataType) (kernel, error) {
	switch t := dt.(type) {
	case *arrow.BooleanType:
		return newBoolKernel(opEq, true), nil
	case *arrow.DictionaryType:
		inner, err := boolCondition(t.ValueType)
		if err != nil {
			return nil, err
		}
		return &dictKernel{inner: inner}, nil
	}
	return nil, fmt.Errorf("not boolean")
}

// compare binds `l op r`; at names the node for error positions.
func (bd *binder) compare(op cmpOp, l, r Expr, at Expr) (pnode, error) {
	lc, lIsCol := l.(*colRef)
	rc, rIsCol := r.(*colRef)
	ll, _ := l.(*literal)
	rl, _ := r.(*literal)
	switch {
	case lIsCol && rIsCol:
		return bd.colCol(op, lc, rc, at)
	case lIsCol && rl != nil:
		return bd.colLit(op, lc, rl)
	case ll != nil && rIsCol:
		return bd.colLit(op.flip(), rc, ll)
	case ll != nil && rl != nil:
		if ll.kind == litNull || rl.kind == litNull {
			return constNull, nil
		}
		c, err := compareLiterals(ll, rl)
		if err != nil {
			return nil, err
		}
		return constOf(op.holds(c)), nil
	}
	return nil, bindErrorf(at, "", "comparison operands must be columns or literals")
}

func (bd *binder) colLit(op cmpOp, c *colRef, lit *literal) (pnode, error) {
	i, f, err := bd.column(c)
	if err != nil {
		return nil, err
	}
	if lit.kind == litNull {
		return constNull, nil // x op NULL is NULL for every row
	}
	k, err := cmpKernel(f.Type, op, lit, c)
	if err != nil {
		return nil, err
	}
	return &leafNode{col: i, name: f.Name, typ: f.Type, k: k}, nil
}

func mismatch(c *colRef, dt arrow.DataType, lit *literal, hint string) error {
	return bindErrorf(lit, c.name, "cannot compare column %s of type %s with %s literal %s%s", QuoteIdent(c.name), dt, lit.kind, clip(lit.String(), 60), hint)
}

// cmpKernel picks the kernel for `column(dt) op lit`.
func cmpKernel(dt arrow.DataType, op cmpOp, lit *literal, c *colRef) (kernel, error) {
	switch t := dt.(type) {
	case *arrow.DictionaryType:
		inner, err := cmpKernel(t.ValueType, op, lit, c)
		if err != nil {
			return nil, err
		}
		return &dictKernel{inner: inner}, nil
	case *arrow.Int8Type:
		return intCmpKernel[int8](op, lit, dt, c)
	case *arrow.Int16Type:
		return intCmpKernel[int16](op, lit, dt, c)
	case *arrow.Int32Type:
		return intCmpKernel[int32](op, lit, dt, c)
	case *arrow.Int64Type:
		return intCmpKernel[int64](op, lit, dt, c)
	case *arrow.Uint8Type:
		return intCmpKernel[uint8](op, lit, dt, c)
	case *arrow.Uint16Type:
		return intCmpKernel[uint16](op, lit, dt, c)
	case *arrow.Uint32Type:
		return intCmpKernel[uint32](op, lit, dt, c)
	case *arrow.Uint64Type:
		return intCmpKernel[uint64](op, lit, dt, c)
	case *arrow.Float32Type, *arrow.Float64Type:
		var f float64
		switch lit.kind {
		case litInt:
			f = float64(lit.i)
		case litFloat:
			f = lit.f
		default:
			return nil, mismatch(c, dt, lit, "")
		}
		if dt.ID() == arrow.FLOAT32 {
			f32 := float32(f)
			if lit.kind == litInt {
				f32 = float32(lit.i) // one rounding, as Lance casts the literal
			}
			return &floatKernel[float32]{op: op, lit: f32}, nil
		}
		return &floatKernel[float64]{op: op, lit: f}, nil
	case *arrow.StringType, *arrow.LargeStringType, *arrow.BinaryType, *arrow.LargeBinaryType,
		*arrow.StringViewType, *arrow.BinaryViewType:
		if lit.kind != litString {
			return nil, mismatch(c, dt, lit, "")
		}
		return &strKernel{op: op, lit: lit.s}, nil
	case *arrow.BooleanType:
		if lit.kind != litBool {
			return nil, mismatch(c, dt, lit, "")
		}
		return newBoolKernel(op, lit.b), nil
	case *arrow.TimestampType, *arrow.Date32Type, *arrow.Date64Type:
		q, frac, err := temporalTicks(dt, lit, c)
		if err != nil {
			return nil, err
		}
		return intRange[int64](op, q, frac, func(op cmpOp, v int64) kernel {
			switch dt.ID() {
			case arrow.DATE32:
				return &intKernel[arrow.Date32]{op: op, lit: arrow.Date32(v)}
			case arrow.DATE64:
				return &intKernel[arrow.Date64]{op: op, lit: arrow.Date64(v)}
			}
			return &intKernel[arrow.Timestamp]{op: op, lit: arrow.Timestamp(v)}
		}, dateRange(dt)), nil
	}
	return nil, bindErrorf(lit, c.name, "column %s has type %s, which filters cannot compare (only IS [NOT] NULL works on it)", QuoteIdent(c.name), dt)
}

// dateRange bounds the tick values of a temporal column type (date32 holds 32 bits).
func dateRange(dt arrow.DataType) [2]*big.Int {
	if dt.ID() == arrow.DATE32 {
		return [2]*big.Int{big.NewInt(math.MinInt32), big.NewInt(math.MaxInt32)}
	}
	return [2]*big.Int{big.NewInt(math.MinInt64), big.NewInt(math.MaxInt64)}
}

// exactValue returns a numeric literal as floor(value) and whether a fraction remains.
func exactValue(lit *literal) (*big.Int, bool, bool) {
	switch lit.kind {
	case litInt:
		return big.NewInt(lit.i), false, true
	case litFloat:
		bf := new(big.Float).SetFloat64(lit.f)
		q, acc := bf.Int(nil) // truncates toward zero
		frac := acc != big.Exact
		if frac && lit.f < 0 {
			q.Sub(q, big.NewInt(1))
		}
		return q, frac, true
	}
	return nil, false, false
}

func intCmpKernel[T integer](op cmpOp, lit *literal, dt arrow.DataType, c *colRef) (kernel, error) {
	q, frac, ok := exactValue(lit)
	if !ok {
		return nil, mismatch(c, dt, lit, "")
	}
	return intRange[T](op, q, frac, func(op cmpOp, v T) kernel { return &intKernel[T]{op: op, lit: v} }, typeRange[T]()), nil
}

func typeRange[T integer]() [2]*big.Int {
	var z T
	max := ^z
	if max < 0 { // signed: ^0 is -1
		bitsN := 8 * sizeOf(z)
		lo := new(big.Int).Lsh(big.NewInt(1), uint(bitsN-1))
		hi := new(big.Int).Sub(lo, big.NewInt(1))
		return [2]*big.Int{lo.Neg(lo), hi}
	}
	return [2]*big.Int{big.NewInt(0), new(big.Int).SetUint64(uint64(max))}
}

func sizeOf[T integer](z T) int {
	switch any(z).(type) {
	case int8, uint8:
		return 1
	case int16, uint16:
		return 2
	case int32, uint32:
		return 4
	}
	return 8
}

// intRange turns `x op L`, for integer x in [lo, hi] and an exact literal L = q + frac
// (0 <= frac < 1), into a kernel: a constant when L is outside the range, a plain
// comparison with q when L is whole, and an adjusted one otherwise.
func intRange[T integer](op cmpOp, q *big.Int, frac bool, mk func(cmpOp, T) kernel, rng [2]*big.Int) kernel {
	lo, hi := rng[0], rng[1]
	switch {
	case q.Cmp(lo) < 0: // L < lo: every x is greater
		return &constKernel{res: op.holds(1)}
	case q.Cmp(hi) > 0: // L > hi: every x is smaller
		return &constKernel{res: op.holds(-1)}
	}
	var v T
	if q.Sign() < 0 {
		v = T(q.Int64())
	} else {
		v = T(q.Uint64())
	}
	if !frac {
		return mk(op, v)
	}
	// L = q + frac with 0 < frac < 1: x is never equal; x < L iff x <= q.
	switch op {
	case opEq:
		return &constKernel{res: false}
	case opNe:
		return &constKernel{res: true}
	case opLt, opLe:
		op = opLe
	default:
		op = opGt
	}
	return mk(op, v)
}

// unitNanos is the length of one tick of a temporal column type.
func unitNanos(dt arrow.DataType) int64 {
	switch t := dt.(type) {
	case *arrow.TimestampType:
		return int64(t.Unit.Multiplier())
	case *arrow.Date32Type:
		return 86400 * int64(time.Second)
	default: // date64: milliseconds
		return int64(time.Millisecond)
	}
}

// temporalTicks converts a literal to ticks of a temporal column: floor and whether a
// fraction of a tick remains.
func temporalTicks(dt arrow.DataType, lit *literal, c *colRef) (*big.Int, bool, error) {
	loc := time.UTC
	ts, isTS := dt.(*arrow.TimestampType)
	if isTS && ts.TimeZone != "" {
		var err error
		if loc, err = loadZone(ts.TimeZone); err != nil {
			return nil, false, bindErrorf(lit, c.name, "column %s has time zone %q, which cannot be loaded: %v", QuoteIdent(c.name), ts.TimeZone, err)
		}
	}
	var sec int64
	var nsec int32
	switch lit.kind {
	case litInt:
		if !isTS {
			return nil, false, mismatch(c, dt, lit, "; write DATE 'YYYY-MM-DD'")
		}
		return big.NewInt(lit.i), false, nil
	case litDate:
		if loc != time.UTC {
			// Lance reads it as midnight UTC alone but as midnight in the column's zone
			// next to a TIMESTAMP (BETWEEN, IN), so no one reading can agree with it.
			return nil, false, bindErrorf(lit, c.name, "DATE literal %s is ambiguous against column %s with time zone %q; write TIMESTAMP '%s 00:00:00' for midnight in %s",
				lit, QuoteIdent(c.name), ts.TimeZone, time.Unix(lit.i*86400, 0).UTC().Format("2006-01-02"), ts.TimeZone)
		}
		sec = lit.i * 86400 // midnight UTC
	case litTimestamp:
		if lit.ts.hasOffset && loc != time.UTC {
			return nil, false, bindErrorf(lit, c.name, "literal %s has a UTC offset, and column %s has time zone %q, where Lance reads such a literal differently; write the wall-clock time in %s without an offset",
				lit, QuoteIdent(c.name), ts.TimeZone, ts.TimeZone)
		}
		sec, nsec = lit.ts.instant(loc)
	case litString:
		what := "TIMESTAMP"
		if !isTS {
			what = "DATE"
		}
		return nil, false, mismatch(c, dt, lit, fmt.Sprintf("; write %s %s", what, clip(lit.String(), 60)))
	default:
		return nil, false, mismatch(c, dt, lit, "")
	}
	total := new(big.Int).Mul(big.NewInt(sec), big.NewInt(int64(time.Second)))
	total.Add(total, big.NewInt(int64(nsec)))
	unit := big.NewInt(unitNanos(dt))
	q, m := new(big.Int).DivMod(total, unit, new(big.Int)) // Euclidean: floor for unit > 0
	frac := m.Sign() != 0
	if frac && isTS {
		return nil, false, bindErrorf(lit, c.name, "literal %s is more precise than column %s (%s), and Lance would truncate it; drop the extra digits",
			lit, QuoteIdent(c.name), dt)
	}
	return q, frac, nil
}

// in binds `x IN (list)` (without the NOT).
func (bd *binder) in(e *inList) (pnode, error) {
	hasNull := false
	for _, l := range e.list {
		if l.kind == litNull {
			hasNull = true
		}
	}
	switch x := e.x.(type) {
	case *literal:
		return foldIn(x, e.list, hasNull)
	case *colRef:
		i, f, err := bd.column(x)
		if err != nil {
			return nil, err
		}
		k, err := inKernel(f.Type, e.list, hasNull, x)
		if err != nil {
			return nil, err
		}
		return &leafNode{col: i, name: f.Name, typ: f.Type, k: k}, nil
	}
	return nil, bindErrorf(e, "", "the subject of IN must be a column or a literal")
}

func foldIn(x *literal, list []*literal, hasNull bool) (pnode, error) {
	if x.kind == litNull {
		return constNull, nil
	}
	for _, l := range list {
		if l.kind == litNull {
			continue
		}
		c, err := compareLiterals(x, l)
		if err != nil {
			return nil, err
		}
		if c == 0 {
			return constTrue, nil
		}
	}
	if hasNull {
		return constNull, nil
	}
	return constFalse, nil
}

func inKernel(dt arrow.DataType, list []*literal, hasNull bool, c *colRef) (kernel, error) {
	switch t := dt.(type) {
	case *arrow.DictionaryType:
		inner, err := inKernel(t.ValueType, list, hasNull, c)
		if err != nil {
			return nil, err
		}
		return &dictKernel{inner: inner}, nil
	case *arrow.Int8Type:
		return inIntList[int8](list, hasNull, dt, c)
	case *arrow.Int16Type:
		return inIntList[int16](list, hasNull, dt, c)
	case *arrow.Int32Type:
		return inIntList[int32](list, hasNull, dt, c)
	case *arrow.Int64Type:
		return inIntList[int64](list, hasNull, dt, c)
	case *arrow.Uint8Type:
		return inIntList[uint8](list, hasNull, dt, c)
	case *arrow.Uint16Type:
		return inIntList[uint16](list, hasNull, dt, c)
	case *arrow.Uint32Type:
		return inIntList[uint32](list, hasNull, dt, c)
	case *arrow.Uint64Type:
		return inIntList[uint64](list, hasNull, dt, c)
	case *arrow.Float32Type, *arrow.Float64Type:
		var f64s []float64
		var f32s []float64 // already rounded to float32
		for _, l := range list {
			switch l.kind {
			case litNull:
			case litInt:
				f64s = append(f64s, float64(l.i))
				f32s = append(f32s, float64(float32(l.i)))
			case litFloat:
				f64s = append(f64s, l.f)
				f32s = append(f32s, float64(float32(l.f)))
			default:
				return nil, mismatch(c, dt, l, "")
			}
		}
		if dt.ID() == arrow.FLOAT32 {
			return newInFloatKernel[float32](f32s, hasNull), nil
		}
		return newInFloatKernel[float64](f64s, hasNull), nil
	case *arrow.StringType, *arrow.LargeStringType, *arrow.BinaryType, *arrow.LargeBinaryType,
		*arrow.StringViewType, *arrow.BinaryViewType:
		var vals []string
		for _, l := range list {
			switch l.kind {
			case litNull:
			case litString:
				vals = append(vals, l.s)
			default:
				return nil, mismatch(c, dt, l, "")
			}
		}
		return newInStrKernel(vals, hasNull), nil
	case *arrow.BooleanType:
		k := &inBoolKernel{hasNull: hasNull}
		for _, l := range list {
			switch {
			case l.kind == litNull:
			case l.kind == litBool && l.b:
				k.hasTrue = true
			case l.kind == litBool:
				k.hasFalse = true
			default:
				return nil, mismatch(c, dt, l, "")
			}
		}
		return k, nil
	case *arrow.TimestampType, *arrow.Date32Type, *arrow.Date64Type:
		rng := dateRange(dt)
		var vals []int64
		for _, l := range list {
			if l.kind == litNull {
				continue
			}
			q, frac, err := temporalTicks(dt, l, c)
			if err != nil {
				return nil, err
			}
			if !frac && q.Cmp(rng[0]) >= 0 && q.Cmp(rng[1]) <= 0 {
				vals = append(vals, q.Int64())
			}
		}
		switch dt.ID() {
		case arrow.DATE32:
			return newInIntKernel(convert[arrow.Date32](vals), hasNull), nil
		case arrow.DATE64:
			return newInIntKernel(convert[arrow.Date64](vals), hasNull), nil
		}
		return newInIntKernel(convert[arrow.Timestamp](vals), hasNull), nil
	}
	return nil, bindErrorf(c, c.name, "column %s has type %s, which IN cannot compare (only IS [NOT] NULL works on it)", QuoteIdent(c.name), dt)
}

func inIntList[T integer](list []*literal, hasNull bool, dt arrow.DataType, c *colRef) (kernel, error) {
	rng := typeRange[T]()
	var vals []T
	for _, l := range list {
		if l.kind == litNull {
			continue
		}
		q, frac, ok := exactValue(l)
		if !ok {
			return nil, mismatch(c, dt, l, "")
		}
		if frac || q.Cmp(rng[0]) < 0 || q.Cmp(rng[1]) > 0 {
			continue // the column cannot hold this value
		}
		if q.Sign() < 0 {
			vals = append(vals, T(q.Int64()))
		} else {
			vals = append(vals, T(q.Uint64()))
		}
	}
	return newInIntKernel(vals, hasNull), nil
}

// like binds `x LIKE pattern` (without the NOT).
func (bd *binder) like(e *like) (pnode, error) {
	m := compileLike(e.pattern)
	switch x := e.x.(type) {
	case *literal:
		switch x.kind {
		case litNull:
			return constNull, nil
		case litString:
			return constOf(m.match([]byte(x.s))), nil
		}
		return nil, bindErrorf(x, "", "LIKE needs a string, not %s literal %s", x.kind, x)
	case *colRef:
		i, f, err := bd.column(x)
		if err != nil {
			return nil, err
		}
		k, err := likeKernelFor(f.Type, m, x)
		if err != nil {
			return nil, err
		}
		return &leafNode{col: i, name: f.Name, typ: f.Type, k: k}, nil
	}
	return nil, bindErrorf(e, "", "the subject of LIKE must be a column or a literal")
}

func likeKernelFor(dt arrow.DataType, m *likeMatcher, c *colRef) (kernel, error) {
	switch t := dt.(type) {
	case *arrow.DictionaryType:
		inner, err := likeKernelFor(t.ValueType, m, c)
		if err != nil {
			return nil, err
		}
		return &dictKernel{inner: inner}, nil
	case *arrow.StringType, *arrow.LargeStringType, *arrow.BinaryType, *arrow.LargeBinaryType,
		*arrow.StringViewType, *arrow.BinaryViewType:
		return &likeKernel{m: m}, nil
	}
	return nil, bindErrorf(c, c.name, "LIKE needs a string column, and %s has type %s", QuoteIdent(c.name), dt)
}

// colCol binds a comparison of two columns.
func (bd *binder) colCol(op cmpOp, a, b *colRef, at Expr) (pnode, error) {
	ai, af, err := bd.column(a)
	if err != nil {
		return nil, err
	}
	bi, bf, err := bd.column(b)
	if err != nil {
		return nil, err
	}
	ca, cb := colClass(af.Type), colClass(bf.Type)
	var k pairKernel
	switch {
	case ca == classSigned && cb == classSigned,
		ca == classSigned && cb == classUnsigned && bf.Type.ID() != arrow.UINT64,
		ca == classUnsigned && af.Type.ID() != arrow.UINT64 && cb == classSigned:
		k = &pairIntKernel{op: op}
	case ca == classUnsigned && cb == classUnsigned:
		k = &pairUintKernel{op: op}
	case (ca == classFloat || cb == classFloat) && isNumClass(ca) && isNumClass(cb):
		k = &pairFloatKernel{op: op}
	case ca == classString && cb == classString:
		k = &pairStrKernel{op: op}
	case ca == classBool && cb == classBool:
		k = &pairBoolKernel{op: op}
	case ca == classTemporal && cb == classTemporal && sameTemporal(af.Type, bf.Type):
		k = &pairIntKernel{op: op}
	}
	if k == nil {
		return nil, bindErrorf(at, a.name, "cannot compare column %s of type %s with column %s of type %s",
			QuoteIdent(a.name), af.Type, QuoteIdent(b.name), bf.Type)
	}
	return &pairNode{a: ai, b: bi, aName: af.Name, bName: bf.Name, aTyp: af.Type, bTyp: bf.Type, k: k}, nil
}

type typeClass uint8

const (
	classOther typeClass = iota
	classSigned
	classUnsigned
	classFloat
	classString
	classBool
	classTemporal
)

func isNumClass(c typeClass) bool {
	return c == classSigned || c == classUnsigned || c == classFloat
}

func colClass(dt arrow.DataType) typeClass {
	switch dt.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64:
		return classSigned
	case arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		return classUnsigned
	case arrow.FLOAT32, arrow.FLOAT64:
		return classFloat
	case arrow.STRING, arrow.LARGE_STRING, arrow.BINARY, arrow.LARGE_BINARY:
		return classString
	case arrow.BOOL:
		return classBool
	case arrow.TIMESTAMP, arrow.DATE32, arrow.DATE64:
		return classTemporal
	}
	return classOther
}

// sameTemporal: dates of one type, or timestamps of one unit and one time zone (Lance
// shifts a zoneless timestamp into the other side's zone before comparing, so mixing
// zones would compare something other than the stored instants).
func sameTemporal(a, b arrow.DataType) bool {
	if a.ID() != b.ID() {
		return false
	}
	if ta, ok := a.(*arrow.TimestampType); ok {
		tb := b.(*arrow.TimestampType)
		return ta.Unit == tb.Unit && ta.TimeZone == tb.TimeZone
	}
	return true
}

// compareLiterals orders two non-null literals, for comparisons that involve no
// column.
func compareLiterals(a, b *literal) (int, error) {
	num := func(l *literal) bool { return l.kind == litInt || l.kind == litFloat }
	tmp := func(l *literal) bool { return l.kind == litDate || l.kind == litTimestamp }
	switch {
	case num(a) && num(b):
		return litFloat64(a).Cmp(litFloat64(b)), nil
	case a.kind == litString && b.kind == litString:
		return strings.Compare(a.s, b.s), nil
	case a.kind == litBool && b.kind == litBool:
		switch {
		case a.b == b.b:
			return 0, nil
		case a.b:
			return 1, nil
		}
		return -1, nil
	case tmp(a) && tmp(b):
		as, an := litInstant(a)
		bs, bn := litInstant(b)
		switch {
		case as != bs:
			return cmpInt(as, bs), nil
		}
		return cmpInt(int64(an), int64(bn)), nil
	}
	return 0, bindErrorf(b, "", "cannot compare %s literal %s with %s literal %s", a.kind, clip(a.String(), 60), b.kind, clip(b.String(), 60))
}

func litFloat64(l *literal) *big.Float {
	if l.kind == litInt {
		return new(big.Float).SetInt64(l.i)
	}
	return new(big.Float).SetFloat64(l.f)
}

func litInstant(l *literal) (int64, int32) {
	if l.kind == litDate {
		return l.i * 86400, 0
	}
	return l.ts.instant(time.UTC)
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
