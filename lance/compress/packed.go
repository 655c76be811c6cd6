package compress

import (
	pb "github.com/lancectx/lancectx/lance/format/encodings21pb"
)

// variablePackedStruct decodes 2.2 variable packed struct values (full-zip only). Each
// value is one struct row: its fields in order, a fixed-width field as its bytes, a
// variable-width field as a 32- or 64-bit little-endian length then the bytes. An empty
// value is a row whose fields are all empty (zero bytes, empty strings); the row's
// validity lives in the repetition/definition levels. Each field's values are then
// decoded with the field's own per-value encoding.
func (d *Decoder) variablePackedStruct(v *pb.VariablePackedStruct, data []byte, offsets []uint64) (*Block, error) {
	fields := v.GetFields()
	if len(fields) == 0 {
		return nil, corruptf("variable_packed_struct without fields")
	}
	n := uint64(len(offsets) - 1)
	type acc struct {
		fixed   int // bytes per value, or 0 for a variable field
		lenSize int
		data    []byte
		offsets []uint64
	}
	accs := make([]acc, len(fields))
	for i, f := range fields {
		if f.GetValue() == nil {
			return nil, corruptf("variable_packed_struct field %d without an encoding", i)
		}
		switch l := f.GetLayout().(type) {
		case *pb.VariablePackedStruct_FieldEncoding_BitsPerValue:
			if l.BitsPerValue == 0 || l.BitsPerValue%8 != 0 || l.BitsPerValue > 1<<20 {
				return nil, corruptf("variable_packed_struct field %d of %d bits", i, l.BitsPerValue)
			}
			accs[i].fixed = int(l.BitsPerValue / 8)
		case *pb.VariablePackedStruct_FieldEncoding_BitsPerLength:
			if l.BitsPerLength != 32 && l.BitsPerLength != 64 {
				return nil, corruptf("variable_packed_struct field %d with %d-bit lengths", i, l.BitsPerLength)
			}
			accs[i].lenSize = int(l.BitsPerLength / 8)
			accs[i].offsets = make([]uint64, 1, n+1)
		default:
			return nil, corruptf("variable_packed_struct field %d without a layout", i)
		}
	}
	for r := uint64(0); r < n; r++ {
		row := data[offsets[r]:offsets[r+1]]
		if len(row) == 0 {
			for i := range accs {
				a := &accs[i]
				if a.fixed > 0 {
					a.data = append(a.data, make([]byte, a.fixed)...)
				} else {
					a.offsets = append(a.offsets, uint64(len(a.data)))
				}
			}
			continue
		}
		pos := 0
		for i := range accs {
			a := &accs[i]
			if a.fixed > 0 {
				if len(row)-pos < a.fixed {
					return nil, corruptf("variable_packed_struct row %d: field %d past the row", r, i)
				}
				a.data = append(a.data, row[pos:pos+a.fixed]...)
				pos += a.fixed
				continue
			}
			if len(row)-pos < a.lenSize {
				return nil, corruptf("variable_packed_struct row %d: field %d length past the row", r, i)
			}
			l := readUint(row[pos:], a.lenSize)
			pos += a.lenSize
			if l > uint64(len(row)-pos) {
				return nil, corruptf("variable_packed_struct row %d: field %d of %d bytes past the row", r, i, l)
			}
			a.data = append(a.data, row[pos:pos+int(l)]...)
			a.offsets = append(a.offsets, uint64(len(a.data)))
			pos += int(l)
		}
		if pos != len(row) {
			return nil, corruptf("variable_packed_struct row %d: %d bytes after the last field", r, len(row)-pos)
		}
	}
	out := &Block{N: n, Fields: make([]*Block, len(fields))}
	for i, f := range fields {
		a := &accs[i]
		var err error
		if a.fixed > 0 {
			out.Fields[i], err = d.fixedPerValue(f.GetValue(), a.data, n)
		} else {
			out.Fields[i], err = d.variablePerValues(f.GetValue(), a.data, a.offsets)
		}
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
