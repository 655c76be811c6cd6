package lance

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"testing"

	"github.com/lancectx/lancectx/objstore"
)

func TestCommitFilesPlacesFilesDeletesDuplicatesAndAdvancesWatermark(t *testing.T) {
	ctx := context.Background()
	st := objstore.NewMem()
	ds, err := WriteStore(ctx, st, reader(testRows(0, 100)), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A generation written outside data/ (ids 95..104: 95..99 repeat base rows).
	info, err := WriteDataFile(ctx, st, "_wal/s1/gen/1.lance", ds.Schema(), reader(testRows(95, 10)), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if info.Rows != 10 || info.Size == 0 || len(info.Fields) == 0 {
		t.Fatalf("info %+v", info)
	}
	if err := objstore.CopyVia(ctx, st, "_wal/s1/gen/1.lance", "data/wal-s1-1.lance"); err != nil {
		t.Fatal(err)
	}
	keys := map[string]struct{}{}
	for i := 95; i < 105; i++ {
		keys[strconv.Itoa(i)] = struct{}{}
	}
	hits, err := ds.FindKeys(ctx, "id", keys)
	if err != nil {
		t.Fatal(err)
	}
	if len(hits) != 1 || hits[0].GetCardinality() != 5 {
		t.Fatalf("hits %v", hits)
	}
	commit := FilesCommit{
		Files:         []NamedDataFile{{Path: "wal-s1-1.lance", DataFileInfo: info}},
		Delete:        hits,
		TableMetadata: map[string]string{"wm": "1"},
		Expect:        map[string]string{"wm": ""},
	}
	out, err := ds.CommitFiles(ctx, commit)
	if err != nil {
		t.Fatal(err)
	}
	got := ids(t, out, "")
	equalIDs(t, sortedInts(got), seq(0, 105))
	if out.TableMetadata()["wm"] != "1" || out.Transaction().GetUpdate() == nil {
		t.Fatalf("metadata %v txn %v", out.TableMetadata(), out.Transaction())
	}
	// Replaying the same commit from the stale handle fails the precondition: exactly once.
	if _, err := ds.CommitFiles(ctx, commit); !errors.Is(err, ErrConflict) {
		t.Fatalf("second commit of the same files: %v", err)
	}
}

func sortedInts(x []int64) []int64 {
	out := append([]int64(nil), x...)
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
