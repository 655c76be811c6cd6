package lance

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/lancectx/lancectx/lance/format/tablepb"
)

// Manifest file framing (reference/lance-format.md section 2.1):
//
//	[u32 LE len + IndexSection]   optional, manifest.index_section = its offset
//	[u32 LE len + Transaction]    optional, manifest.transaction_section = its offset
//	[u32 LE len + Manifest]       required, last section, starts at manifest_pos
//	[i64 LE manifest_pos][u16 major=0][u16 minor=2]["LANC"]
const (
	manifestFooterLen = 16
	manifestMajor     = 0
	manifestMinor     = 2
	// maxManifestBytes bounds what a reader will accept; a manifest of a dataset with a
	// million fragments is well below it.
	maxManifestBytes = 1 << 30
)

var lanceMagic = []byte("LANC")

// ErrCorrupt marks bytes that are not a valid Lance manifest, transaction or deletion file.
var ErrCorrupt = errors.New("lance: corrupt")

// CorruptionError says which object is corrupt and why.
type CorruptionError struct {
	Path   string
	Reason string
}

func (e *CorruptionError) Error() string {
	if e.Path == "" {
		return "lance: corrupt: " + e.Reason
	}
	return fmt.Sprintf("lance: corrupt %s: %s", e.Path, e.Reason)
}

// Unwrap lets errors.Is(err, ErrCorrupt) match.
func (e *CorruptionError) Unwrap() error { return ErrCorrupt }

func corruptf(path, format string, args ...any) error {
	return &CorruptionError{Path: path, Reason: fmt.Sprintf(format, args...)}
}

// manifestFile is the decoded content of one _versions/*.manifest object.
type manifestFile struct {
	Manifest *tablepb.Manifest
	// Transaction is the inline transaction section, nil when the writer stored none.
	Transaction *tablepb.Transaction
	// Indices is the index section, nil when the dataset has no indices.
	Indices *tablepb.IndexSection
}

// decodeManifest parses a whole manifest file. path is only used in errors.
func decodeManifest(path string, buf []byte) (*manifestFile, error) {
	if len(buf) < manifestFooterLen+4 {
		return nil, corruptf(path, "manifest is %d bytes, too short", len(buf))
	}
	if len(buf) > maxManifestBytes {
		return nil, corruptf(path, "manifest is %d bytes, over the %d limit", len(buf), maxManifestBytes)
	}
	foot := buf[len(buf)-manifestFooterLen:]
	if string(foot[12:]) != string(lanceMagic) {
		return nil, corruptf(path, "missing LANC magic")
	}
	pos := int64(binary.LittleEndian.Uint64(foot[0:8]))
	end := int64(len(buf) - manifestFooterLen)
	if pos < 0 || pos+4 > end {
		return nil, corruptf(path, "manifest position %d outside file of %d bytes", pos, len(buf))
	}
	n := int64(binary.LittleEndian.Uint32(buf[pos : pos+4]))
	if pos+4+n != end {
		return nil, corruptf(path, "manifest length %d does not match its section (%d bytes)", n, end-pos-4)
	}
	m := &tablepb.Manifest{}
	if err := proto.Unmarshal(buf[pos+4:end], m); err != nil {
		return nil, corruptf(path, "decode manifest: %v", err)
	}
	mf := &manifestFile{Manifest: m}
	section := func(what string, off uint64, msg proto.Message) error {
		if off >= uint64(pos) || uint64(pos)-off < 4 {
			return corruptf(path, "%s offset %d outside file", what, off)
		}
		l := uint64(binary.LittleEndian.Uint32(buf[off : off+4]))
		if l > uint64(pos)-off-4 {
			return corruptf(path, "%s of %d bytes at %d overruns the manifest", what, l, off)
		}
		if err := proto.Unmarshal(buf[off+4:off+4+l], msg); err != nil {
			return corruptf(path, "decode %s: %v", what, err)
		}
		return nil
	}
	if m.TransactionSection != nil {
		mf.Transaction = &tablepb.Transaction{}
		if err := section("transaction section", m.GetTransactionSection(), mf.Transaction); err != nil {
			return nil, err
		}
	}
	if m.IndexSection != nil {
		mf.Indices = &tablepb.IndexSection{}
		if err := section("index section", m.GetIndexSection(), mf.Indices); err != nil {
			return nil, err
		}
	}
	return mf, nil
}

