package lance

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/RoaringBitmap/roaring/v2"

	"github.com/lancectx/lancectx/objstore"
)

// TestCommitFilesHidesRowsOfAddedFiles: rows of an added file can be hidden in the same
// commit (the deletion file is named after the id the commit assigns), config is
// upserted with it, and files of another data storage version or whose every row would
// be hidden are refused.
func TestCommitFilesHidesRowsOfAddedFiles(t *testing.T) {
	ctx := context.Background()
	st := objstore.NewMem()
	ds, err := WriteStore(ctx, st, reader(testRows(0, 10)), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	info, err := WriteDataFile(ctx, st, "data/extra.lance", ds.Schema(), reader(testRows(100, 5)), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	commit := FilesCommit{
		Files:  []NamedDataFile{{Path: "extra.lance", DataFileInfo: info, Deleted: roaring.BitmapOf(1, 3)}},
		Config: map[string]string{"lancectx.test": "yes"},
	}
	// An append lands first: a commit from the stale handle must be recomputed (its
	// hidden rows were chosen on a version that lacked the new rows).
	appended, err := ds.Append(ctx, reader(testRows(50, 2)), WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ds.CommitFiles(ctx, commit); !errors.Is(err, ErrConflict) {
		t.Fatalf("commit from a stale handle: %v, want ErrConflict", err)
	}
	out, err := appended.CommitFiles(ctx, commit)
	if err != nil {
		t.Fatal(err)
	}
	if id := out.Fragments()[len(out.Fragments())-1].GetId(); id != 2 || out.Fragments()[len(out.Fragments())-1].GetDeletionFile() == nil {
		t.Fatalf("added fragment %v", out.Fragments()[len(out.Fragments())-1])
	}
	equalIDs(t, sortedInts(ids(t, out, "")), append(append(seq(0, 10), 50, 51), 100, 102, 104))
	if out.Config()["lancectx.test"] != "yes" {
		t.Errorf("config %v", out.Config())
	}
	reopened, err := OpenStore(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	equalIDs(t, sortedInts(ids(t, reopened, "")), append(append(seq(0, 10), 50, 51), 100, 102, 104))
	if n := reopened.CountRows(); n != 15 {
		t.Errorf("CountRows %d, want 15", n)
	}

	other := info // a file of the other version than the table's
	if other.Minor == 1 {
		other.Major, other.Minor = 2, 0
	} else {
		other.Major, other.Minor = 2, 1
	}
	if _, err := out.CommitFiles(ctx, FilesCommit{Files: []NamedDataFile{{Path: "extra.lance", DataFileInfo: other}}}); !errors.Is(err, ErrStorageVersion) {
		t.Errorf("a %d.%d file into a %s table: %v, want ErrStorageVersion", other.Major, other.Minor, out.DataStorageVersion(), err)
	}
	all := roaring.New()
	all.AddRange(0, info.Rows)
	if _, err := out.CommitFiles(ctx, FilesCommit{Files: []NamedDataFile{{Path: "extra.lance", DataFileInfo: info, Deleted: all}}}); err == nil ||
		!strings.Contains(err.Error(), "every one") {
		t.Errorf("a file with every row hidden: %v", err)
	}
}
