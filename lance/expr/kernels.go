package expr

import (
	"bytes"
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// A kernel evaluates one predicate over one array (a column, or the values of a
// dictionary column). Kernels are chosen at bind time for the column's exact type, so
// the per-row loops below run over typed slices and bitmaps with no interface calls.
type kernel interface {
	eval(ev *evaluator, arr arrow.Array, out tri) error
}

// pairKernel compares two columns row by row. It writes only out.t (the comparison
// for every row, null or not); the caller applies both validity bitmaps.
type pairKernel interface {
	eval(ev *evaluator, a, b arrow.Array, out tri) error
}

// number is every Arrow fixed-width numeric and temporal value type.
type number interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~float32 | ~float64
}

type integer interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64
}

// typedValues returns the value slice of a fixed-width array, or nil when arr does not
// hold T values.
func typedValues[T any](arr arrow.Array) []T {
	var v any
	switch a := arr.(type) {
	case *array.Int8:
		v = a.Int8Values()
	case *array.Int16:
		v = a.Int16Values()
	case *array.Int32:
		v = a.Int32Values()
	case *array.Int64:
		v = a.Int64Values()
	case *array.Uint8:
		v = a.Uint8Values()
	case *array.Uint16:
		v = a.Uint16Values()
	case *array.Uint32:
		v = a.Uint32Values()
	case *array.Uint64:
		v = a.Uint64Values()
	case *array.Float32:
		v = a.Float32Values()
	case *array.Float64:
		v = a.Float64Values()
	case *array.Timestamp:
		v = a.TimestampValues()
	case *array.Date32:
		v = a.Date32Values()
	case *array.Date64:
		v = a.Date64Values()
	}
	out, _ := v.([]T)
	return out
}

func valuesOf[T any](arr arrow.Array) ([]T, error) {
	v := typedValues[T](arr)
	if len(v) < arr.Len() {
		return nil, fmt.Errorf("expr: unexpected array %T (%s) for a %T kernel", arr, arr.DataType(), v)
	}
	return v[:arr.Len()], nil
}

// b2u is 1 for true; the compiler turns it into a flag move, keeping loops branch-free.
func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}

// cmpBits sets bit i of out when vals[i] op lit. One loop per operator keeps the
// operator switch out of the per-row path.
func cmpBits[T number](vals []T, lit T, op cmpOp, out []uint64) {
	n := len(vals)
	full := n >> 6
	switch op {
	case opEq:
		for w := 0; w < full; w++ {
			c := (*[64]T)(vals[w<<6:])
			var bits uint64
			for j := 0; j < 64; j++ {
				bits |= b2u(c[j] == lit) << j
			}
			out[w] = bits
		}
	case opNe:
		for w := 0; w < full; w++ {
			c := (*[64]T)(vals[w<<6:])
			var bits uint64
			for j := 0; j < 64; j++ {
				bits |= b2u(c[j] != lit) << j
			}
			out[w] = bits
		}
	case opLt:
		for w := 0; w < full; w++ {
			c := (*[64]T)(vals[w<<6:])
			var bits uint64
			for j := 0; j < 64; j++ {
				bits |= b2u(c[j] < lit) << j
			}
			out[w] = bits
		}
	case opLe:
		for w := 0; w < full; w++ {
			c := (*[64]T)(vals[w<<6:])
			var bits uint64
			for j := 0; j < 64; j++ {
				bits |= b2u(c[j] <= lit) << j
			}
			out[w] = bits
		}
	case opGt:
		for w := 0; w < full; w++ {
			c := (*[64]T)(vals[w<<6:])
			var bits uint64
			for j := 0; j < 64; j++ {
				bits |= b2u(c[j] > lit) << j
			}
			out[w] = bits
		}
	case opGe:
		for w := 0; w < full; w++ {
			c := (*[64]T)(vals[w<<6:])
			var bits uint64
			for j := 0; j < 64; j++ {
				bits |= b2u(c[j] >= lit) << j
			}
			out[w] = bits
		}
	}
	// The partial last word.
	for w := full; w < len(out); w++ {
		lo := w << 6
		hi := min(lo+64, n)
		chunk := vals[lo:hi]
		var bits uint64
		switch op {
		case opEq:
			for j, v := range chunk {
				bits |= b2u(v == lit) << uint(j)
			}
		case opNe:
			for j, v := range chunk {
				bits |= b2u(v != lit) << uint(j)
			}
		case opLt:
			for j, v := range chunk {
				bits |= b2u(v < lit) << uint(j)
			}
		case opLe:
			for j, v := range chunk {
				bits |= b2u(v <= lit) << uint(j)
			}
		case opGt:
			for j, v := range chunk {
				bits |= b2u(v > lit) << uint(j)
			}
		case opGe:
			for j, v := range chunk {
				bits |= b2u(v >= lit) << uint(j)
			}
		}
		out[w] = bits
	}
}

