package vecindex

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// Errors of this package.
var (
	// ErrCorrupt marks an index file or message that cannot be decoded.
	ErrCorrupt = errors.New("vecindex: corrupt vector index")
	// ErrUnsupported marks a valid index this package does not read (e.g. IVF_PQ).
	ErrUnsupported = errors.New("vecindex: unsupported vector index")
	// ErrInvalid marks bad arguments (dimension mismatch, unknown metric, ...).
	ErrInvalid = errors.New("vecindex: invalid argument")
)

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// DetailsTypeURL is the type URL of the manifest's index_details for vector indices.
const DetailsTypeURL = "/lance.index.pb.VectorIndexDetails"

// tensorFloat32 is lance.index.pb.Tensor.DataType FLOAT32.
const tensorFloat32 = 2

// ivfMessage is lance.index.pb.IVF.
type ivfMessage struct {
	offsets []uint64
	lengths []uint32
	// centroids (row-major, shape[0] × shape[1]) when present.
	centroids []float32
	shape     []uint32
	loss      *float64
}

func (m *ivfMessage) marshal() []byte {
	var b []byte
	if len(m.offsets) > 0 {
		var p []byte
		for _, o := range m.offsets {
			p = protowire.AppendVarint(p, o)
		}
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendBytes(b, p)
	}
	if len(m.lengths) > 0 {
		var p []byte
		for _, l := range m.lengths {
			p = protowire.AppendVarint(p, uint64(l))
		}
		b = protowire.AppendTag(b, 3, protowire.BytesType)
		b = protowire.AppendBytes(b, p)
	}
	if m.shape != nil {
		var t []byte
		t = protowire.AppendTag(t, 1, protowire.VarintType)
		t = protowire.AppendVarint(t, tensorFloat32)
		var p []byte
		for _, s := range m.shape {
			p = protowire.AppendVarint(p, uint64(s))
		}
		t = protowire.AppendTag(t, 2, protowire.BytesType)
		t = protowire.AppendBytes(t, p)
		data := make([]byte, 4*len(m.centroids))
		for i, f := range m.centroids {
			binary.LittleEndian.PutUint32(data[4*i:], math.Float32bits(f))
		}
		t = protowire.AppendTag(t, 3, protowire.BytesType)
		t = protowire.AppendBytes(t, data)
		b = protowire.AppendTag(b, 4, protowire.BytesType)
		b = protowire.AppendBytes(b, t)
	}
	if m.loss != nil {
		b = protowire.AppendTag(b, 5, protowire.Fixed64Type)
		b = protowire.AppendFixed64(b, math.Float64bits(*m.loss))
	}
	return b
}

// fields walks the top-level fields of a message, calling fn with each field's number,
// wire type and raw value (varint/fixed values re-encoded as their number in v).
func fields(b []byte, fn func(num protowire.Number, typ protowire.Type, v uint64, raw []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return corruptf("protobuf tag: %v", protowire.ParseError(n))
		}
		b = b[n:]
		var v uint64
		var raw []byte
		switch typ {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(b)
		case protowire.Fixed64Type:
			v, n = protowire.ConsumeFixed64(b)
		case protowire.Fixed32Type:
			var v32 uint32
			v32, n = protowire.ConsumeFixed32(b)
			v = uint64(v32)
		case protowire.BytesType:
			raw, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return corruptf("protobuf field %d: %v", num, protowire.ParseError(n))
		}
		b = b[n:]
		if err := fn(num, typ, v, raw); err != nil {
			return err
		}
	}
	return nil
}

// varints appends a repeated varint field's values, packed (raw) or not (v).
func varints(dst []uint64, typ protowire.Type, v uint64, raw []byte) ([]uint64, error) {
	if typ == protowire.VarintType {
		return append(dst, v), nil
	}
	if typ != protowire.BytesType {
		return nil, corruptf("repeated integer with wire type %d", typ)
	}
	for len(raw) > 0 {
		x, n := protowire.ConsumeVarint(raw)
		if n < 0 {
			return nil, corruptf("packed varint: %v", protowire.ParseError(n))
		}
		dst = append(dst, x)
		raw = raw[n:]
	}
	return dst, nil
}

