package expr

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Three-valued results are two bitsets over the rows of a batch: t has a bit for each
// row where the value is TRUE, f for each row where it is FALSE, and a row in neither is
// NULL. With this encoding the SQL truth tables are word-wide bit operations:
//
//	a AND b: t = ta & tb, f = fa | fb
//	a OR b:  t = ta | tb, f = fa & fb
//	NOT a:   t = fa,      f = ta
//
// Bitsets use Arrow's bit order (row i is bit i%64 of word i/64), and bits past the
// last row are always zero.
type tri struct {
	t, f []uint64
}

func nwords(n int) int { return (n + 63) >> 6 }

// tailMask has a bit set for each row of the last word of an n-row bitset.
func tailMask(n int) uint64 {
	if n&63 == 0 {
		return ^uint64(0)
	}
	return uint64(1)<<(uint(n)&63) - 1
}

func fillOnes(w []uint64, n int) {
	for i := range w {
		w[i] = ^uint64(0)
	}
	if len(w) > 0 {
		w[len(w)-1] &= tailMask(n)
	}
}

func clear64(w []uint64) {
	for i := range w {
		w[i] = 0
	}
}

// evaluator carries the state of one Eval call: the batch and a pool of row-length
// bitsets, so evaluating a long AND chain allocates per nesting level, not per term.
type evaluator struct {
	ctx  context.Context
	rec  arrow.RecordBatch
	n    int
	pool [][]uint64
}

func (ev *evaluator) get() []uint64 {
	if k := len(ev.pool); k > 0 {
		w := ev.pool[k-1]
		ev.pool = ev.pool[:k-1]
		return w
	}
	return make([]uint64, nwords(ev.n))
}

func (ev *evaluator) put(w []uint64) { ev.pool = append(ev.pool, w) }

// scratch returns a bitset for m rows: from the pool when m is the batch length.
func (ev *evaluator) scratch(m int) []uint64 {
	if m == ev.n {
		return ev.get()
	}
	return make([]uint64, nwords(m))
}

func (ev *evaluator) release(w []uint64, m int) {
	if m == ev.n {
		ev.put(w)
	}
}

// validity writes the validity bits of arr into dst (nwords(arr.Len()) words).
func validity(arr arrow.Array, dst []uint64) {
	n := arr.Len()
	nulls := arr.NullN()
	bm := arr.NullBitmapBytes()
	switch {
	case nulls == 0:
		fillOnes(dst, n)
	case nulls >= n || len(bm) == 0:
		clear64(dst)
	default:
		loadBits(bm, arr.Data().Offset(), n, dst)
	}
}

// loadBits copies n bits of an Arrow bitmap, starting at bit off, into dst. Bytes
// missing from a short (corrupt) buffer read as zero rather than panicking.
func loadBits(buf []byte, off, n int, dst []uint64) {
	nw := nwords(n)
	shift := uint(off & 7)
	at := off >> 3
	for w := 0; w < nw; w++ {
		lo := load64(buf, at+w*8)
		if shift != 0 {
			hi := load64(buf, at+w*8+8)
			lo = lo>>shift | hi<<(64-shift)
		}
		dst[w] = lo
	}
	if nw > 0 {
		dst[nw-1] &= tailMask(n)
	}
}

// load64 reads 8 little-endian bytes at i, treating bytes past the end as zero.
func load64(b []byte, i int) uint64 {
	if i >= 0 && i+8 <= len(b) {
		return binary.LittleEndian.Uint64(b[i:])
	}
	var x uint64
	for k := 0; k < 8; k++ {
		if j := i + k; j >= 0 && j < len(b) {
			x |= uint64(b[j]) << (8 * k)
		}
	}
	return x
}

// finish turns comparison bits in out.t (computed for every row, null or not) into a
// three-valued result: null rows become NULL, the rest TRUE or FALSE. With
// unknownIfFalse, non-matching rows become NULL instead of FALSE (IN with a NULL in
// the list).
func (ev *evaluator) finish(arr arrow.Array, out tri, unknownIfFalse bool) {
	n := arr.Len()
	if arr.NullN() == 0 {
		if unknownIfFalse {
			clear64(out.f)
			return
		}
		for i, c := range out.t {
			out.f[i] = ^c
		}
		if len(out.f) > 0 {
			out.f[len(out.f)-1] &= tailMask(n)
		}
		return
	}
	validity(arr, out.f)
	for i, v := range out.f {
		c := out.t[i] & v
		out.t[i] = c
		if unknownIfFalse {
			out.f[i] = 0
		} else {
			out.f[i] = v &^ c
		}
	}
}

