package lance

import (
	"errors"
	"math"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/lancectx/lancectx/lance/format/tablepb"
)

func sampleManifestFile() *manifestFile {
	return &manifestFile{
		Manifest: &tablepb.Manifest{
			Version:       7,
			Timestamp:     timestamppb.New(time.Unix(1764460800, 123456789)),
			Fragments:     []*tablepb.DataFragment{{Id: 3, PhysicalRows: 10, Files: []*tablepb.DataFile{{Path: "a.lance", Fields: []int32{0}}}}},
			MaxFragmentId: proto.Uint32(3),
			WriterVersion: &tablepb.Manifest_WriterVersion{Library: WriterLibrary, Version: WriterVersion},
			DataFormat:    &tablepb.Manifest_DataStorageFormat{FileFormat: "lance", Version: "2.0"},
		},
		Transaction: &tablepb.Transaction{ReadVersion: 6, Uuid: "u", Operation: &tablepb.Transaction_Append_{Append: &tablepb.Transaction_Append{}}},
		Indices:     &tablepb.IndexSection{Indices: []*tablepb.IndexMetadata{{Name: "idx", Fields: []int32{0}, DatasetVersion: 5}}},
	}
}

func TestManifestRoundTripKeepsEverySection(t *testing.T) {
	mf := sampleManifestFile()
	buf, _, err := encodeManifest(sampleManifestFile())
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeManifest("m", buf)
	if err != nil {
		t.Fatal(err)
	}
	if got.Manifest.GetIndexSection() != 0 {
		t.Errorf("index section should be written first, at offset 0; got %d", got.Manifest.GetIndexSection())
	}
	if got.Manifest.TransactionSection == nil || got.Manifest.GetTransactionSection() == 0 {
		t.Errorf("transaction section should follow the index section, got %v", got.Manifest.TransactionSection)
	}
	got.Manifest.IndexSection, got.Manifest.TransactionSection = nil, nil
	if !proto.Equal(got.Manifest, mf.Manifest) || !proto.Equal(got.Transaction, mf.Transaction) || !proto.Equal(got.Indices, mf.Indices) {
		t.Fatalf("round trip changed the manifest:\n got %v\nwant %v", got, mf)
	}
}

func TestDecodeManifestRejectsCorruptFiles(t *testing.T) {
	good, _, err := encodeManifest(sampleManifestFile())
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string][]byte{
		"empty file":                      {},
		"too short":                       []byte("LANC"),
		"no magic":                        append(append([]byte{}, good[:len(good)-4]...), "XXXX"...),
		"manifest position past the end":  setU64(good, len(good)-16, uint64(len(good))),
		"manifest position negative":      setU64(good, len(good)-16, math.MaxUint64),
		"manifest length mismatch":        truncateMiddle(good),
		"transaction offset out of range": withSection(t, 21, 1<<40),
		"index offset out of range":       withSection(t, 6, math.MaxUint64-2),
	}
	for name, buf := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := decodeManifest("m", buf); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("want ErrCorrupt, got %v", err)
			}
		})
	}
}

func setU64(b []byte, at int, v uint64) []byte {
	out := append([]byte{}, b...)
	for i := 0; i < 8; i++ {
		out[at+i] = byte(v >> (8 * i))
	}
	return out
}

func truncateMiddle(b []byte) []byte {
	out := append([]byte{}, b[:len(b)-17]...)
	return append(out, b[len(b)-16:]...)
}

// withSection encodes a manifest whose section pointer (field 6 or 21) is bogus.
func withSection(t *testing.T, field int, off uint64) []byte {
	m := &tablepb.Manifest{Version: 1}
	if field == 6 {
		m.IndexSection = proto.Uint64(off)
	} else {
		m.TransactionSection = proto.Uint64(off)
	}
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var buf []byte
	buf = append(buf, byte(len(b)), byte(len(b)>>8), byte(len(b)>>16), byte(len(b)>>24))
	buf = append(buf, b...)
	buf = append(buf, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0)
	buf = append(buf, "LANC"...)
	return buf
}

func TestManifestNames(t *testing.T) {
	if got := manifestKeyV2(1); got != "_versions/18446744073709551614.manifest" {
		t.Errorf("v2 name of version 1 = %s", got)
	}
	if got := manifestKeyV2(7); got != "_versions/18446744073709551608.manifest" {
		t.Errorf("v2 name of version 7 = %s", got)
	}
	cases := []struct {
		name    string
		version uint64
		scheme  namingScheme
		ok      bool
	}{
		{"18446744073709551614.manifest", 1, namingV2, true},
		{"00000000000000000001.manifest", math.MaxUint64 - 1, namingV2, true},
		{"1.manifest", 1, namingV1, true},
		{"42.manifest", 42, namingV1, true},
		{"0.manifest", 0, namingUnknown, false},
		{"latest_version_hint.json", 0, namingUnknown, false},
		{".tmp-put-x", 0, namingUnknown, false},
		{"d18446744073709551614.manifest", 0, namingUnknown, false},
		{"12a.manifest", 0, namingUnknown, false},
		{".manifest", 0, namingUnknown, false},
		{"99999999999999999999999.manifest", 0, namingUnknown, false},
		{"18446744073709551615.manifest", 0, namingUnknown, false},
	}
	for _, c := range cases {
		v, s, ok := parseManifestName(c.name)
		if v != c.version || s != c.scheme || ok != c.ok {
			t.Errorf("parseManifestName(%q) = %d,%v,%v want %d,%v,%v", c.name, v, s, ok, c.version, c.scheme, c.ok)
		}
	}
}

func FuzzDecodeManifest(f *testing.F) {
	good, _, err := encodeManifest(sampleManifestFile())
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte("LANC"))
	f.Add(make([]byte, 32))
	f.Fuzz(func(t *testing.T, b []byte) {
		mf, err := decodeManifest("fuzz", b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error does not wrap ErrCorrupt: %v", err)
			}
			return
		}
		// Whatever decodes must encode again.
		if _, _, err := encodeManifest(mf); err != nil {
			t.Fatalf("re-encode: %v", err)
		}
	})
}
