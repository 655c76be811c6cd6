package file

import (
	"fmt"
	"math"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lancectx/lancectx/lance/schema"
)

// 2.0 pages of fixed-size lists and of the null type.
//
// A fixed_size_list<T, d> page is nullable{fixed_size_list{d, items: nullable{flat}}};
// nested fixed-size lists nest the same way, each level with its own nullable wrapper,
// so fixed_size_list<fixed_size_list<int32, 2>, 3> is
// nullable{fixed_size_list{3, nullable{fixed_size_list{2, nullable{flat 32}}}}} with up
// to three validity buffers (rows, inner lists, items). A null-type column has
// nullable{all_nulls} pages without buffers.

// fslAcc decodes fixed_size_list<fixed-width, d>, or nested fixed-size lists over
// fixed-width items.
type fslAcc struct {
	bud *budget
	// levels are the fixed-size-list types from the field's inwards; per[i] is the
	// children of level i per row (per[len-1] the items of a row).
	levels []*arrow.FixedSizeListType
	per    []int
	width  int // item bytes; 0 = bool
	values []byte
	bools  bitmap
	// valid[i] is the validity of level i's children; rows the rows' own.
	valid  []validity
	rows   validity
	expect int
}

func newFSLAcc(t *arrow.FixedSizeListType, bud *budget) (*fslAcc, error) {
	if _, ok := schema.FixedSizeListItems(t); !ok {
		return nil, fmt.Errorf("%w: fixed_size_list of %s", ErrUnsupportedEncoding, t.Elem())
	}
	c := &fslAcc{bud: bud}
	var dt arrow.DataType = t
	per := 1
	for {
		f, ok := dt.(*arrow.FixedSizeListType)
		if !ok {
			break
		}
		per *= int(f.Len())
		c.levels, c.per = append(c.levels, f), append(c.per, per)
		dt = f.Elem()
	}
	w, ok := valueWidth(dt)
	if !ok {
		return nil, fmt.Errorf("%w: fixed_size_list of %s", ErrUnsupportedEncoding, dt)
	}
	c.width, c.valid = w, make([]validity, len(c.levels))
	return c, nil
}

func (c *fslAcc) reserve(n int) { c.expect += n }

func (c *fslAcc) items() int { return c.per[len(c.per)-1] }

func (c *fslAcc) appendZeros(cnt int) {
	if c.width == 0 {
		c.bools.appendConst(false, cnt)
	} else {
		c.values = append(c.values, make([]byte, cnt*c.width)...)
	}
}

func (c *fslAcc) appendPage(p *pageInfo, bufs [][]byte, _ *any, a, b int) error {
	n, err := pageRows(p)
	if err != nil {
		return err
	}
	if uint64(n)*uint64(c.items()) > math.MaxInt32*64 {
		return corruptf(-1, "fixed_size_list page of %d x %d items", n, c.items())
	}
	pe, err := p.encoding()
	if err != nil {
		return err
	}
	vals, rowValid, allNull, err := nullable(pe, bufs, n)
	if err != nil {
		return err
	}
	cnt := b - a
	icnt := cnt * c.items()
	if err := c.bud.take(icnt*max(c.width, 1) + len(c.levels)*(icnt/8+1)); err != nil {
		return err
	}
	if allNull {
		c.appendZeros(icnt)
		for i := range c.valid {
			c.valid[i].appendValid(cnt * c.per[i])
		}
		c.rows.appendNulls(cnt)
		return nil
	}
	// Walk the levels, checking all of them before appending anything.
	valid := make([][]byte, len(c.levels))
	allNullFrom := -1 // the level whose children are all null, if any
	for i, lt := range c.levels {
		fsl := vals.GetFixedSizeList()
		if fsl == nil {
			return unsupported(vals, "fixed_size_list")
		}
		if int64(fsl.GetDimension()) != int64(lt.Len()) {
			return corruptf(-1, "fixed_size_list page of dimension %d at level %d, field has %d", fsl.GetDimension(), i, lt.Len())
		}
		if fsl.GetItems() == nil {
			return corruptf(-1, "fixed_size_list without items")
		}
		var itemsAllNull bool
		vals, valid[i], itemsAllNull, err = nullable(fsl.GetItems(), bufs, n*c.per[i])
		if err != nil {
			return err
		}
		if itemsAllNull {
			allNullFrom = i
			break
		}
	}
	var data []byte
	if allNullFrom < 0 {
		bits := uint64(c.width * 8)
		if c.width == 0 {
			bits = 1
		}
		if data, err = flatBuf(vals, bufs, bits, n*c.items()); err != nil {
			return err
		}
	}
	for i := range c.levels {
		switch {
		case allNullFrom >= 0 && i == allNullFrom:
			c.valid[i].appendNulls(cnt * c.per[i])
		case allNullFrom >= 0 && i > allNullFrom:
			c.valid[i].appendValid(cnt * c.per[i])
		default:
			c.valid[i].appendBitmap(valid[i], a*c.per[i], cnt*c.per[i])
		}
	}
	ia := a * c.items()
	switch {
	case allNullFrom >= 0:
		c.appendZeros(icnt)
	case c.width == 0:
		c.bools.appendBits(data, ia, icnt)
	default:
		c.values = appendValues(c.values, data[ia*c.width:(ia+icnt)*c.width], c.rows.n+cnt, c.expect, c.items()*c.width)
	}
	c.rows.appendBitmap(rowValid, a, cnt)
	return nil
}

func (c *fslAcc) finish() (arrow.ArrayData, error) {
	data := c.values
	if c.width == 0 {
		data = c.bools.bytes()
	}
	last := len(c.levels) - 1
	iv := &c.valid[last]
	child := array.NewData(c.levels[last].Elem(), iv.n, []*memory.Buffer{iv.buffer(), memory.NewBufferBytes(data)}, nil, iv.nulls, 0)
	for i := last; i > 0; i-- {
		v := &c.valid[i-1]
		outer := array.NewData(c.levels[i], v.n, []*memory.Buffer{v.buffer()}, []arrow.ArrayData{child}, v.nulls, 0)
		child.Release()
		child = outer
	}
	defer child.Release()
	return array.NewData(c.levels[0], c.rows.n, []*memory.Buffer{c.rows.buffer()}, []arrow.ArrayData{child}, c.rows.nulls, 0), nil
}

// nullAcc counts the rows of a null-type column; its pages must be all null.
type nullAcc struct {
	bud *budget
	n   int
}

func (c *nullAcc) reserve(int) {}

func (c *nullAcc) appendPage(p *pageInfo, bufs [][]byte, _ *any, a, b int) error {
	n, err := pageRows(p)
	if err != nil {
		return err
	}
	pe, err := p.encoding()
	if err != nil {
		return err
	}
	if _, _, allNull, err := nullable(pe, bufs, n); err != nil {
		return err
	} else if !allNull {
		return corruptf(-1, "%s page for a field of the null type", encodingName(pe))
	}
	if err := c.bud.take((b-a)/8 + 1); err != nil {
		return err
	}
	c.n += b - a
	return nil
}

func (c *nullAcc) finish() (arrow.ArrayData, error) {
	return array.NewData(arrow.Null, c.n, []*memory.Buffer{nil}, nil, c.n, 0), nil
}
