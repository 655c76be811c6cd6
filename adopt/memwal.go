package adopt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"sort"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
)

// The reference system's write-ahead log is Lance's MemWAL, below each dataset:
//
//	_mem_wal/{shard uuid}/manifest/{bit-reversed version}.binpb   shard manifest versions (protobuf)
//	_mem_wal/{shard uuid}/wal/{bit-reversed position}.arrow       WAL entries (Arrow IPC streams)
//	_mem_wal/{shard uuid}/{random8}_gen_{n}/                      flushed generations (Lance datasets)
//
// and the base table's system index __lance_mem_wal, whose details record per shard the
// highest generation merged into the base table. Field numbers are those of lance's
// table.proto (ShardManifest, FlushedGeneration, MemWalIndexDetails, MergedGeneration).
const (
	memWALDir       = "_mem_wal/"
	memWALIndexName = "__lance_mem_wal"
)

// ErrCorruptMemWAL: a MemWAL object of the reference system does not decode.
var ErrCorruptMemWAL = errors.New("adopt: corrupt MemWAL object")

// ShardManifest is what adoption needs of a reference MemWAL shard manifest.
type ShardManifest struct {
	ShardID string // from the message (the folder name is authoritative; they should agree)
	Version uint64
	// WriterEpoch of the last writer that claimed the shard.
	WriterEpoch uint64
	// ReplayAfter is the last WAL entry position covered by a flushed generation: later
	// entries hold rows that are durable but in no generation.
	ReplayAfter uint64
	// CurrentGeneration is the number the next flush takes.
	CurrentGeneration uint64
	Generations       []FlushedGeneration
}

// FlushedGeneration is a flushed (sealed) generation listed in a shard manifest.
type FlushedGeneration struct {
	Generation uint64
	// Path is the generation's folder, relative to the shard folder.
	Path string
}

// DecodeShardManifest decodes a ShardManifest protobuf. Unknown fields are skipped, so
// later versions of the message (more fields) decode too.
func DecodeShardManifest(b []byte) (*ShardManifest, error) {
	m := &ShardManifest{}
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error {
		switch num {
		case 1:
			return want(typ, protowire.VarintType, "version", func() { m.Version = n })
		case 2:
			return want(typ, protowire.VarintType, "writer_epoch", func() { m.WriterEpoch = n })
		case 3:
			return want(typ, protowire.VarintType, "replay_after_wal_entry_position", func() { m.ReplayAfter = n })
		case 6:
			return want(typ, protowire.VarintType, "current_generation", func() { m.CurrentGeneration = n })
		case 8:
			if typ != protowire.BytesType {
				return fmt.Errorf("%w: flushed_generations has wire type %d", ErrCorruptMemWAL, typ)
			}
			g, err := decodeFlushedGeneration(v)
			if err != nil {
				return err
			}
			m.Generations = append(m.Generations, g)
		case 11:
			if typ != protowire.BytesType {
				return fmt.Errorf("%w: shard_id has wire type %d", ErrCorruptMemWAL, typ)
			}
			id, err := decodeUUID(v)
			if err != nil {
				return err
			}
			m.ShardID = id
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

func decodeFlushedGeneration(b []byte) (FlushedGeneration, error) {
	var g FlushedGeneration
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error {
		switch num {
		case 1:
			return want(typ, protowire.VarintType, "generation", func() { g.Generation = n })
		case 2:
			return want(typ, protowire.BytesType, "path", func() { g.Path = string(v) })
		}
		return nil
	})
	return g, err
}

// decodeUUID decodes lance.table.UUID {bytes uuid = 1} (16 bytes) to its text form.
func decodeUUID(b []byte) (string, error) {
	var raw []byte
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if num == 1 {
			return want(typ, protowire.BytesType, "uuid", func() { raw = v })
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	id, err := uuid.FromBytes(raw)
	if err != nil {
		return "", fmt.Errorf("%w: uuid of %d bytes", ErrCorruptMemWAL, len(raw))
	}
	return id.String(), nil
}

// DecodeMergedGenerations decodes the merged_generations of a MemWalIndexDetails
// protobuf: per shard id, the highest generation merged into the base table.
func DecodeMergedGenerations(b []byte) (map[string]uint64, error) {
	out := map[string]uint64{}
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if num != 9 {
			return nil
		}
		if typ != protowire.BytesType {
			return fmt.Errorf("%w: merged_generations has wire type %d", ErrCorruptMemWAL, typ)
		}
		var shard string
		var gen uint64
		err := eachField(v, func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error {
			switch num {
			case 1:
				if typ != protowire.BytesType {
					return fmt.Errorf("%w: shard_id has wire type %d", ErrCorruptMemWAL, typ)
				}
				id, err := decodeUUID(v)
				shard = id
				return err
			case 2:
				return want(typ, protowire.VarintType, "generation", func() { gen = n })
			}
			return nil
		})
		if err != nil {
			return err
		}
		if shard == "" {
			return fmt.Errorf("%w: merged generation without a shard id", ErrCorruptMemWAL)
		}
		out[shard] = max(out[shard], gen)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// eachField calls fn for every field of a protobuf message: its number, wire type, and
// the payload (bytes for length-delimited fields, the value for varints). Groups and
// fixed-width fields are skipped. Truncated or malformed input is ErrCorruptMemWAL.
func eachField(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: bad field tag: %v", ErrCorruptMemWAL, protowire.ParseError(n))
		}
		b = b[n:]
		switch typ {
		case protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return fmt.Errorf("%w: field %d: %v", ErrCorruptMemWAL, num, protowire.ParseError(n))
			}
			b = b[n:]
			if err := fn(num, typ, nil, v); err != nil {
				return err
			}
		case protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return fmt.Errorf("%w: field %d: %v", ErrCorruptMemWAL, num, protowire.ParseError(n))
			}
			b = b[n:]
			if err := fn(num, typ, v, 0); err != nil {
				return err
			}
		default:
			n := protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return fmt.Errorf("%w: field %d: %v", ErrCorruptMemWAL, num, protowire.ParseError(n))
			}
			b = b[n:]
			if err := fn(num, typ, nil, 0); err != nil {
				return err
			}
		}
	}
	return nil
}

