package file

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	pb "github.com/lancectx/lancectx/lance/format/encodings21pb"
	"github.com/lancectx/lancectx/lance/format/file2pb"
	"github.com/lancectx/lancectx/lance/format/filepb"
)

// w21Layouts maps a leaf column (dotted field path, list items included, e.g.
// "tokens.item") to a description of each of its pages: "mini_block/<values>",
// "full_zip/<values>" or "constant", where <values> names the page's outermost value
// compression ("dictionary" for dictionary pages).
type w21Layouts map[string][]string

func (l w21Layouts) has(col, want string) bool { return slices.Contains(l[col], want) }

// w21Inspect parses the metadata of a 2.1 file (footer, schema, column metadata, page
// layouts) with the raw protobufs, independently of the writer.
func w21Inspect(t testing.TB, b []byte) w21Layouts {
	t.Helper()
	if len(b) < footerSize || string(b[len(b)-4:]) != magic {
		t.Fatal("not a Lance file")
	}
	ft := b[len(b)-footerSize:]
	if maj, min := binary.LittleEndian.Uint16(ft[32:]), binary.LittleEndian.Uint16(ft[34:]); maj != 2 || min != 1 {
		t.Fatalf("footer version %d.%d, want 2.1", maj, min)
	}
	cmo := binary.LittleEndian.Uint64(ft[8:])
	gbo := binary.LittleEndian.Uint64(ft[16:])
	ncols := int(binary.LittleEndian.Uint32(ft[28:]))
	gpos, glen := binary.LittleEndian.Uint64(b[gbo:]), binary.LittleEndian.Uint64(b[gbo+8:])
	if gpos%64 != 0 {
		t.Fatalf("global buffer 0 at %d, not 64-byte aligned", gpos)
	}
	var fd filepb.FileDescriptor
	if err := proto.Unmarshal(b[gpos:gpos+glen], &fd); err != nil {
		t.Fatal(err)
	}
	// Leaf paths in pre-order.
	fields := fd.GetSchema().GetFields()
	byID := map[int32]*filepb.Field{}
	hasChild := map[int32]bool{}
	for _, f := range fields {
		byID[f.GetId()] = f
		hasChild[f.GetParentId()] = true
	}
	var leaves []string
	for _, f := range fields {
		if hasChild[f.GetId()] {
			continue
		}
		path := []string{f.GetName()}
		for p := f.GetParentId(); p >= 0; p = byID[p].GetParentId() {
			path = append([]string{byID[p].GetName()}, path...)
		}
		leaves = append(leaves, strings.Join(path, "."))
	}
	if len(leaves) != ncols {
		t.Fatalf("%d leaf fields, %d columns", len(leaves), ncols)
	}
	out := w21Layouts{}
	for c := 0; c < ncols; c++ {
		pos := binary.LittleEndian.Uint64(b[cmo+16*uint64(c):])
		n := binary.LittleEndian.Uint64(b[cmo+16*uint64(c)+8:])
		var cm file2pb.ColumnMetadata
		if err := proto.Unmarshal(b[pos:pos+n], &cm); err != nil {
			t.Fatal(err)
		}
		for _, p := range cm.GetPages() {
			for _, off := range p.GetBufferOffsets() {
				if off%64 != 0 {
					t.Fatalf("column %d: page buffer at %d, not 64-byte aligned", c, off)
				}
			}
			var a anypb.Any
			if err := proto.Unmarshal(p.GetEncoding().GetDirect().GetEncoding(), &a); err != nil {
				t.Fatal(err)
			}
			if a.GetTypeUrl() != w21PageLayoutURL {
				t.Fatalf("page encoding type %q", a.GetTypeUrl())
			}
			var pl pb.PageLayout
			if err := proto.Unmarshal(a.GetValue(), &pl); err != nil {
				t.Fatal(err)
			}
			out[leaves[c]] = append(out[leaves[c]], w21DescribeLayout(&pl))
		}
	}
	return out
}

func w21CompressionName(e *pb.CompressiveEncoding) string {
	if e == nil || e.GetCompression() == nil {
		return "none"
	}
	return string(e.ProtoReflect().WhichOneof(e.ProtoReflect().Descriptor().Oneofs().ByName("compression")).Name())
}

func w21DescribeLayout(pl *pb.PageLayout) string {
	switch l := pl.GetLayout().(type) {
	case *pb.PageLayout_MiniBlockLayout:
		if l.MiniBlockLayout.GetDictionary() != nil {
			return "mini_block/dictionary"
		}
		return "mini_block/" + w21CompressionName(l.MiniBlockLayout.GetValueCompression())
	case *pb.PageLayout_FullZipLayout:
		return "full_zip/" + w21CompressionName(l.FullZipLayout.GetValueCompression())
	case *pb.PageLayout_ConstantLayout:
		return "constant"
	}
	return fmt.Sprintf("%T", pl.GetLayout())
}