// intKernel compares an integer or temporal column with a literal already converted
// to the column's type.
type intKernel[T integer] struct {
	op  cmpOp
	lit T
}

func (k *intKernel[T]) eval(ev *evaluator, arr arrow.Array, out tri) error {
	vals, err := valuesOf[T](arr)
	if err != nil {
		return err
	}
	cmpBits(vals, k.lit, k.op, out.t)
	ev.finish(arr, out, false)
	return nil
}

// Floats compare in IEEE 754 total order, as Lance (arrow-rs) compares them: -0 is
// below +0, NaN is above +Inf and equal to itself (a NaN with the sign bit set is below
// -Inf). fkey maps a float to an integer with that order, so the loops compare
// integers. The literal is never NaN (no literal spells it).
func fkey64(f float64) int64 {
	b := int64(math.Float64bits(f))
	return b ^ int64(uint64(b>>63)>>1)
}

func fkey32(f float32) int32 {
	b := int32(math.Float32bits(f))
	return b ^ int32(uint32(b>>31)>>1)
}

// floatKernel compares a float column with a number already rounded to the column's
// type (a float32 column compares with float32(literal), as in Lance).
type floatKernel[T float32 | float64] struct {
	op  cmpOp
	lit T
}

func (k *floatKernel[T]) eval(ev *evaluator, arr arrow.Array, out tri) error {
	vals, err := valuesOf[T](arr)
	if err != nil {
		return err
	}
	switch v := any(vals).(type) {
	case []float64:
		lit := fkey64(float64(k.lit))
		for w := range out.t {
			lo := w << 6
			hi := min(lo+64, len(v))
			var keys [64]int64
			for j, x := range v[lo:hi] {
				keys[j] = fkey64(x)
			}
			out.t[w] = cmpWord(keys[:hi-lo], lit, k.op)
		}
	case []float32:
		lit := fkey32(float32(k.lit))
		for w := range out.t {
			lo := w << 6
			hi := min(lo+64, len(v))
			var keys [64]int32
			for j, x := range v[lo:hi] {
				keys[j] = fkey32(x)
			}
			out.t[w] = cmpWord(keys[:hi-lo], lit, k.op)
		}
	}
	ev.finish(arr, out, false)
	return nil
}

// cmpWord compares up to 64 values with lit and returns the result bits.
func cmpWord[K int32 | int64](vals []K, lit K, op cmpOp) uint64 {
	var bits uint64
	switch op {
	case opEq:
		for j, v := range vals {
			bits |= b2u(v == lit) << uint(j)
		}
	case opNe:
		for j, v := range vals {
			bits |= b2u(v != lit) << uint(j)
		}
	case opLt:
		for j, v := range vals {
			bits |= b2u(v < lit) << uint(j)
		}
	case opLe:
		for j, v := range vals {
			bits |= b2u(v <= lit) << uint(j)
		}
	case opGt:
		for j, v := range vals {
			bits |= b2u(v > lit) << uint(j)
		}
	default:
		for j, v := range vals {
			bits |= b2u(v >= lit) << uint(j)
		}
	}
	return bits
}

