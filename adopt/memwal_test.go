package adopt

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/protowire"
)

// Encoders of the reference's messages (lance table.proto field numbers), for tests.

func encUUID(s string) []byte {
	id := uuid.MustParse(s)
	return protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), id[:])
}

func encShardManifest(m ShardManifest) []byte {
	var b []byte
	v := func(num protowire.Number, x uint64) {
		b = protowire.AppendTag(b, num, protowire.VarintType)
		b = protowire.AppendVarint(b, x)
	}
	v(1, m.Version)
	v(2, m.WriterEpoch)
	v(3, m.ReplayAfter)
	v(4, 99) // wal_entry_position_last_seen: not used
	v(6, m.CurrentGeneration)
	for _, g := range m.Generations {
		var gb []byte
		gb = protowire.AppendTag(gb, 1, protowire.VarintType)
		gb = protowire.AppendVarint(gb, g.Generation)
		gb = protowire.AppendTag(gb, 2, protowire.BytesType)
		gb = protowire.AppendString(gb, g.Path)
		b = protowire.AppendTag(b, 8, protowire.BytesType)
		b = protowire.AppendBytes(b, gb)
	}
	v(10, 0)
	b = protowire.AppendTag(b, 11, protowire.BytesType)
	b = protowire.AppendBytes(b, encUUID(m.ShardID))
	// A field of a later version of the message (an enum status, say): skipped.
	v(12, 1)
	return b
}

func encMergedGenerations(m map[string]uint64) []byte {
	var b []byte
	b = protowire.AppendTag(b, 1, protowire.VarintType) // snapshot_ts_millis
	b = protowire.AppendVarint(b, 123)
	for shard, g := range m {
		var e []byte
		e = protowire.AppendTag(e, 1, protowire.BytesType)
		e = protowire.AppendBytes(e, encUUID(shard))
		e = protowire.AppendTag(e, 2, protowire.VarintType)
		e = protowire.AppendVarint(e, g)
		b = protowire.AppendTag(b, 9, protowire.BytesType)
		b = protowire.AppendBytes(b, e)
	}
	return b
}

func TestDecodeShardManifest(t *testing.T) {
	want := ShardManifest{ShardID: "c4118b9c-7f79-523d-9bad-381e42232c1d", Version: 7, WriterEpoch: 3, ReplayAfter: 41, CurrentGeneration: 12,
		Generations: []FlushedGeneration{{Generation: 10, Path: "a1b2c3d4_gen_10"}, {Generation: 11, Path: "0f0f0f0f_gen_11"}}}
	got, err := DecodeShardManifest(encShardManifest(want))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*got, want) {
		t.Errorf("decoded %+v, want %+v", *got, want)
	}
	// Every proper prefix is truncated somewhere a decoder must notice, or ends on a
	// field boundary; none may panic.
	full := encShardManifest(want)
	for i := range full {
		_, _ = DecodeShardManifest(full[:i])
	}
	bad := map[string][]byte{
		"version as bytes":       protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte("x")),
		"truncated varint":       {0x08, 0x80},
		"length past the end":    {0x42, 0x05, 0x08},
		"shard id of 3 bytes":    protowire.AppendBytes(protowire.AppendTag(nil, 11, protowire.BytesType), protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), []byte{1, 2, 3})),
		"generation as a varint": protowire.AppendVarint(protowire.AppendTag(nil, 8, protowire.VarintType), 4),
	}
	for name, b := range bad {
		if _, err := DecodeShardManifest(b); !errors.Is(err, ErrCorruptMemWAL) {
			t.Errorf("%s: err %v, want ErrCorruptMemWAL", name, err)
		}
	}
}

func TestDecodeMergedGenerations(t *testing.T) {
	want := map[string]uint64{"c4118b9c-7f79-523d-9bad-381e42232c1d": 5, "550e8400-e29b-41d4-a716-446655440000": 9}
	got, err := DecodeMergedGenerations(encMergedGenerations(want))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decoded %v, want %v", got, want)
	}
	noShard := protowire.AppendBytes(protowire.AppendTag(nil, 9, protowire.BytesType), protowire.AppendVarint(protowire.AppendTag(nil, 2, protowire.VarintType), 3))
	if _, err := DecodeMergedGenerations(noShard); !errors.Is(err, ErrCorruptMemWAL) {
		t.Errorf("a watermark without a shard: %v, want ErrCorruptMemWAL", err)
	}
}