func want(have, want protowire.Type, field string, set func()) error {
	if have != want {
		return fmt.Errorf("%w: %s has wire type %d", ErrCorruptMemWAL, field, have)
	}
	set()
	return nil
}

// bitReversedName is the MemWAL file name of a version or position: the bits of n
// reversed, as 64 binary digits, then ".ext".
func bitReversedName(n uint64, ext string) string {
	return fmt.Sprintf("%064b.%s", bits.Reverse64(n), ext)
}

// parseBitReversedName returns the number a MemWAL file name encodes (ok false: not
// such a name).
func parseBitReversedName(name, ext string) (uint64, bool) {
	stem, ok := strings.CutSuffix(name, "."+ext)
	if !ok || len(stem) != 64 || strings.Trim(stem, "01") != "" {
		return 0, false
	}
	v, err := strconv.ParseUint(stem, 2, 64)
	if err != nil {
		return 0, false
	}
	return bits.Reverse64(v), true
}

// mergedWatermarks reads the reference's per-shard merge watermarks from the base
// table's __lance_mem_wal index (empty when the table has none).
func mergedWatermarks(base *lance.Dataset) (map[string]uint64, error) {
	out := map[string]uint64{}
	for _, idx := range base.IndexMetadata() {
		if idx.GetName() != memWALIndexName || idx.GetIndexDetails() == nil {
			continue
		}
		m, err := DecodeMergedGenerations(idx.GetIndexDetails().GetValue())
		if err != nil {
			return nil, fmt.Errorf("the %s index of version %d: %w", memWALIndexName, base.Version(), err)
		}
		for k, v := range m {
			out[k] = max(out[k], v)
		}
	}
	return out, nil
}

// shardState is one shard folder of a dataset's MemWAL as adoption found it.
type shardState struct {
	ID string
	// Manifest is the latest shard manifest (nil: the folder has none).
	Manifest *ShardManifest
	// Pending are the generations above the watermark, oldest first.
	Pending []FlushedGeneration
	// Unflushed are WAL entry positions past the manifest's replay cursor that hold rows.
	Unflushed []uint64
}

// memWAL is a dataset's MemWAL as adoption found it.
type memWAL struct {
	Shards []shardState
	// Present: _mem_wal/ holds something (shard folders or stray objects).
	Present bool
}

func (m *memWAL) pending() int {
	n := 0
	for _, s := range m.Shards {
		n += len(s.Pending)
	}
	return n
}

// versions maps each shard to its latest manifest version (0: none): two reads of a
// MemWAL with equal versions saw the same generations.
func (m *memWAL) versions() map[string]uint64 {
	out := make(map[string]uint64, len(m.Shards))
	for _, s := range m.Shards {
		if s.Manifest != nil {
			out[s.ID] = s.Manifest.Version
		} else {
			out[s.ID] = 0
		}
	}
	return out
}

// readMemWAL lists the MemWAL of the dataset at st: every shard's latest manifest, its
// generations above watermark[shard], and WAL entries no generation covers. A dataset
// without _mem_wal/ has an empty one.
func readMemWAL(ctx context.Context, st objstore.Store, watermark map[string]uint64) (*memWAL, error) {
	out := &memWAL{}
	var shards []string
	// One listing of _mem_wal/ (not recursive: a generation is a whole dataset).
	opts := objstore.ListOptions{Prefix: memWALDir, Delimiter: "/"}
	for {
		page, err := st.List(ctx, opts)
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", memWALDir, err)
		}
		if len(page.Objects) > 0 || len(page.CommonPrefixes) > 0 {
			out.Present = true
		}
		for _, p := range page.CommonPrefixes {
			name := strings.TrimSuffix(strings.TrimPrefix(p, memWALDir), "/")
			if _, err := uuid.Parse(name); err == nil {
				shards = append(shards, name)
			}
		}
		if page.NextStartAfter == "" {
			break
		}
		opts.StartAfter = page.NextStartAfter
	}
	for _, shard := range shards {
		s, err := readShard(ctx, st, shard, watermark[shard])
		if err != nil {
			return nil, fmt.Errorf("shard %s: %w", shard, err)
		}
		out.Shards = append(out.Shards, s)
	}
	return out, nil
}