// constKernel is a comparison whose answer is the same for every non-null value, such
// as an int8 column compared with 1000.
type constKernel struct{ res bool }

func (k *constKernel) eval(ev *evaluator, arr arrow.Array, out tri) error {
	ev.constResult(arr, out, k.res)
	return nil
}

// presenceKernel is TRUE where the value is not null and never FALSE; IS NULL is built
// on it, and it works for every type.
type presenceKernel struct{}

func (presenceKernel) eval(ev *evaluator, arr arrow.Array, out tri) error {
	validity(arr, out.t)
	clear64(out.f)
	return nil
}

// boolKernel compares a boolean column with TRUE or FALSE (FALSE < TRUE). The bare
// column used as a condition is `col = TRUE`.
type boolKernel struct {
	ifTrue, ifFalse bool // the comparison's result for a true and for a false value
}

func newBoolKernel(op cmpOp, lit bool) *boolKernel {
	c := func(v bool) int {
		switch {
		case v == lit:
			return 0
		case v:
			return 1
		default:
			return -1
		}
	}
	return &boolKernel{ifTrue: op.holds(c(true)), ifFalse: op.holds(c(false))}
}

func (k *boolKernel) eval(ev *evaluator, arr arrow.Array, out tri) error {
	b, ok := arr.(*array.Boolean)
	if !ok {
		return fmt.Errorf("expr: unexpected array %T for a boolean kernel", arr)
	}
	n := arr.Len()
	loadBits(bufferBytes(b, 1), b.Data().Offset(), n, out.t)
	for i, v := range out.t {
		var r uint64
		if k.ifTrue {
			r |= v
		}
		if k.ifFalse {
			r |= ^v
		}
		out.t[i] = r
	}
	if len(out.t) > 0 {
		out.t[len(out.t)-1] &= tailMask(n)
	}
	ev.finish(arr, out, false)
	return nil
}

// bufferBytes returns buffer i of arr, or nil when it is absent.
func bufferBytes(arr arrow.Array, i int) []byte {
	bufs := arr.Data().Buffers()
	if i < len(bufs) && bufs[i] != nil {
		return bufs[i].Bytes()
	}
	return nil
}

// stringData gives uniform access to the offsets and bytes of a string or binary
// array. View arrays are copied into offset form once per batch.
type stringData struct {
	o32  []int32
	o64  []int64
	data []byte
}

func stringsOf(arr arrow.Array) (stringData, error) {
	var sd stringData
	if arr.Len() == 0 {
		return sd, nil // an empty array may have no offsets buffer at all
	}
	bufBytes := func() []byte { return bufferBytes(arr, 2) }
	switch a := arr.(type) {
	case *array.String:
		sd.o32, sd.data = a.ValueOffsets(), bufBytes()
	case *array.Binary:
		sd.o32, sd.data = a.ValueOffsets(), bufBytes()
	case *array.LargeString:
		sd.o64, sd.data = a.ValueOffsets(), bufBytes()
	case *array.LargeBinary:
		sd.o64, sd.data = a.ValueOffsets(), bufBytes()
	case *array.StringView:
		sd.o64, sd.data = flattenViews(arr.Len(), func(i int) []byte { return []byte(a.Value(i)) }, a.IsNull)
		return sd, nil
	case *array.BinaryView:
		sd.o64, sd.data = flattenViews(arr.Len(), a.Value, a.IsNull)
		return sd, nil
	default:
		return sd, fmt.Errorf("expr: unexpected array %T for a string kernel", arr)
	}
	n := arr.Len()
	var ok bool
	if sd.o32 != nil || sd.o64 == nil {
		ok = checkOffsets(sd.o32, n, len(sd.data))
	} else {
		ok = checkOffsets(sd.o64, n, len(sd.data))
	}
	if !ok {
		return sd, fmt.Errorf("expr: corrupt string array: offsets are not ascending within the data")
	}
	return sd, nil
}