// constResult sets every non-null row of arr to res.
func (ev *evaluator) constResult(arr arrow.Array, out tri, res bool) {
	validity(arr, out.t)
	if res {
		clear64(out.f)
	} else {
		copy(out.f, out.t)
		clear64(out.t)
	}
}

// pnode is a bound filter node.
type pnode interface {
	// eval writes the node's result for every row of the batch into out, whose
	// bitsets have nwords(ev.n) words.
	eval(ev *evaluator, out tri) error
}

// constNode is a value known at bind time: TRUE, FALSE or NULL (t and f both false).
type constNode struct{ t, f bool }

func (c *constNode) eval(ev *evaluator, out tri) error {
	if c.t {
		fillOnes(out.t, ev.n)
	} else {
		clear64(out.t)
	}
	if c.f {
		fillOnes(out.f, ev.n)
	} else {
		clear64(out.f)
	}
	return nil
}

// leafNode runs a kernel over one column.
type leafNode struct {
	col  int
	name string
	typ  arrow.DataType
	k    kernel
}

func (l *leafNode) eval(ev *evaluator, out tri) error {
	arr, err := ev.column(l.col, l.name, l.typ)
	if err != nil || ev.n == 0 {
		return err
	}
	return l.k.eval(ev, arr, out)
}

func (ev *evaluator) column(i int, name string, typ arrow.DataType) (arrow.Array, error) {
	if err := ev.ctx.Err(); err != nil {
		return nil, err
	}
	sc := ev.rec.Schema()
	if i >= int(ev.rec.NumCols()) || sc.Field(i).Name != name || !arrow.TypeEqual(sc.Field(i).Type, typ) {
		return nil, fmt.Errorf("expr: record batch does not match the schema the filter was bound to: want column %d to be %q (%s)", i, name, typ)
	}
	arr := ev.rec.Column(i)
	if arr.Len() != ev.n {
		return nil, fmt.Errorf("expr: column %q has %d rows, record batch %d", name, arr.Len(), ev.n)
	}
	return arr, nil
}

// pairNode runs a two-column kernel (column compared with column).
type pairNode struct {
	a, b         int
	aName, bName string
	aTyp, bTyp   arrow.DataType
	k            pairKernel
}

func (p *pairNode) eval(ev *evaluator, out tri) error {
	a, err := ev.column(p.a, p.aName, p.aTyp)
	if err != nil {
		return err
	}
	b, err := ev.column(p.b, p.bName, p.bTyp)
	if err != nil || ev.n == 0 {
		return err
	}
	if err := p.k.eval(ev, a, b, out); err != nil {
		return err
	}
	// NULL if either side is NULL.
	va := ev.get()
	defer ev.put(va)
	validity(a, va)
	vb := ev.get()
	defer ev.put(vb)
	validity(b, vb)
	for i := range out.t {
		v := va[i] & vb[i]
		c := out.t[i] & v
		out.t[i] = c
		out.f[i] = v &^ c
	}
	return nil
}

type andNode struct{ kids []pnode }

func (a *andNode) eval(ev *evaluator, out tri) error {
	if err := a.kids[0].eval(ev, out); err != nil {
		return err
	}
	tmp := tri{ev.get(), ev.get()}
	defer func() { ev.put(tmp.t); ev.put(tmp.f) }()
	for _, k := range a.kids[1:] {
		if err := ev.ctx.Err(); err != nil {
			return err
		}
		if err := k.eval(ev, tmp); err != nil {
			return err
		}
		for i := range out.t {
			out.t[i] &= tmp.t[i]
			out.f[i] |= tmp.f[i]
		}
	}
	return nil
}

type orNode struct{ kids []pnode }

func (o *orNode) eval(ev *evaluator, out tri) error {
	if err := o.kids[0].eval(ev, out); err != nil {
		return err
	}
	tmp := tri{ev.get(), ev.get()}
	defer func() { ev.put(tmp.t); ev.put(tmp.f) }()
	for _, k := range o.kids[1:] {
		if err := ev.ctx.Err(); err != nil {
			return err
		}
		if err := k.eval(ev, tmp); err != nil {
			return err
		}
		for i := range out.t {
			out.t[i] |= tmp.t[i]
			out.f[i] &= tmp.f[i]
		}
	}
	return nil
}