// encodeManifest lays out a manifest file the way Lance does: index section, then the
// transaction, then the manifest. It returns the bytes and the manifest as written (with
// the section offsets set; mf.Manifest itself is modified to carry them).
func encodeManifest(mf *manifestFile) ([]byte, *tablepb.Manifest, error) {
	m := mf.Manifest
	m.IndexSection, m.TransactionSection = nil, nil
	var buf []byte
	appendSection := func(msg proto.Message) (uint64, error) {
		b, err := proto.Marshal(msg)
		if err != nil {
			return 0, err
		}
		if len(b) > math.MaxUint32 {
			return 0, fmt.Errorf("lance: section of %d bytes is too large", len(b))
		}
		off := uint64(len(buf))
		buf = binary.LittleEndian.AppendUint32(buf, uint32(len(b)))
		buf = append(buf, b...)
		return off, nil
	}
	if mf.Indices != nil && len(mf.Indices.Indices) > 0 {
		off, err := appendSection(mf.Indices)
		if err != nil {
			return nil, nil, fmt.Errorf("encode index section: %w", err)
		}
		m.IndexSection = proto.Uint64(off)
	}
	if mf.Transaction != nil {
		off, err := appendSection(mf.Transaction)
		if err != nil {
			return nil, nil, fmt.Errorf("encode transaction: %w", err)
		}
		m.TransactionSection = proto.Uint64(off)
	}
	pos := uint64(len(buf))
	if _, err := appendSection(m); err != nil {
		return nil, nil, fmt.Errorf("encode manifest: %w", err)
	}
	buf = binary.LittleEndian.AppendUint64(buf, pos)
	buf = binary.LittleEndian.AppendUint16(buf, manifestMajor)
	buf = binary.LittleEndian.AppendUint16(buf, manifestMinor)
	buf = append(buf, lanceMagic...)
	return buf, m, nil
}

// Directory and file names inside a dataset (reference/lance-format.md section 1).
const (
	versionsDir     = "_versions/"
	transactionsDir = "_transactions/"
	deletionsDir    = "_deletions/"
	dataDir         = "data/"
	indicesDir      = "_indices/"
	tagsDir         = "_refs/tags/"
	hintKey         = versionsDir + "latest_version_hint.json"
	manifestSuffix  = ".manifest"
	v2NameLen       = 20 + len(manifestSuffix)
)

// manifestKeyV2 is the V2 (inverted, zero-padded) manifest name: newest sorts first.
func manifestKeyV2(version uint64) string {
	return fmt.Sprintf("%s%020d%s", versionsDir, math.MaxUint64-version, manifestSuffix)
}

// manifestKeyV1 is the legacy V1 name.
func manifestKeyV1(version uint64) string {
	return versionsDir + strconv.FormatUint(version, 10) + manifestSuffix
}

// namingScheme tells V1 from V2 manifest names.
type namingScheme int

const (
	namingUnknown namingScheme = iota
	namingV1
	namingV2
)

// parseManifestName parses a file name inside _versions/ (no directory). ok is false for
// anything that is not a committed manifest of the main branch: the hint, temp files,
// detached versions ("d..."), and junk.
func parseManifestName(name string) (version uint64, scheme namingScheme, ok bool) {
	if !strings.HasSuffix(name, manifestSuffix) || strings.HasPrefix(name, "d") || strings.HasPrefix(name, ".") {
		return 0, namingUnknown, false
	}
	digits := strings.TrimSuffix(name, manifestSuffix)
	if digits == "" || strings.IndexFunc(digits, func(r rune) bool { return r < '0' || r > '9' }) >= 0 {
		return 0, namingUnknown, false
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	if err != nil {
		return 0, namingUnknown, false
	}
	if len(name) == v2NameLen {
		if n == math.MaxUint64 {
			return 0, namingUnknown, false
		}
		return math.MaxUint64 - n, namingV2, true
	}
	if n == 0 {
		return 0, namingUnknown, false
	}
	return n, namingV1, true
}