// checkOffsets verifies what the kernels rely on to slice without panicking: n+1
// ascending offsets within the data buffer. Arrow constructors check only the last.
func checkOffsets[O int32 | int64](offs []O, n, dataLen int) bool {
	if n == 0 {
		return true
	}
	if len(offs) < n+1 || offs[0] < 0 || int64(offs[n]) > int64(dataLen) {
		return false
	}
	prev := offs[0]
	for _, o := range offs[1 : n+1] {
		if o < prev {
			return false
		}
		prev = o
	}
	return true
}

func flattenViews(n int, value func(int) []byte, isNull func(int) bool) ([]int64, []byte) {
	offs := make([]int64, n+1)
	var data []byte
	for i := 0; i < n; i++ {
		if !isNull(i) {
			data = append(data, value(i)...)
		}
		offs[i+1] = int64(len(data))
	}
	return offs, data
}

// strKernel compares a string or binary column with a string literal, bytewise (UTF-8
// byte order is code point order).
type strKernel struct {
	op  cmpOp
	lit string
}

func (k *strKernel) eval(ev *evaluator, arr arrow.Array, out tri) error {
	sd, err := stringsOf(arr)
	if err != nil {
		return err
	}
	n := arr.Len()
	if sd.o64 != nil {
		strCmpBits(sd.o64, sd.data, n, k.lit, k.op, out.t)
	} else {
		strCmpBits(sd.o32, sd.data, n, k.lit, k.op, out.t)
	}
	ev.finish(arr, out, false)
	return nil
}

func strCmpBits[O int32 | int64](offs []O, data []byte, n int, lit string, op cmpOp, out []uint64) {
	if n == 0 {
		return
	}
	offs = offs[:n+1]
	litLen := O(len(lit))
	for w := 0; w < len(out); w++ {
		lo := w << 6
		hi := min(lo+64, n)
		var bits uint64
		switch op {
		case opEq, opNe:
			want := op == opEq
			for i := lo; i < hi; i++ {
				a, b := offs[i], offs[i+1]
				eq := b-a == litLen && string(data[a:b]) == lit
				bits |= b2u(eq == want) << uint(i-lo)
			}
		case opLt:
			for i := lo; i < hi; i++ {
				bits |= b2u(string(data[offs[i]:offs[i+1]]) < lit) << uint(i-lo)
			}
		case opLe:
			for i := lo; i < hi; i++ {
				bits |= b2u(string(data[offs[i]:offs[i+1]]) <= lit) << uint(i-lo)
			}
		case opGt:
			for i := lo; i < hi; i++ {
				bits |= b2u(string(data[offs[i]:offs[i+1]]) > lit) << uint(i-lo)
			}
		default:
			for i := lo; i < hi; i++ {
				bits |= b2u(string(data[offs[i]:offs[i+1]]) >= lit) << uint(i-lo)
			}
		}
		out[w] = bits
	}
}

// inIntKernel is `col IN (...)` for integer and temporal columns; the list holds only
// the values that the column type can hold exactly. A short list is scanned, a list
// of values close together becomes a bitset, anything else a hash set.
type inIntKernel[T integer] struct {
	list    []T
	base    T        // dense: bit v-base of dense is set for each listed v
	span    uint64   // dense: largest v-base
	dense   []uint64 // nil when not dense
	set     map[T]struct{}
	hasNull bool
}

const (
	inScanMax  = 8       // lists up to this long are scanned
	inDenseMax = 1 << 20 // value spans up to this many bits become a bitset (128 KiB)
)

