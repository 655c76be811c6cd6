package file

import (
	pb "github.com/lancectx/lancectx/lance/format/encodingspb"
)

// Constructors for the 2.0 encoding trees the writer emits (see the package comment).

func encFlat(bits uint64, buf uint32) *pb.ArrayEncoding {
	return &pb.ArrayEncoding{ArrayEncoding: &pb.ArrayEncoding_Flat{Flat: &pb.Flat{
		BitsPerValue: bits,
		Buffer:       &pb.Buffer{BufferIndex: buf, BufferType: pb.Buffer_page},
	}}}
}

func encNoNulls(values *pb.ArrayEncoding) *pb.ArrayEncoding {
	return &pb.ArrayEncoding{ArrayEncoding: &pb.ArrayEncoding_Nullable{Nullable: &pb.Nullable{
		Nullability: &pb.Nullable_NoNulls{NoNulls: &pb.Nullable_NoNull{Values: values}},
	}}}
}

func encSomeNulls(validity, values *pb.ArrayEncoding) *pb.ArrayEncoding {
	return &pb.ArrayEncoding{ArrayEncoding: &pb.ArrayEncoding_Nullable{Nullable: &pb.Nullable{
		Nullability: &pb.Nullable_SomeNulls{SomeNulls: &pb.Nullable_SomeNull{Validity: validity, Values: values}},
	}}}
}

func encAllNulls() *pb.ArrayEncoding {
	return &pb.ArrayEncoding{ArrayEncoding: &pb.ArrayEncoding_Nullable{Nullable: &pb.Nullable{
		Nullability: &pb.Nullable_AllNulls{AllNulls: &pb.Nullable_AllNull{}},
	}}}
}

func encFSL(dim uint32, items *pb.ArrayEncoding) *pb.ArrayEncoding {
	return &pb.ArrayEncoding{ArrayEncoding: &pb.ArrayEncoding_FixedSizeList{FixedSizeList: &pb.FixedSizeList{
		Dimension: dim, Items: items,
	}}}
}

func encBinary(indices, bytes *pb.ArrayEncoding, adj uint64) *pb.ArrayEncoding {
	return &pb.ArrayEncoding{ArrayEncoding: &pb.ArrayEncoding_Binary{Binary: &pb.Binary{
		Indices: indices, Bytes: bytes, NullAdjustment: adj,
	}}}
}

func encList(offsets *pb.ArrayEncoding, adj, numItems uint64) *pb.ArrayEncoding {
	return &pb.ArrayEncoding{ArrayEncoding: &pb.ArrayEncoding_List{List: &pb.List{
		Offsets: offsets, NullOffsetAdjustment: adj, NumItems: numItems,
	}}}
}

func encDictionary(indices, items *pb.ArrayEncoding, k uint32) *pb.ArrayEncoding {
	return &pb.ArrayEncoding{ArrayEncoding: &pb.ArrayEncoding_Dictionary{Dictionary: &pb.Dictionary{
		Indices: indices, Items: items, NumDictionaryItems: k,
	}}}
}

func encStruct() *pb.ArrayEncoding {
	return &pb.ArrayEncoding{ArrayEncoding: &pb.ArrayEncoding_Struct{Struct: &pb.SimpleStruct{}}}
}

// encodingName names the top of an encoding tree for error messages.
func encodingName(e *pb.ArrayEncoding) string {
	switch e.GetArrayEncoding().(type) {
	case *pb.ArrayEncoding_Flat:
		return "flat"
	case *pb.ArrayEncoding_Nullable:
		return "nullable"
	case *pb.ArrayEncoding_FixedSizeList:
		return "fixed_size_list"
	case *pb.ArrayEncoding_List:
		return "list"
	case *pb.ArrayEncoding_Struct:
		return "struct"
	case *pb.ArrayEncoding_Binary:
		return "binary"
	case *pb.ArrayEncoding_Dictionary:
		return "dictionary"
	case *pb.ArrayEncoding_Fsst:
		return "fsst"
	case *pb.ArrayEncoding_PackedStruct:
		return "packed_struct"
	case *pb.ArrayEncoding_Bitpacked:
		return "bitpacked"
	case *pb.ArrayEncoding_FixedSizeBinary:
		return "fixed_size_binary"
	case *pb.ArrayEncoding_BitpackedForNonNeg:
		return "bitpacked_for_non_neg"
	case *pb.ArrayEncoding_Constant:
		return "constant"
	case *pb.ArrayEncoding_InlineBitpacking:
		return "inline_bitpacking"
	case *pb.ArrayEncoding_OutOfLineBitpacking:
		return "out_of_line_bitpacking"
	case *pb.ArrayEncoding_Variable:
		return "variable"
	case *pb.ArrayEncoding_PackedStructFixedWidthMiniBlock:
		return "packed_struct_fixed_width_mini_block"
	case *pb.ArrayEncoding_Block:
		return "block"
	case *pb.ArrayEncoding_Rle:
		return "rle"
	case *pb.ArrayEncoding_GeneralMiniBlock:
		return "general_mini_block"
	case *pb.ArrayEncoding_ByteStreamSplit:
		return "byte_stream_split"
	case nil:
		return "empty"
	}
	return "unknown"
}
