package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lancectx/lancectx/internal/oracle"
	"github.com/lancectx/lancectx/lance"
)

func TestWorkerFlagDataStorageVersion(t *testing.T) {
	wf, err := newTestWorkerFlags(t, "--data-dir", "file:///tmp/x")
	if err != nil {
		t.Fatal(err)
	}
	if c := wf.config(&storeFlags{}); c.DataStorageVersion != lance.DefaultDataStorageVersion {
		t.Fatalf("default: %q", c.DataStorageVersion)
	}
	t.Setenv("LANCECTX_DATA_STORAGE_VERSION", "2.1")
	if wf, err = newTestWorkerFlags(t, "--data-dir", "file:///tmp/x"); err != nil || wf.config(&storeFlags{}).DataStorageVersion != "2.1" {
		t.Fatalf("from the environment: %v", err)
	}
	if wf, err = newTestWorkerFlags(t, "--data-dir", "file:///tmp/x", "--data-storage-version", "2.0"); err != nil || wf.config(&storeFlags{}).DataStorageVersion != "2.0" {
		t.Fatalf("the flag over the environment: %v", err)
	}
	for _, bad := range []string{"2.2", "stable", "21"} {
		_, err := newTestWorkerFlags(t, "--data-dir", "file:///tmp/x", "--data-storage-version", bad)
		if err == nil || !strings.Contains(err.Error(), "--data-storage-version") || !strings.Contains(err.Error(), bad) {
			t.Errorf("--data-storage-version %s: %v", bad, err)
		}
	}
	t.Setenv("LANCECTX_DATA_STORAGE_VERSION", "3")
	if _, err := newTestWorkerFlags(t, "--data-dir", "file:///tmp/x"); err == nil || !strings.Contains(err.Error(), "LANCECTX_DATA_STORAGE_VERSION") {
		t.Fatalf("a bad environment value: %v", err)
	}
}

func TestImportDataStorageVersion21(t *testing.T) {
	o := oracle.New(t)
	uri := filepath.Join(t.TempDir(), "rollouts.lance")
	src := filepath.Join("..", "..", "testdata", "rollouts.jsonl")
	schema := filepath.Join("..", "..", "testdata", "rollouts.schema.json")
	run(t, "dataset", "import", uri, "--jsonl", src, "--schema", schema, "--data-storage-version", "2.1")
	// Appends keep the dataset's version without being told.
	run(t, "dataset", "import", uri, "--jsonl", src, "--schema", schema, "--mode", "append")
	ds, err := lance.Open(context.Background(), uri)
	if err != nil {
		t.Fatal(err)
	}
	if ds.DataStorageVersion() != "2.1" || ds.CountRows() != 40 {
		t.Fatalf("dataset %s with %d rows", ds.DataStorageVersion(), ds.CountRows())
	}
	for _, f := range ds.Fragments() {
		if df := f.GetFiles()[0]; df.GetFileMajorVersion() != 2 || df.GetFileMinorVersion() != 1 {
			t.Fatalf("data file version %d.%d", df.GetFileMajorVersion(), df.GetFileMinorVersion())
		}
	}
	rows, err := o.Read(uri, oracle.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(svReadFile(t, src)), "\n")
	if len(rows) != 2*len(lines) {
		t.Fatalf("LanceDB reads %d rows, imported %d", len(rows), 2*len(lines))
	}
	for i, r := range rows {
		if a, b := svCanon(t, r), svCanon(t, lines[i%len(lines)]); a != b {
			t.Fatalf("row %d: LanceDB reads %s, imported %s", i, a, b)
		}
	}
	// Asking for another version than the dataset's fails, as does an unknown one.
	for _, args := range [][]string{
		{"--mode", "append", "--data-storage-version", "2.0"},
		{"--mode", "create", "--data-storage-version", "9.9"},
	} {
		cmd := newRootCmd()
		var errb bytes.Buffer
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&errb)
		target := uri
		if args[1] == "create" {
			target = filepath.Join(t.TempDir(), "new.lance")
		}
		cmd.SetArgs(append([]string{"dataset", "import", target, "--jsonl", src, "--schema", schema}, args...))
		err := cmd.ExecuteContext(t.Context())
		if !errors.Is(err, lance.ErrStorageVersion) {
			t.Errorf("import %v: %v", args, err)
		}
	}
}

func svReadFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// svCanon renders a JSON row with sorted keys, numbers as JSON numbers.
func svCanon(t *testing.T, row string) string {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal([]byte(row), &v); err != nil {
		t.Fatal(err)
	}
	return canonJSON(t, v)
}