func newInIntKernel[T integer](list []T, hasNull bool) *inIntKernel[T] {
	k := &inIntKernel[T]{list: list, hasNull: hasNull}
	if len(list) <= inScanMax {
		return k
	}
	lo, hi := list[0], list[0]
	for _, v := range list {
		lo, hi = min(lo, v), max(hi, v)
	}
	if span := uint64(hi) - uint64(lo); span < inDenseMax {
		k.base, k.span = lo, span
		k.dense = make([]uint64, span/64+1)
		for _, v := range list {
			d := uint64(v) - uint64(lo)
			k.dense[d>>6] |= 1 << (d & 63)
		}
		return k
	}
	k.set = make(map[T]struct{}, len(list))
	for _, v := range list {
		k.set[v] = struct{}{}
	}
	return k
}

func (k *inIntKernel[T]) eval(ev *evaluator, arr arrow.Array, out tri) error {
	vals, err := valuesOf[T](arr)
	if err != nil {
		return err
	}
	n := len(vals)
	for w := range out.t {
		lo := w << 6
		hi := min(lo+64, n)
		var bits uint64
		switch {
		case k.dense != nil:
			base, span, dense := uint64(k.base), k.span, k.dense
			for j, v := range vals[lo:hi] {
				d := uint64(v) - base // wraps for v < base, so d > span
				if d <= span {
					bits |= (dense[d>>6] >> (d & 63) & 1) << uint(j)
				}
			}
		case k.set != nil:
			for j, v := range vals[lo:hi] {
				_, hit := k.set[v]
				bits |= b2u(hit) << uint(j)
			}
		default:
			for j, v := range vals[lo:hi] {
				var hit uint64
				for _, x := range k.list {
					hit |= b2u(v == x)
				}
				bits |= hit << uint(j)
			}
		}
		out.t[w] = bits
	}
	ev.finish(arr, out, k.hasNull)
	return nil
}

// inFloatKernel is `col IN (...)` for float columns: equality in total order (so -0
// is not 0), with the literals rounded to the column's type.
type inFloatKernel[T float32 | float64] struct {
	set     map[int64]struct{} // fkey64, or fkey32 widened, of each literal
	hasNull bool
}

func newInFloatKernel[T float32 | float64](list []float64, hasNull bool) *inFloatKernel[T] {
	k := &inFloatKernel[T]{set: make(map[int64]struct{}, len(list)), hasNull: hasNull}
	for _, f := range list {
		k.set[floatKey(T(f))] = struct{}{}
	}
	return k
}

func floatKey[T float32 | float64](f T) int64 {
	if f32, ok := any(f).(float32); ok {
		return int64(fkey32(f32))
	}
	return fkey64(float64(f))
}

func (k *inFloatKernel[T]) eval(ev *evaluator, arr arrow.Array, out tri) error {
	vals, err := valuesOf[T](arr)
	if err != nil {
		return err
	}
	n := len(vals)
	for w := range out.t {
		lo := w << 6
		hi := min(lo+64, n)
		var bits uint64
		for j, v := range vals[lo:hi] {
			_, hit := k.set[floatKey(v)]
			bits |= b2u(hit) << uint(j)
		}
		out.t[w] = bits
	}
	ev.finish(arr, out, k.hasNull)
	return nil
}

// inStrKernel is `col IN ('a', ...)` for string and binary columns: short lists are
// scanned, longer ones hashed.
type inStrKernel struct {
	list    []string
	set     map[string]struct{}
	hasNull bool
}

func newInStrKernel(list []string, hasNull bool) *inStrKernel {
	k := &inStrKernel{list: list, hasNull: hasNull}
	if len(list) > inScanMax {
		k.set = make(map[string]struct{}, len(list))
		for _, v := range list {
			k.set[v] = struct{}{}
		}
	}
	return k
}

func (k *inStrKernel) eval(ev *evaluator, arr arrow.Array, out tri) error {
	sd, err := stringsOf(arr)
	if err != nil {
		return err
	}
	if sd.o64 != nil {
		inStrBits(sd.o64, sd.data, arr.Len(), k, out.t)
	} else {
		inStrBits(sd.o32, sd.data, arr.Len(), k, out.t)
	}
	ev.finish(arr, out, k.hasNull)
	return nil
}

