package arrowrows

import (
	"fmt"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
)

// Validate checks that the buffers of arr (and of its children and dictionary) hold
// what its type, offset and length promise: bitmaps and values long enough, offsets
// non-decreasing and inside their data, dictionary indices inside the dictionary,
// UTF-8 strings, and null counts that match the bitmaps. Arrays that came from
// another process (an Arrow IPC body) must pass it before anything reads them: the
// array accessors trust their buffers and a lie there is an out-of-range panic or a
// silent wrong value later. Only the types tables of this project use are known;
// another type is an error.
func Validate(arr arrow.Array) error {
	return validateData(arr.Data(), "")
}

func validateData(d arrow.ArrayData, path string) error {
	off, n := d.Offset(), d.Len()
	if off < 0 || n < 0 {
		return fmt.Errorf("%snegative offset or length", path)
	}
	end := off + n
	bufs := d.Buffers()
	need := func(i, bytes int) error {
		if i >= len(bufs) || bufs[i] == nil {
			if bytes == 0 {
				return nil
			}
			return fmt.Errorf("%sbuffer %d is missing", path, i)
		}
		if bufs[i].Len() < bytes {
			return fmt.Errorf("%sbuffer %d has %d bytes, %d needed", path, i, bufs[i].Len(), bytes)
		}
		return nil
	}
	// Validity: a bitmap, when present, must cover the rows and agree with the null
	// count (a non-nullable column is checked by its null count alone).
	if len(bufs) > 0 && bufs[0] != nil && bufs[0].Len() > 0 {
		if err := need(0, int(bitutil.BytesForBits(int64(end)))); err != nil {
			return err
		}
		if nulls := n - bitutil.CountSetBits(bufs[0].Bytes(), off, n); nulls != d.NullN() {
			return fmt.Errorf("%snull count says %d but the bitmap has %d nulls", path, d.NullN(), nulls)
		}
	} else if d.NullN() != 0 && d.DataType().ID() != arrow.NULL {
		return fmt.Errorf("%snull count %d without a validity bitmap", path, d.NullN())
	}
	valid := func(i int) bool {
		if len(bufs) == 0 || bufs[0] == nil || bufs[0].Len() == 0 {
			return true
		}
		return bitutil.BitIsSet(bufs[0].Bytes(), off+i)
	}
	switch t := d.DataType().(type) {
	case *arrow.BooleanType:
		return need(1, int(bitutil.BytesForBits(int64(end))))
	case arrow.FixedWidthDataType:
		if _, ok := t.(*arrow.DictionaryType); ok {
			break
		}
		switch t.ID() {
		case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64,
			arrow.FLOAT16, arrow.FLOAT32, arrow.FLOAT64, arrow.TIMESTAMP, arrow.DATE32, arrow.DATE64, arrow.TIME32, arrow.TIME64,
			arrow.DURATION:
			return need(1, end*t.BitWidth()/8)
		}
	case *arrow.StringType:
		return validateOffsets32(d, path, true, valid)
	case *arrow.BinaryType:
		return validateOffsets32(d, path, false, valid)
	case *arrow.LargeStringType:
		return validateOffsets64(d, path, true, valid)
	case *arrow.LargeBinaryType:
		return validateOffsets64(d, path, false, valid)
	case *arrow.ListType:
		if err := need(1, 4*(end+1)); err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		offs := arrow.Int32Traits.CastFromBytes(bufs[1].Bytes())[off : end+1]
		if err := monotonic32(offs, path); err != nil {
			return err
		}
		children := d.Children()
		if len(children) != 1 {
			return fmt.Errorf("%slist has %d children", path, len(children))
		}
		if int(offs[n]) > children[0].Len() {
			return fmt.Errorf("%slist offsets reach %d but the child has %d values", path, offs[n], children[0].Len())
		}
		return validateData(children[0], path+"item: ")
	case *arrow.StructType:
		children := d.Children()
		if len(children) != len(t.Fields()) {
			return fmt.Errorf("%sstruct has %d children, its type %d fields", path, len(children), len(t.Fields()))
		}
		for i, c := range children {
			if c.Len() < end {
				return fmt.Errorf("%sstruct field %q has %d values, %d needed", path, t.Field(i).Name, c.Len(), end)
			}
			if err := validateData(c, path+t.Field(i).Name+": "); err != nil {
				return err
			}
		}
		return nil
	}
	if t, ok := d.DataType().(*arrow.DictionaryType); ok {
		dict := d.Dictionary()
		if dict == nil {
			return fmt.Errorf("%sdictionary array without a dictionary", path)
		}
		if err := validateData(dict, path+"dictionary: "); err != nil {
			return err
		}
		w := t.IndexType.(arrow.FixedWidthDataType).BitWidth() / 8
		if err := need(1, end*w); err != nil {
			return err
		}
		b := bufs[1].Bytes()
		size := dict.Len()
		for i := 0; i < n; i++ {
			if !valid(i) {
				continue
			}
			var k int64
			j := (off + i) * w
			switch t.IndexType.ID() {
			case arrow.INT8:
				k = int64(int8(b[j]))
			case arrow.INT16:
				k = int64(arrow.Int16Traits.CastFromBytes(b[j : j+2])[0])
			case arrow.INT32:
				k = int64(arrow.Int32Traits.CastFromBytes(b[j : j+4])[0])
			case arrow.INT64:
				k = arrow.Int64Traits.CastFromBytes(b[j : j+8])[0]
			default:
				return fmt.Errorf("%sdictionary index type %s is not supported", path, t.IndexType)
			}
			if k < 0 || k >= int64(size) {
				return fmt.Errorf("%sdictionary index %d at row %d is outside the dictionary of %d values", path, k, i, size)
			}
		}
		return nil
	}
	return fmt.Errorf("%stype %s is not supported", path, d.DataType())
}