func TestBitReversedNames(t *testing.T) {
	if got := bitReversedName(5, "binpb"); got != "1010000000000000000000000000000000000000000000000000000000000000.binpb" {
		t.Errorf("name of 5: %s", got)
	}
	for _, n := range []uint64{0, 1, 2, 5, 1000, 1<<63 + 7} {
		if got, ok := parseBitReversedName(bitReversedName(n, "arrow"), "arrow"); !ok || got != n {
			t.Errorf("round trip of %d: %d %v", n, got, ok)
		}
	}
	for _, s := range []string{"version_hint.json", "101.binpb", "1010000000000000000000000000000000000000000000000000000000000002.binpb",
		"1010000000000000000000000000000000000000000000000000000000000000.arrow"} {
		if _, ok := parseBitReversedName(s, "binpb"); ok {
			t.Errorf("%s parsed as a manifest name", s)
		}
	}
}

func FuzzDecodeShardManifest(f *testing.F) {
	f.Add(encShardManifest(ShardManifest{ShardID: "c4118b9c-7f79-523d-9bad-381e42232c1d", Version: 2, CurrentGeneration: 2,
		Generations: []FlushedGeneration{{Generation: 1, Path: "abcd0123_gen_1"}}}))
	f.Add([]byte{})
	f.Add([]byte{0x5a, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeShardManifest(b)
		if err != nil {
			if !errors.Is(err, ErrCorruptMemWAL) {
				t.Fatalf("error not ErrCorruptMemWAL: %v", err)
			}
			return
		}
		// What decodes re-encodes to something that decodes the same.
		if m.ShardID != "" {
			again, err := DecodeShardManifest(encShardManifest(*m))
			if err != nil || !reflect.DeepEqual(again, m) {
				t.Fatalf("re-encoded manifest decodes as %+v, %v; first %+v", again, err, m)
			}
		}
	})
}

func FuzzDecodeMergedGenerations(f *testing.F) {
	f.Add(encMergedGenerations(map[string]uint64{"c4118b9c-7f79-523d-9bad-381e42232c1d": 5}))
	f.Add([]byte{0x4a, 0x02, 0x10, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMergedGenerations(b)
		if err != nil {
			if !errors.Is(err, ErrCorruptMemWAL) {
				t.Fatalf("error not ErrCorruptMemWAL: %v", err)
			}
			return
		}
		again, err := DecodeMergedGenerations(encMergedGenerations(m))
		if err != nil || !reflect.DeepEqual(again, m) {
			t.Fatalf("re-encoded watermarks decode as %v, %v; first %v", again, err, m)
		}
	})
}

// TestFixtureManifestsDecode: the manifests the fixture builder writes (the seeds of
// FuzzDecodeShardManifest in testdata) decode as the builder meant them.
func TestFixtureManifestsDecode(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzDecodeShardManifest", "*"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("seeds: %v %v", paths, err)
	}
	for _, p := range paths {
		b, err := readFuzzSeed(p)
		if err != nil {
			t.Fatal(err)
		}
		m, err := DecodeShardManifest(b)
		if err != nil {
			t.Errorf("%s: %v", filepath.Base(p), err)
			continue
		}
		if m.ShardID == "" || m.Version == 0 || len(m.Generations) != int(m.CurrentGeneration)-1 {
			t.Errorf("%s: %+v", filepath.Base(p), m)
		}
	}
}

// readFuzzSeed reads a corpus file of the form "go test fuzz v1\n[]byte(QUOTED)\n".
func readFuzzSeed(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	_, rest, ok := strings.Cut(string(b), "\n")
	if !ok {
		return nil, errors.New("not a fuzz corpus file")
	}
	q, ok := strings.CutPrefix(strings.TrimSpace(rest), "[]byte(")
	if !ok {
		return nil, errors.New("not a []byte corpus entry")
	}
	s, err := strconv.Unquote(strings.TrimSuffix(q, ")"))
	if err != nil {
		return nil, err
	}
	return []byte(s), nil
}