func inStrBits[O int32 | int64](offs []O, data []byte, n int, k *inStrKernel, out []uint64) {
	for w := range out {
		lo := w << 6
		hi := min(lo+64, n)
		var bits uint64
		for i := lo; i < hi; i++ {
			v := data[offs[i]:offs[i+1]]
			var hit bool
			if k.set != nil {
				_, hit = k.set[string(v)] // no allocation: map lookup
			} else {
				for _, x := range k.list {
					if len(x) == len(v) && string(v) == x {
						hit = true
						break
					}
				}
			}
			bits |= b2u(hit) << uint(i-lo)
		}
		out[w] = bits
	}
}

// inBoolKernel is `col IN (TRUE, ...)` for boolean columns.
type inBoolKernel struct {
	hasTrue, hasFalse, hasNull bool
}

func (k *inBoolKernel) eval(ev *evaluator, arr arrow.Array, out tri) error {
	b := &boolKernel{ifTrue: k.hasTrue, ifFalse: k.hasFalse}
	if !k.hasNull {
		return b.eval(ev, arr, out)
	}
	if err := b.eval(ev, arr, out); err != nil {
		return err
	}
	clear64(out.f) // a non-match is NULL when the list holds NULL
	return nil
}

// likeKernel is `col LIKE 'pattern'` for string and binary columns.
type likeKernel struct{ m *likeMatcher }

func (k *likeKernel) eval(ev *evaluator, arr arrow.Array, out tri) error {
	sd, err := stringsOf(arr)
	if err != nil {
		return err
	}
	if sd.o64 != nil {
		err = likeBits(ev, sd.o64, sd.data, arr.Len(), k.m, out.t)
	} else {
		err = likeBits(ev, sd.o32, sd.data, arr.Len(), k.m, out.t)
	}
	if err != nil {
		return err
	}
	ev.finish(arr, out, false)
	return nil
}

func likeBits[O int32 | int64](ev *evaluator, offs []O, data []byte, n int, m *likeMatcher, out []uint64) error {
	// A general pattern costs up to pattern × value per row; a hostile one over long
	// values is slow, so let the caller's ctx stop it every so much work.
	const budget = 1 << 22
	work := 0
	for w := range out {
		lo := w << 6
		hi := min(lo+64, n)
		var bits uint64
		for i := lo; i < hi; i++ {
			v := data[offs[i]:offs[i+1]]
			bits |= b2u(m.match(v)) << uint(i-lo)
			if m.slow() {
				if work += (len(v) + 1) * m.cost; work > budget {
					work = 0
					if err := ev.ctx.Err(); err != nil {
						return err
					}
				}
			}
		}
		out[w] = bits
	}
	return nil
}

// dictKernel evaluates its inner kernel once over the dictionary's values, then maps
// each row through its index: a string filter over a dictionary column costs one
// lookup per row whatever the predicate.
type dictKernel struct{ inner kernel }

func (k *dictKernel) eval(ev *evaluator, arr arrow.Array, out tri) error {
	d, ok := arr.(*array.Dictionary)
	if !ok {
		return fmt.Errorf("expr: unexpected array %T for a dictionary kernel", arr)
	}
	dict := d.Dictionary()
	m := dict.Len()
	dt := tri{make([]uint64, nwords(m)), make([]uint64, nwords(m))}
	if m > 0 {
		if err := k.inner.eval(ev, dict, dt); err != nil {
			return err
		}
	}
	idx := d.Indices()
	v := ev.scratch(idx.Len())
	defer ev.release(v, idx.Len())
	validity(idx, v)
	var err error
	switch ix := idx.(type) {
	case *array.Int8:
		err = gather(ix.Int8Values(), m, dt, v, out)
	case *array.Int16:
		err = gather(ix.Int16Values(), m, dt, v, out)
	case *array.Int32:
		err = gather(ix.Int32Values(), m, dt, v, out)
	case *array.Int64:
		err = gather(ix.Int64Values(), m, dt, v, out)
	case *array.Uint8:
		err = gather(ix.Uint8Values(), m, dt, v, out)
	case *array.Uint16:
		err = gather(ix.Uint16Values(), m, dt, v, out)
	case *array.Uint32:
		err = gather(ix.Uint32Values(), m, dt, v, out)
	case *array.Uint64:
		err = gather(ix.Uint64Values(), m, dt, v, out)
	default:
		err = fmt.Errorf("expr: unexpected dictionary index array %T", idx)
	}
	return err
}

