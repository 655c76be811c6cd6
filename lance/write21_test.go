package lance_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/lancectx/lancectx/internal/oracle"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
)

// Datasets in data storage version 2.1 written by lancectx, checked with the real
// LanceDB 0.31 (internal/oracle): LanceDB reads them row for row, appends to and
// optimizes them, and lancectx appends to tables LanceDB created in 2.1.

// check21Files fails unless every data file of ds is a 2.1 file listing only leaf
// fields (2.1 has no columns for struct and list parents).
func check21Files(t *testing.T, ds *lance.Dataset) {
	t.Helper()
	if v := ds.DataStorageVersion(); v != "2.1" {
		t.Fatalf("data storage version %q, want 2.1", v)
	}
	// Leaves of the rollout schema: every field but the list/struct parents
	// input_tokens, output_logprobs, loss_mask, relationships and relationships.item.
	var leaves []int32
	parents := map[int32]bool{}
	for _, id := range ds.Schema().AllIDs() {
		if f := ds.Schema().FieldByID(id); len(f.Children) > 0 {
			parents[id] = true
		}
	}
	for _, id := range ds.Schema().AllIDs() {
		if !parents[id] {
			leaves = append(leaves, id)
		}
	}
	for _, f := range ds.Fragments() {
		for _, df := range f.GetFiles() {
			if df.GetFileMajorVersion() != 2 || df.GetFileMinorVersion() != 1 {
				t.Fatalf("fragment %d: data file version %d.%d, want 2.1", f.GetId(), df.GetFileMajorVersion(), df.GetFileMinorVersion())
			}
			if !slices.Equal(df.GetFields(), leaves) {
				t.Fatalf("fragment %d: fields %v, want the leaves %v", f.GetId(), df.GetFields(), leaves)
			}
			for i, c := range df.GetColumnIndices() {
				if c != int32(i) {
					t.Fatalf("fragment %d: column indices %v", f.GetId(), df.GetColumnIndices())
				}
			}
		}
	}
}

