package wal

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lancectx/lancectx/internal/rowkey"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
)

// keyedBatch builds the batch {id: t, n: int64} with one row per id value (strings
// for string and binary types, int64 or uint64 for integer types).
func keyedBatch(t testing.TB, kt arrow.DataType, ids []any, n int64) arrow.RecordBatch {
	t.Helper()
	sch := arrow.NewSchema([]arrow.Field{{Name: "id", Type: kt}, {Name: "n", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, sch)
	defer b.Release()
	for _, id := range ids {
		switch fb := b.Field(0).(type) {
		case *array.StringBuilder:
			fb.Append(id.(string))
		case *array.LargeStringBuilder:
			fb.Append(id.(string))
		case *array.BinaryBuilder: // binary and large binary
			fb.Append([]byte(id.(string)))
		case *array.Int32Builder:
			fb.Append(int32(id.(int64)))
		case *array.Int64Builder:
			fb.Append(id.(int64))
		case *array.Uint32Builder:
			fb.Append(uint32(id.(uint64)))
		case *array.Uint64Builder:
			fb.Append(id.(uint64))
		default:
			t.Fatalf("no builder for %s", kt)
		}
		b.Field(1).(*array.Int64Builder).Append(n)
	}
	return b.NewRecordBatch()
}

func batchReader(t testing.TB, rec arrow.RecordBatch) array.RecordReader {
	t.Helper()
	rdr, err := array.NewRecordReader(rec.Schema(), []arrow.RecordBatch{rec})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rdr.Release)
	return rdr
}

// TestKeyFormAgreesWithLance pins the key agreement between the WAL and lance for every
// key type: the keys the WAL derives from a batch (keyFunc: what its merge dedup,
// memtable and generation indexes use) are the keys lance matches rows by in FindKeys,
// MergeInsert and LookupKey, and the filter of a key selects the same row.
func TestKeyFormAgreesWithLance(t *testing.T) {
	ctx := context.Background()
	strs := []any{"a", "it's", "", "7", "ünï", `q"uote`}
	bins := []any{"\x00\x01", "a", "", "\xff\xfe"}
	for _, tc := range []struct {
		typ arrow.DataType
		ids []any
	}{
		{arrow.BinaryTypes.String, strs},
		{arrow.BinaryTypes.LargeString, strs},
		{arrow.BinaryTypes.Binary, bins},
		{arrow.BinaryTypes.LargeBinary, bins},
		{arrow.PrimitiveTypes.Int32, []any{int64(7), int64(-3), int64(0), int64(math.MaxInt32), int64(math.MinInt32)}},
		{arrow.PrimitiveTypes.Int64, []any{int64(7), int64(-3), int64(0), int64(math.MaxInt64), int64(math.MinInt64)}},
		{arrow.PrimitiveTypes.Uint32, []any{uint64(7), uint64(0), uint64(math.MaxUint32)}},
		{arrow.PrimitiveTypes.Uint64, []any{uint64(7), uint64(0), uint64(math.MaxUint64)}},
	} {
		t.Run(tc.typ.String(), func(t *testing.T) {
			rec := keyedBatch(t, tc.typ, tc.ids, 1)
			defer rec.Release()
			keyOf, err := keyFunc(tc.typ)
			if err != nil {
				t.Fatal(err)
			}
			keys := make([]string, len(tc.ids))
			set := map[string]struct{}{}
			for i := range keys {
				keys[i] = keyOf(rec.Column(0), i)
				set[keys[i]] = struct{}{}
			}
			if len(set) != len(keys) {
				t.Fatalf("distinct values share a key: %q", keys)
			}
			ds, err := lance.WriteStore(ctx, objstore.NewMem(), batchReader(t, rec), lance.WriteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// The same values upserted match every existing row and insert none.
			upd := keyedBatch(t, tc.typ, tc.ids, 2)
			defer upd.Release()
			ds, res, err := ds.MergeInsert(ctx, "id", batchReader(t, upd), lance.WriteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if res.Updated != int64(len(keys)) || res.Inserted != 0 {
				t.Fatalf("merge-insert of the same values: %+v, want %d updated", res, len(keys))
			}
			found, err := ds.FindKeys(ctx, "id", set)
			if err != nil {
				t.Fatal(err)
			}
			var matched uint64
			for _, bm := range found {
				matched += bm.GetCardinality()
			}
			if matched != uint64(len(keys)) {
				t.Fatalf("FindKeys with the WAL's keys matched %d rows, want %d", matched, len(keys))
			}
			kc := lance.NewKeyCache(1 << 20)
			for _, k := range keys {
				// As a caller writes the key (an integer may be zero-padded), in the key
				// form Snapshot.Get hands to LookupKey.
				written := []string{k}
				if rowkey.Canonical(tc.typ, k) != k {
					t.Fatalf("key %q is not canonical", k)
				}
				if _, isInt := tc.ids[0].(string); !isInt && !strings.HasPrefix(k, "-") {
					written = append(written, "00"+k)
				}
				for _, w := range written {
					r, ok, err := ds.LookupKey(ctx, kc, "agree", "id", rowkey.Canonical(tc.typ, w), []string{"n"})
					if err != nil || !ok {
						t.Fatalf("LookupKey(%q) = %v, %v", w, ok, err)
					}
					if got := r.Column(0).(*array.Int64).Value(0); got != 2 {
						t.Errorf("LookupKey(%q): n = %d, want 2", w, got)
					}
					r.Release()
				}
				if tc.typ.ID() == arrow.BINARY || tc.typ.ID() == arrow.LARGE_BINARY {
					continue // no filter literal for binary keys
				}
				if k == "-9223372036854775808" || k == "18446744073709551615" {
					continue // beyond ±MaxInt64: lance/expr has no literal for them (Get needs a key cache)
				}
				f, err := rowkey.Filter("id", tc.typ, k)
				if err != nil {
					t.Fatal(err)
				}
				recs, err := ds.Collect(ctx, lance.ScanOptions{Columns: []string{"n"}, Filter: f})
				if err != nil {
					t.Fatalf("filter %s: %v", f, err)
				}
				var got []string
				for _, r := range recs {
					for i := 0; i < int(r.NumRows()); i++ {
						got = append(got, fmt.Sprint(r.Column(0).(*array.Int64).Value(i)))
					}
					r.Release()
				}
				if strings.Join(got, ",") != "2" {
					t.Errorf("filter %s selected n = %v, want [2]", f, got)
				}
			}
		})
	}
}

// TestGetIntegerKeyAnySpelling: an integer key names the same row however it is
// written ("007" is 7), wherever the newest row is: in the memtable, in a sealed
// generation, or merged into the base (with and without a key cache).
func TestGetIntegerKeyAnySpelling(t *testing.T) {
	ctx := context.Background()
	st := objstore.NewMem()
	base := keyedBatch(t, arrow.PrimitiveTypes.Int64, []any{int64(7), int64(8)}, 1)
	defer base.Release()
	if _, err := lance.WriteStore(ctx, st, batchReader(t, base), lance.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	s := openShard(t, testOptions(st, "w1"))
	kc := lance.NewKeyCache(1 << 20)
	check := func(where string, want int64) {
		t.Helper()
		for _, opts := range []ReadOptions{{}, {KeyCache: kc, KeyCacheScope: "spelling"}} {
			sn, err := ReadSnapshot(ctx, st, s, opts)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"7", "007", "+7"} {
				rec, ok, err := sn.Get(ctx, k, []string{"n"})
				if err != nil || !ok {
					t.Fatalf("%s: Get(%q) = %v, %v", where, k, ok, err)
				}
				if got := rec.Column(0).(*array.Int64).Value(0); got != want {
					t.Errorf("%s (key cache %v): Get(%q) n = %d, want %d", where, opts.KeyCache != nil, k, got, want)
				}
				rec.Release()
			}
		}
	}
	upd := keyedBatch(t, arrow.PrimitiveTypes.Int64, []any{int64(7)}, 2)
	defer upd.Release()
	if _, err := s.Append(ctx, upd); err != nil {
		t.Fatal(err)
	}
	check("memtable", 2)
	flush(t, s)
	check("generation", 2)
	if _, err := s.Merge(ctx, MergeOptions{}); err != nil {
		t.Fatal(err)
	}
	check("base", 2)
}
