package lance

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/lancectx/lancectx/objstore"
)

// TestExpectVersionIsACompareAndSwap: a write with ExpectVersion lands only as the next
// version after the one it names; a concurrent commit in between fails it with a
// conflict and leaves the history as the other writer made it.
func TestExpectVersionIsACompareAndSwap(t *testing.T) {
	ctx := context.Background()
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			v1, err := WriteStore(ctx, st, reader(testRows(0, 10)), WriteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			// Overwrite on the version it read: lands as 2.
			v2, err := WriteStore(ctx, st, reader(testRows(10, 5)), WriteOptions{Mode: ModeOverwrite, ExpectVersion: 1})
			if err != nil || v2.Version() != 2 {
				t.Fatalf("conditional overwrite on the latest: version %v, %v", v2, err)
			}
			// The same expectation again: version 2 exists now.
			if _, err := WriteStore(ctx, st, reader(testRows(0, 1)), WriteOptions{Mode: ModeOverwrite, ExpectVersion: 1}); !errors.Is(err, ErrConflict) {
				t.Fatalf("conditional overwrite on a stale version: %v", err)
			}
			// Append and merge-insert from a stale handle: refused, not rebased.
			if _, err := v1.Append(ctx, reader(testRows(100, 1)), WriteOptions{ExpectVersion: 1}); !errors.Is(err, ErrConflict) {
				t.Fatalf("conditional append from a stale handle: %v", err)
			}
			if _, _, err := v1.MergeInsert(ctx, "id", reader(testRows(0, 1)), WriteOptions{ExpectVersion: 1}); !errors.Is(err, ErrConflict) {
				t.Fatalf("conditional merge-insert from a stale handle: %v", err)
			}
			// The race itself: both read version 2, the first to commit wins.
			a, b := v2, v2
			if _, _, err := a.MergeInsert(ctx, "id", reader(testRows(10, 1)), WriteOptions{ExpectVersion: 2}); err != nil {
				t.Fatal(err)
			}
			if _, _, err := b.MergeInsert(ctx, "id", reader(testRows(11, 1)), WriteOptions{ExpectVersion: 2}); !errors.Is(err, ErrConflict) {
				t.Fatalf("second of two racing conditional writes: %v", err)
			}
			// Without the condition the same write rebases as before.
			if _, _, err := b.MergeInsert(ctx, "id", reader(testRows(11, 1)), WriteOptions{}); err != nil {
				t.Fatalf("unconditional merge-insert: %v", err)
			}
			latest, err := OpenStore(ctx, st)
			if err != nil || latest.Version() != 4 {
				t.Fatalf("latest %v, %v", latest, err)
			}
			got := ids(t, latest, "")
			slices.Sort(got)
			equalIDs(t, got, seq(10, 15))
		})
	}
}

// TestCommitRefusesAReplacedHistory: a handle of a dataset that was deleted and created
// anew in the same place never commits into the new one, whether the new history is
// shorter than the handle's (the latest version went back) or starts past it
// (FirstVersion: its versions below the start are missing).
func TestCommitRefusesAReplacedHistory(t *testing.T) {
	ctx := context.Background()
	for name, st := range stores(t) {
		t.Run(name, func(t *testing.T) {
			old, err := WriteStore(ctx, st, reader(testRows(0, 10)), WriteOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				if old, err = old.Append(ctx, reader(testRows(10+i, 1)), WriteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			purge(t, st)
			// Nothing there: the handle's history is gone.
			if _, err := old.Append(ctx, reader(testRows(50, 1)), WriteOptions{}); !errors.Is(err, ErrDatasetReplaced) {
				t.Fatalf("append after the dataset was deleted: %v", err)
			}
			purge(t, st)
			fresh, err := WriteStore(ctx, st, reader(testRows(1000, 2)), WriteOptions{})
			if err != nil || fresh.Version() != 1 {
				t.Fatalf("re-create: %v, %v", fresh, err)
			}
			if _, err := old.Append(ctx, reader(testRows(50, 1)), WriteOptions{}); !errors.Is(err, ErrDatasetReplaced) {
				t.Fatalf("append into a shorter new history: %v", err)
			}
			purge(t, st)
			fresh, err = WriteStore(ctx, st, reader(testRows(1000, 2)), WriteOptions{FirstVersion: 1000})
			if err != nil || fresh.Version() != 1000 {
				t.Fatalf("re-create at version 1000: %v, %v", fresh, err)
			}
			if _, err := old.Append(ctx, reader(testRows(50, 1)), WriteOptions{}); err == nil {
				t.Fatal("a stale handle appended into a history that starts past it")
			}
			latest, err := OpenStore(ctx, st)
			if err != nil || latest.Version() != 1000 {
				t.Fatalf("latest after the refused append: %v, %v", latest, err)
			}
			equalIDs(t, ids(t, latest, ""), seq(1000, 1002))
			next, err := latest.Append(ctx, reader(testRows(1002, 1)), WriteOptions{})
			if err != nil || next.Version() != 1001 {
				t.Fatalf("append to the new history: %v, %v", next, err)
			}
		})
	}
}

// purge deletes every object of st, as deleting a store does.
func purge(t *testing.T, st objstore.Store) {
	t.Helper()
	ctx := context.Background()
	var keys []string
	if err := objstore.Walk(ctx, st, objstore.ListOptions{}, func(o objstore.ObjectInfo) error {
		keys = append(keys, o.Key)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := objstore.DeleteAll(ctx, st, keys, 0); err != nil {
		t.Fatal(err)
	}
}