func unmarshalIVF(b []byte) (*ivfMessage, error) {
	m := &ivfMessage{}
	var offsets, lengths []uint64
	var legacy []float32
	err := fields(b, func(num protowire.Number, typ protowire.Type, v uint64, raw []byte) error {
		var err error
		switch num {
		case 1: // deprecated repeated float centroids
			switch typ {
			case protowire.Fixed32Type:
				legacy = append(legacy, math.Float32frombits(uint32(v)))
			case protowire.BytesType:
				if len(raw)%4 != 0 {
					return corruptf("IVF centroids: %d bytes", len(raw))
				}
				for i := 0; i < len(raw); i += 4 {
					legacy = append(legacy, math.Float32frombits(binary.LittleEndian.Uint32(raw[i:])))
				}
			default:
				return corruptf("IVF centroids with wire type %d", typ)
			}
		case 2:
			offsets, err = varints(offsets, typ, v, raw)
		case 3:
			lengths, err = varints(lengths, typ, v, raw)
		case 4:
			if typ != protowire.BytesType {
				return corruptf("IVF centroids_tensor with wire type %d", typ)
			}
			err = m.unmarshalTensor(raw)
		case 5:
			if typ != protowire.Fixed64Type {
				return corruptf("IVF loss with wire type %d", typ)
			}
			l := math.Float64frombits(v)
			m.loss = &l
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	m.offsets = offsets
	for _, l := range lengths {
		if l > math.MaxUint32 {
			return nil, corruptf("IVF partition length %d", l)
		}
		m.lengths = append(m.lengths, uint32(l))
	}
	if m.shape == nil && len(legacy) > 0 {
		return nil, fmt.Errorf("%w: IVF with legacy centroids (no centroids_tensor)", ErrUnsupported)
	}
	return m, nil
}

func (m *ivfMessage) unmarshalTensor(b []byte) error {
	dtype := uint64(0)
	var shape []uint64
	var data []byte
	err := fields(b, func(num protowire.Number, typ protowire.Type, v uint64, raw []byte) error {
		var err error
		switch num {
		case 1:
			dtype = v
		case 2:
			shape, err = varints(shape, typ, v, raw)
		case 3:
			data = raw
		}
		return err
	})
	if err != nil {
		return err
	}
	if dtype != tensorFloat32 {
		return fmt.Errorf("%w: centroids of tensor data type %d (only FLOAT32)", ErrUnsupported, dtype)
	}
	if len(shape) != 2 {
		return corruptf("centroids tensor of shape %v, want [partitions, dim]", shape)
	}
	if shape[0] > math.MaxUint32 || shape[1] > math.MaxUint32 || shape[1] == 0 {
		return corruptf("centroids tensor of shape %v", shape)
	}
	if uint64(len(data)) != 4*shape[0]*shape[1] {
		return corruptf("centroids tensor of shape %v holds %d bytes", shape, len(data))
	}
	m.shape = []uint32{uint32(shape[0]), uint32(shape[1])}
	m.centroids = make([]float32, len(data)/4)
	for i := range m.centroids {
		m.centroids[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
	}
	return nil
}

// Details is what lancectx reads of a VectorIndexDetails message.
type Details struct {
	Metric Metric
	// Compression is "flat", "pq", "sq", "rq" or "" (not recorded: older Lance).
	Compression string
	// Partitions is target_num_partitions when recorded.
	Partitions uint32
}

// MarshalDetails encodes the VectorIndexDetails of an IVF_FLAT index with metric m and
// the partition count asked for.
func MarshalDetails(m Metric, partitions int) []byte {
	var b []byte
	if m != L2 {
		b = protowire.AppendTag(b, 1, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(m))
	}
	b = protowire.AppendTag(b, 8, protowire.BytesType) // flat {}
	b = protowire.AppendBytes(b, nil)
	if partitions > 0 && partitions <= math.MaxUint32 {
		b = protowire.AppendTag(b, 10, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(partitions))
	}
	return b
}

// UnmarshalDetails decodes a VectorIndexDetails message.
func UnmarshalDetails(b []byte) (Details, error) {
	var d Details
	err := fields(b, func(num protowire.Number, typ protowire.Type, v uint64, raw []byte) error {
		switch num {
		case 1:
			if v > 3 {
				return corruptf("metric type %d", v)
			}
			d.Metric = Metric(v)
		case 4:
			d.Compression = "pq"
		case 5:
			d.Compression = "sq"
		case 6:
			d.Compression = "rq"
		case 8:
			d.Compression = "flat"
		case 10:
			d.Partitions = uint32(v)
		}
		return nil
	})
	return d, err
}