func TestWrite21LanceDBReadsAppendsAndOptimizes(t *testing.T) {
	ctx := context.Background()
	o := oracle.New(t)
	path := filepath.Join(t.TempDir(), "go21.lance")
	rows := rolloutRows(21, 0, 300)
	ds, err := lance.Write(ctx, path, batchOf(t, rows), lance.WriteOptions{Mode: lance.ModeCreate, DataStorageVersion: "2.1", MaxRowsPerFile: 128})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(ds.Fragments()); n != 3 {
		t.Fatalf("%d fragments, want 3", n)
	}
	check21Files(t, ds)
	// An append takes the dataset's version without being told.
	more := rolloutRows(21, 300, 150)
	if ds, err = ds.Append(ctx, batchOf(t, more), lance.WriteOptions{MaxRowsPerFile: 100}); err != nil {
		t.Fatal(err)
	}
	check21Files(t, ds)
	rows = append(rows, more...)
	// Lance refuses datasets with mixed versions; so does lancectx, before writing.
	if _, err := ds.Append(ctx, batchOf(t, rolloutRows(21, 450, 1)), lance.WriteOptions{DataStorageVersion: "2.0"}); !errors.Is(err, lance.ErrStorageVersion) {
		t.Fatalf("append of 2.0 files to a 2.1 dataset: %v", err)
	}
	got, err := o.Read(path, oracle.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sameRows(t, "LanceDB read of a lancectx 2.1 dataset", got, canonical(t, rows))
	if n, err := o.Count(path, "role = 'tool' AND sequence_order > 3", 0); err != nil || n == 0 {
		t.Fatalf("LanceDB filtered count: %d, %v", n, err)
	}

	// LanceDB appends to it (in 2.1, the dataset's version) and compacts it.
	extra := rolloutRows(21, 450, 40)
	if _, err := o.Add(path, extra); err != nil {
		t.Fatal(err)
	}
	rows = append(rows, extra...)
	keep := time.Duration(0)
	st, err := o.Optimize(path, oracle.OptimizeOptions{CleanupOlderThan: &keep})
	if err != nil {
		t.Fatal(err)
	}
	if st.Compaction.FragmentsRemoved == 0 {
		t.Fatalf("LanceDB optimize compacted nothing: %+v", st)
	}
	got, err = o.Read(path, oracle.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sameRows(t, "LanceDB read after its append and optimize", got, canonical(t, rows))
	after, err := lance.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if after.DataStorageVersion() != "2.1" {
		t.Fatalf("after LanceDB optimize: data storage version %q", after.DataStorageVersion())
	}
	// lancectx appends again to what LanceDB rewrote.
	last := rolloutRows(21, 490, 30)
	if _, err := after.Append(ctx, batchOf(t, last), lance.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	rows = append(rows, last...)
	got, err = o.Read(path, oracle.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sameRows(t, "LanceDB read after a lancectx append to its compaction", got, canonical(t, rows))
}

func TestWrite21AppendsToALanceDBTable(t *testing.T) {
	ctx := context.Background()
	o := oracle.New(t)
	path := filepath.Join(t.TempDir(), "ldb21.lance")
	rows := rolloutRows(22, 0, 100)
	if _, err := o.Create(path, []byte(rolloutSchemaJSON), rows, oracle.CreateOptions{StorageVersion: "2.1"}); err != nil {
		t.Fatal(err)
	}
	ds, err := lance.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{1, 200, 57} {
		more := rolloutRows(22, len(rows), n)
		if ds, err = ds.Append(ctx, batchOf(t, more), lance.WriteOptions{MaxRowsPerFile: 128}); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, more...)
	}
	got, err := o.Read(path, oracle.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sameRows(t, "LanceDB read of its table after lancectx appends", got, canonical(t, rows))
	// LanceDB's own compaction rewrites the mix of its files and ours.
	if _, err := o.Optimize(path, oracle.OptimizeOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err = o.Read(path, oracle.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sameRows(t, "LanceDB read after optimize", got, canonical(t, rows))
}

func TestWrite21StorageVersionChoice(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{{"", lance.DefaultDataStorageVersion, true}, {"2.0", "2.0", true}, {"2.1", "2.1", true}, {"2.2", "", false}, {"stable", "", false}} {
		got, err := lance.ParseDataStorageVersion(tc.in)
		if tc.ok != (err == nil) || got != tc.want || (err != nil && !errors.Is(err, lance.ErrStorageVersion)) {
			t.Errorf("ParseDataStorageVersion(%q) = %q, %v", tc.in, got, err)
		}
	}
	dir := t.TempDir()
	// New datasets get the default; an overwrite keeps the dataset's version unless told.
	ds, err := lance.Write(ctx, filepath.Join(dir, "d.lance"), batchOf(t, rolloutRows(1, 0, 5)), lance.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ds.DataStorageVersion() != lance.DefaultDataStorageVersion {
		t.Fatalf("new dataset: %q, want the default %q", ds.DataStorageVersion(), lance.DefaultDataStorageVersion)
	}
	v21, err := lance.Write(ctx, filepath.Join(dir, "v21.lance"), batchOf(t, rolloutRows(1, 0, 5)), lance.WriteOptions{DataStorageVersion: "2.1"})
	if err != nil {
		t.Fatal(err)
	}
	if v21, err = v21.Overwrite(ctx, batchOf(t, rolloutRows(1, 5, 5)), lance.WriteOptions{}); err != nil {
		t.Fatal(err)
	}
	check21Files(t, v21)
	if _, err := lance.Write(ctx, filepath.Join(dir, "bad.lance"), batchOf(t, rolloutRows(1, 0, 5)), lance.WriteOptions{DataStorageVersion: "2.2"}); !errors.Is(err, lance.ErrStorageVersion) {
		t.Fatalf("create in 2.2: %v", err)
	}
	// Files written apart and committed later (the WAL's way) must match the dataset.
	st, err := objstore.Open(ctx, filepath.Join(dir, "v21.lance"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, v := range []string{"2.0", "2.1"} {
		info, err := lance.WriteDataFile(ctx, st, "data/"+v+".lance", v21.Schema(), batchOf(t, rolloutRows(2, 0, 3)), lance.WriteOptions{DataStorageVersion: v})
		if err != nil {
			t.Fatal(err)
		}
		_, err = v21.CommitFiles(ctx, lance.FilesCommit{Files: []lance.NamedDataFile{{Path: v + ".lance", DataFileInfo: info}}})
		if v == "2.0" && !errors.Is(err, lance.ErrStorageVersion) {
			t.Fatalf("commit of a 2.0 file into a 2.1 dataset: %v", err)
		}
		if v == "2.1" && err != nil {
			t.Fatalf("commit of a 2.1 file into a 2.1 dataset: %v", err)
		}
	}
}