func monotonic32(offs []int32, path string) error {
	if offs[0] < 0 {
		return fmt.Errorf("%snegative offset %d", path, offs[0])
	}
	for i := 1; i < len(offs); i++ {
		if offs[i] < offs[i-1] {
			return fmt.Errorf("%soffsets decrease at row %d", path, i-1)
		}
	}
	return nil
}

func validateOffsets32(d arrow.ArrayData, path string, utf bool, valid func(int) bool) error {
	off, n := d.Offset(), d.Len()
	bufs := d.Buffers()
	if len(bufs) < 3 || bufs[1] == nil || bufs[1].Len() < 4*(off+n+1) {
		if n == 0 {
			return nil
		}
		return fmt.Errorf("%soffsets buffer too short", path)
	}
	offs := arrow.Int32Traits.CastFromBytes(bufs[1].Bytes())[off : off+n+1]
	if err := monotonic32(offs, path); err != nil {
		return err
	}
	var data []byte
	if bufs[2] != nil {
		data = bufs[2].Bytes()
	}
	if int(offs[n]) > len(data) {
		return fmt.Errorf("%soffsets reach %d but the data has %d bytes", path, offs[n], len(data))
	}
	if utf {
		for i := 0; i < n; i++ {
			if valid(i) && !utf8.Valid(data[offs[i]:offs[i+1]]) {
				return fmt.Errorf("%sinvalid UTF-8 at row %d", path, i)
			}
		}
	}
	return nil
}

func validateOffsets64(d arrow.ArrayData, path string, utf bool, valid func(int) bool) error {
	off, n := d.Offset(), d.Len()
	bufs := d.Buffers()
	if len(bufs) < 3 || bufs[1] == nil || bufs[1].Len() < 8*(off+n+1) {
		if n == 0 {
			return nil
		}
		return fmt.Errorf("%soffsets buffer too short", path)
	}
	offs := arrow.Int64Traits.CastFromBytes(bufs[1].Bytes())[off : off+n+1]
	if offs[0] < 0 {
		return fmt.Errorf("%snegative offset %d", path, offs[0])
	}
	for i := 1; i < len(offs); i++ {
		if offs[i] < offs[i-1] {
			return fmt.Errorf("%soffsets decrease at row %d", path, i-1)
		}
	}
	var data []byte
	if bufs[2] != nil {
		data = bufs[2].Bytes()
	}
	if offs[n] > int64(len(data)) {
		return fmt.Errorf("%soffsets reach %d but the data has %d bytes", path, offs[n], len(data))
	}
	if utf {
		for i := 0; i < n; i++ {
			if valid(i) && !utf8.Valid(data[offs[i]:offs[i+1]]) {
				return fmt.Errorf("%sinvalid UTF-8 at row %d", path, i)
			}
		}
	}
	return nil
}