type notNode struct{ kid pnode }

func (n *notNode) eval(ev *evaluator, out tri) error {
	return n.kid.eval(ev, tri{t: out.f, f: out.t})
}

// isNode is IS [NOT] NULL|TRUE|FALSE over a boolean child; its result is never NULL.
type isNode struct {
	kid  pnode
	what isKind
	not  bool
}

func (n *isNode) eval(ev *evaluator, out tri) error {
	if err := n.kid.eval(ev, out); err != nil {
		return err
	}
	mask := tailMask(ev.n)
	last := len(out.t) - 1
	for i := range out.t {
		t, f := out.t[i], out.f[i]
		var yes uint64
		switch n.what {
		case isNull:
			yes = ^(t | f)
		case isTrue:
			yes = t
		default:
			yes = f
		}
		no := ^yes
		if i == last {
			yes &= mask
			no &= mask
		}
		if n.not {
			yes, no = no, yes
		}
		out.t[i], out.f[i] = yes, no
	}
	return nil
}

// Selection is the set of rows of a batch for which a filter is TRUE.
type Selection struct {
	words []uint64
	n     int
}

// Len is the number of rows of the batch.
func (s Selection) Len() int { return s.n }

// Count is the number of selected rows.
func (s Selection) Count() int {
	c := 0
	for _, w := range s.words {
		c += bits.OnesCount64(w)
	}
	return c
}

// Get reports whether row i is selected.
func (s Selection) Get(i int) bool {
	return i >= 0 && i < s.n && s.words[i>>6]>>(uint(i)&63)&1 != 0
}

// AppendRows appends the selected row indices to dst in ascending order (the shape a
// deletion vector wants).
func (s Selection) AppendRows(dst []uint32) []uint32 {
	for wi, w := range s.words {
		for w != 0 {
			b := bits.TrailingZeros64(w)
			dst = append(dst, uint32(wi<<6+b))
			w &= w - 1
		}
	}
	return dst
}

// Boolean returns the selection as an Arrow boolean array without nulls, the mask
// shape that Arrow's filter kernels take. The caller must Release it.
func (s Selection) Boolean() *array.Boolean {
	buf := make([]byte, len(s.words)*8)
	for i, w := range s.words {
		binary.LittleEndian.PutUint64(buf[i*8:], w)
	}
	data := array.NewData(arrow.FixedWidthTypes.Boolean, s.n,
		[]*memory.Buffer{nil, memory.NewBufferBytes(buf)}, nil, 0, 0)
	defer data.Release()
	return array.NewBooleanData(data)
}

// Select evaluates e over rec and returns the rows for which it is TRUE. An e that is
// not yet bound is bound to rec's schema first; bind once with Bind when evaluating
// many batches. Errors from binding wrap ErrInvalid; a batch whose schema differs from
// the bound one is an error; a cancelled ctx stops evaluation between steps.
func Select(ctx context.Context, e Expr, rec arrow.RecordBatch) (Selection, error) {
	b, ok := e.(*Bound)
	if !ok {
		var err error
		if b, err = Bind(e, rec.Schema()); err != nil {
			return Selection{}, err
		}
	}
	if err := ctx.Err(); err != nil {
		return Selection{}, err
	}
	n64 := rec.NumRows()
	if n64 < 0 || n64 > 1<<32 {
		return Selection{}, fmt.Errorf("expr: record batch of %d rows is too large", n64)
	}
	ev := &evaluator{ctx: ctx, rec: rec, n: int(n64)}
	out := tri{make([]uint64, nwords(ev.n)), ev.get()}
	if err := b.root.eval(ev, out); err != nil {
		return Selection{}, err
	}
	return Selection{words: out.t, n: ev.n}, nil
}

// Eval evaluates e over rec and returns a boolean array, without nulls, that is true
// exactly for the rows where the filter is TRUE (SQL WHERE semantics: FALSE and NULL
// rows are dropped). The caller must Release the array. See Select for binding and
// errors.
func Eval(ctx context.Context, e Expr, rec arrow.RecordBatch) (*array.Boolean, error) {
	s, err := Select(ctx, e, rec)
	if err != nil {
		return nil, err
	}
	return s.Boolean(), nil
}