func readShard(ctx context.Context, st objstore.Store, shard string, watermark uint64) (shardState, error) {
	s := shardState{ID: shard}
	dir := memWALDir + shard + "/"
	var latest uint64
	var latestKey string
	err := objstore.Walk(ctx, st, objstore.ListOptions{Prefix: dir + "manifest/", Delimiter: "/"}, func(o objstore.ObjectInfo) error {
		if v, ok := parseBitReversedName(o.Key[len(dir+"manifest/"):], "binpb"); ok && v >= latest {
			latest, latestKey = v, o.Key
		}
		return nil
	})
	if err != nil {
		return s, fmt.Errorf("list manifests: %w", err)
	}
	var replayAfter uint64
	if latestKey != "" {
		buf, err := objstore.ReadAll(ctx, st, latestKey)
		if err != nil {
			return s, fmt.Errorf("read manifest version %d: %w", latest, err)
		}
		m, err := DecodeShardManifest(buf)
		if err != nil {
			return s, fmt.Errorf("manifest version %d: %w", latest, err)
		}
		if m.ShardID != "" && m.ShardID != shard {
			return s, fmt.Errorf("%w: manifest version %d names shard %s", ErrCorruptMemWAL, latest, m.ShardID)
		}
		s.Manifest = m
		replayAfter = m.ReplayAfter
		for _, g := range m.Generations {
			if g.Generation <= watermark {
				continue // merged into the base table before the drain that was to drop it
			}
			if !validGenPath(g.Path) {
				return s, fmt.Errorf("%w: generation %d has path %q", ErrCorruptMemWAL, g.Generation, g.Path)
			}
			s.Pending = append(s.Pending, g)
		}
		sort.Slice(s.Pending, func(i, j int) bool { return s.Pending[i].Generation < s.Pending[j].Generation })
	}
	err = objstore.Walk(ctx, st, objstore.ListOptions{Prefix: dir + "wal/", Delimiter: "/"}, func(o objstore.ObjectInfo) error {
		pos, ok := parseBitReversedName(o.Key[len(dir+"wal/"):], "arrow")
		if !ok || pos <= replayAfter {
			return nil
		}
		rows, err := entryHasRows(ctx, st, o.Key)
		if err != nil {
			return fmt.Errorf("WAL entry %d: %w", pos, err)
		}
		if rows {
			s.Unflushed = append(s.Unflushed, pos)
		}
		return nil
	})
	if err != nil {
		return s, err
	}
	sort.Slice(s.Unflushed, func(i, j int) bool { return s.Unflushed[i] < s.Unflushed[j] })
	return s, nil
}

// validGenPath accepts one folder name (what the reference's flush writes).
func validGenPath(p string) bool {
	return p != "" && p != "." && p != ".." && !strings.ContainsAny(p, "/\\") && objstore.ValidateKey(p) == nil
}

// entryHasRows tells whether a WAL entry (an Arrow IPC stream) holds a batch with rows:
// a fence sentinel holds none. The decoder is third-party code fed with bytes from
// storage, so a panic in it is turned into an error.
func entryHasRows(ctx context.Context, st objstore.Reader, key string) (has bool, err error) {
	rc, err := st.Get(ctx, key)
	if err != nil {
		return false, err
	}
	defer rc.Close()
	defer func() {
		if r := recover(); r != nil {
			has, err = false, fmt.Errorf("%w: Arrow IPC stream does not decode: %v", ErrCorruptMemWAL, r)
		}
	}()
	rdr, err := ipc.NewReader(io.LimitReader(rc, 1<<30))
	if err != nil {
		return false, fmt.Errorf("%w: Arrow IPC stream: %v", ErrCorruptMemWAL, err)
	}
	defer rdr.Release()
	for rdr.Next() {
		if rdr.RecordBatch().NumRows() > 0 {
			return true, nil
		}
	}
	if err := rdr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return false, fmt.Errorf("%w: Arrow IPC stream: %v", ErrCorruptMemWAL, err)
	}
	return false, nil
}

// walkPrefixes calls fn for every common prefix ("folder/") directly under prefix.
func walkPrefixes(ctx context.Context, st objstore.Reader, prefix string, fn func(string) error) error {
	opts := objstore.ListOptions{Prefix: prefix, Delimiter: "/"}
	for {
		page, err := st.List(ctx, opts)
		if err != nil {
			return err
		}
		for _, p := range page.CommonPrefixes {
			if err := fn(p); err != nil {
				return err
			}
		}
		if page.NextStartAfter == "" {
			return nil
		}
		opts.StartAfter = page.NextStartAfter
	}
}