// gather sets each row's result to its dictionary entry's result; a null index is NULL.
// An index outside the dictionary is an error, except under a null, where Arrow leaves
// the index undefined.
func gather[I integer](idx []I, m int, dt tri, valid []uint64, out tri) error {
	n := len(idx)
	for w := range out.t {
		lo := w << 6
		hi := min(lo+64, n)
		var tb, fb uint64
		vw := valid[w]
		for j, x := range idx[lo:hi] {
			u := uint64(x)
			if x < 0 || u >= uint64(m) {
				if vw>>uint(j)&1 != 0 {
					return fmt.Errorf("expr: corrupt dictionary array: index %d at row %d outside %d values", u, lo+j, m)
				}
				continue
			}
			tb |= (dt.t[u>>6] >> (u & 63) & 1) << uint(j)
			fb |= (dt.f[u>>6] >> (u & 63) & 1) << uint(j)
		}
		out.t[w] = tb & vw
		out.f[w] = fb & vw
	}
	return nil
}

// Column-against-column kernels. These are the less common path, so they widen both
// columns to one type per batch and compare row by row.

// holdsTable[op][c+1] is op.holds(c).
var holdsTable = func() (t [6][3]bool) {
	for op := opEq; op <= opGe; op++ {
		for c := -1; c <= 1; c++ {
			t[op][c+1] = op.holds(c)
		}
	}
	return t
}()

type pairIntKernel struct{ op cmpOp }

func (k *pairIntKernel) eval(ev *evaluator, a, b arrow.Array, out tri) error {
	x, err := widenInt64(a)
	if err != nil {
		return err
	}
	y, err := widenInt64(b)
	if err != nil {
		return err
	}
	pairBits(x, y, k.op, out.t)
	return nil
}

type pairUintKernel struct{ op cmpOp }

func (k *pairUintKernel) eval(ev *evaluator, a, b arrow.Array, out tri) error {
	x, err := widen[uint64](a)
	if err != nil {
		return err
	}
	y, err := widen[uint64](b)
	if err != nil {
		return err
	}
	pairBits(x, y, k.op, out.t)
	return nil
}

type pairFloatKernel struct{ op cmpOp }

func (k *pairFloatKernel) eval(ev *evaluator, a, b arrow.Array, out tri) error {
	x, err := widen[float64](a)
	if err != nil {
		return err
	}
	y, err := widen[float64](b)
	if err != nil {
		return err
	}
	tab := holdsTable[k.op]
	for w := range out.t {
		lo := w << 6
		hi := min(lo+64, len(x))
		var bits uint64
		for i := lo; i < hi; i++ {
			bits |= b2u(tab[floatCmp(x[i], y[i])+1]) << uint(i-lo)
		}
		out.t[w] = bits
	}
	return nil
}

