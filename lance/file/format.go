package file

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/lancectx/lancectx/lance/format/encodingspb"
)

const (
	footerSize = 40
	magic      = "LANC"
	// alignment of every page and global buffer start.
	alignment = 64
	// padByte is what Lance pads buffers with ('H').
	padByte = 0x48

	// DefaultPageBytes is the per-column buffered size at which the writer flushes a
	// page, the same 8 MiB Lance's 2.0 writer uses.
	DefaultPageBytes = 8 << 20

	// DefaultPageRows is the row count after which the writer starts new pages in every
	// column (WriterOptions.PageRows). Without it a 4-byte column fills its 8 MiB only
	// every 2M rows: such columns became one page per file, and the writer's memory grew
	// with the file until every column buffer was full.
	//
	// Measured on the 1M-row rollout benchmark (bench/): 16Ki..128Ki rows per page scan
	// within noise of each other once the reader keeps pages between batches (with
	// lancectx and with LanceDB), and a streaming write's peak RSS stays within 15%
	// from 100k to 1M rows for all of them (1M rows: 95 MiB at 16Ki, 112 at 64Ki, 123
	// at 128Ki; the wide columns' PageBytes pages dominate). 64Ki rows makes a 4-byte
	// column's page 256 KiB: the reader fetches a page when a batch first reaches it,
	// without read-ahead, so on an object store every page is a round trip and 4x
	// fewer of them beat the ~15 MiB saved at 16Ki. Smaller pages would help random
	// access (Take fetches whole pages); LanceDB's own 2.0 writer makes ~8Ki-row pages.
	DefaultPageRows = 65536

	// tailReadSize is how much Open reads from the end of the file in its first request;
	// small files' metadata fits and needs no second request.
	tailReadSize = 64 << 10
	// maxMetadataBytes bounds the metadata region Open is willing to read.
	maxMetadataBytes = 512 << 20

	arrayEncodingURL  = "/lance.encodings.ArrayEncoding"
	columnEncodingURL = "/lance.encodings.ColumnEncoding"
	pageLayoutURL     = "/lance.encodings21.PageLayout"
)

// ErrCorrupt is wrapped by every error caused by bytes that do not form a valid file.
var ErrCorrupt = errors.New("lance file: corrupt file")

// ErrUnsupportedVersion is wrapped when the footer names a format version other than
// 2.0, 2.1 or 2.2.
var ErrUnsupportedVersion = errors.New("lance file: unsupported format version")

// ErrUnsupportedEncoding is wrapped when a page or column uses an encoding this package
// does not decode (2.0 fsst, bitpacking and compressed buffers, blob columns, the 2.3
// sparse layout...), and when the Writer is given a field it cannot encode in the
// format asked for (maps, see CheckWritable); the message names it.
var ErrUnsupportedEncoding = errors.New("lance file: unsupported encoding")

// CorruptionError locates corrupt input: Offset is the file offset of the bad structure
// (-1 when unknown). It matches ErrCorrupt with errors.Is.
type CorruptionError struct {
	Offset int64
	Msg    string
}

func (e *CorruptionError) Error() string {
	if e.Offset >= 0 {
		return fmt.Sprintf("lance file: corrupt file at offset %d: %s", e.Offset, e.Msg)
	}
	return "lance file: corrupt file: " + e.Msg
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptionError) Is(target error) bool { return target == ErrCorrupt }

func corruptf(off int64, format string, args ...any) error {
	return &CorruptionError{Offset: off, Msg: fmt.Sprintf(format, args...)}
}

type versionError struct{ major, minor uint16 }

func (e *versionError) Error() string {
	if e.major == 0 && e.minor < 3 {
		return fmt.Sprintf("lance file: legacy format version 0.%d is not supported (lancectx reads 2.0, 2.1 and 2.2)", e.minor)
	}
	return fmt.Sprintf("lance file: format version %d.%d is not supported (lancectx reads 2.0, 2.1 and 2.2)", e.major, e.minor)
}

func (e *versionError) Unwrap() error { return ErrUnsupportedVersion }

// footer is the fixed 40-byte tail of every Lance v2 file.
type footer struct {
	columnMetaStart  uint64
	cmoTableStart    uint64
	gboTableStart    uint64
	numGlobalBuffers uint32
	numColumns       uint32
	major, minor     uint16
}

func (f *footer) marshal() []byte {
	b := make([]byte, footerSize)
	binary.LittleEndian.PutUint64(b[0:], f.columnMetaStart)
	binary.LittleEndian.PutUint64(b[8:], f.cmoTableStart)
	binary.LittleEndian.PutUint64(b[16:], f.gboTableStart)
	binary.LittleEndian.PutUint32(b[24:], f.numGlobalBuffers)
	binary.LittleEndian.PutUint32(b[28:], f.numColumns)
	binary.LittleEndian.PutUint16(b[32:], f.major)
	binary.LittleEndian.PutUint16(b[34:], f.minor)
	copy(b[36:], magic)
	return b
}

func parseFooter(b []byte, off int64) (footer, error) {
	if len(b) != footerSize {
		return footer{}, corruptf(off, "footer is %d bytes", len(b))
	}
	if string(b[36:]) != magic {
		return footer{}, corruptf(off+36, "missing LANC magic")
	}
	return footer{
		columnMetaStart:  binary.LittleEndian.Uint64(b[0:]),
		cmoTableStart:    binary.LittleEndian.Uint64(b[8:]),
		gboTableStart:    binary.LittleEndian.Uint64(b[16:]),
		numGlobalBuffers: binary.LittleEndian.Uint32(b[24:]),
		numColumns:       binary.LittleEndian.Uint32(b[28:]),
		major:            binary.LittleEndian.Uint16(b[32:]),
		minor:            binary.LittleEndian.Uint16(b[34:]),
	}, nil
}

// checkVersion accepts the two spellings of 2.0, (0,3) as written in footers and (2,0),
// and 2.1 and 2.2.
func checkVersion(major, minor uint16) error {
	if (major == 0 && minor == 3) || (major == 2 && minor <= 2) {
		return nil
	}
	return &versionError{major, minor}
}

// isV21 reports whether a footer version uses the 2.1 structural encodings.
func isV21(major, minor uint16) bool { return major == 2 && minor >= 1 }

// marshalAny wraps an encoding message the way Lance does: a google.protobuf.Any with
// the type URL "/lance.encodings.<Message>" (no type.googleapis.com host).
func marshalAny(url string, m proto.Message) ([]byte, error) {
	v, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("lance file: marshal %s: %w", url, err)
	}
	out, err := proto.MarshalOptions{Deterministic: true}.Marshal(&anypb.Any{TypeUrl: url, Value: v})
	if err != nil {
		return nil, fmt.Errorf("lance file: marshal Any: %w", err)
	}
	return out, nil
}

var columnEncodingValues = &encodingspb.ColumnEncoding{
	ColumnEncoding: &encodingspb.ColumnEncoding_Values{Values: &emptypb.Empty{}},
}

// typeURLMatches accepts Lance's "/pkg.Msg" and the canonical "type.googleapis.com/pkg.Msg".
func typeURLMatches(url, want string) bool {
	return strings.HasSuffix(url, want)
}