// floatCmp orders floats in total order (see fkey64).
func floatCmp(a, b float64) int {
	x, y := fkey64(a), fkey64(b)
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

func pairBits[T int64 | uint64](x, y []T, op cmpOp, out []uint64) {
	tab := holdsTable[op]
	for w := range out {
		lo := w << 6
		hi := min(lo+64, len(x))
		var bits uint64
		for i := lo; i < hi; i++ {
			c := 0
			if x[i] < y[i] {
				c = -1
			} else if x[i] > y[i] {
				c = 1
			}
			bits |= b2u(tab[c+1]) << uint(i-lo)
		}
		out[w] = bits
	}
}

// widenInt64 returns the column as int64 values (no copy for int64-backed types).
func widenInt64(arr arrow.Array) ([]int64, error) {
	switch a := arr.(type) {
	case *array.Int64:
		return a.Int64Values(), nil
	}
	return widen[int64](arr)
}

func widen[D int64 | uint64 | float64](arr arrow.Array) ([]D, error) {
	switch a := arr.(type) {
	case *array.Int8:
		return convert[D](a.Int8Values()), nil
	case *array.Int16:
		return convert[D](a.Int16Values()), nil
	case *array.Int32:
		return convert[D](a.Int32Values()), nil
	case *array.Int64:
		return convert[D](a.Int64Values()), nil
	case *array.Uint8:
		return convert[D](a.Uint8Values()), nil
	case *array.Uint16:
		return convert[D](a.Uint16Values()), nil
	case *array.Uint32:
		return convert[D](a.Uint32Values()), nil
	case *array.Uint64:
		return convert[D](a.Uint64Values()), nil
	case *array.Float32:
		return convert[D](a.Float32Values()), nil
	case *array.Float64:
		return convert[D](a.Float64Values()), nil
	case *array.Timestamp:
		return convert[D](a.TimestampValues()), nil
	case *array.Date32:
		return convert[D](a.Date32Values()), nil
	case *array.Date64:
		return convert[D](a.Date64Values()), nil
	}
	return nil, fmt.Errorf("expr: unexpected array %T for a numeric comparison", arr)
}

func convert[D, S number](src []S) []D {
	out := make([]D, len(src))
	for i, v := range src {
		out[i] = D(v)
	}
	return out
}

type pairStrKernel struct{ op cmpOp }

func (k *pairStrKernel) eval(ev *evaluator, a, b arrow.Array, out tri) error {
	x, err := stringsOf(a)
	if err != nil {
		return err
	}
	y, err := stringsOf(b)
	if err != nil {
		return err
	}
	tab := holdsTable[k.op]
	n := a.Len()
	for w := range out.t {
		lo := w << 6
		hi := min(lo+64, n)
		var bits uint64
		for i := lo; i < hi; i++ {
			bits |= b2u(tab[bytes.Compare(x.value(i), y.value(i))+1]) << uint(i-lo)
		}
		out.t[w] = bits
	}
	return nil
}

func (sd *stringData) value(i int) []byte {
	if sd.o64 != nil {
		return sd.data[sd.o64[i]:sd.o64[i+1]]
	}
	return sd.data[sd.o32[i]:sd.o32[i+1]]
}

type pairBoolKernel struct{ op cmpOp }

func (k *pairBoolKernel) eval(ev *evaluator, a, b arrow.Array, out tri) error {
	x, ok1 := a.(*array.Boolean)
	y, ok2 := b.(*array.Boolean)
	if !ok1 || !ok2 {
		return fmt.Errorf("expr: unexpected arrays %T, %T for a boolean comparison", a, b)
	}
	n := a.Len()
	xb := ev.get()
	defer ev.put(xb)
	loadBits(bufferBytes(x, 1), x.Data().Offset(), n, xb)
	loadBits(bufferBytes(y, 1), y.Data().Offset(), n, out.t)
	tab := holdsTable[k.op]
	for i, yv := range out.t {
		xv := xb[i]
		var r uint64
		if tab[1] { // equal
			r |= ^(xv ^ yv)
		}
		if tab[2] { // x true, y false
			r |= xv &^ yv
		}
		if tab[0] { // x false, y true
			r |= yv &^ xv
		}
		out.t[i] = r
	}
	if len(out.t) > 0 {
		out.t[len(out.t)-1] &= tailMask(n)
	}
	return nil
}
