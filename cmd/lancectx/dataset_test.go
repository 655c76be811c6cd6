package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lancectx/lancectx/internal/oracle"
)

// run executes the CLI in-process and returns stdout.
func run(t *testing.T, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := newRootCmd()
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetArgs(args)
	if err := cmd.ExecuteContext(t.Context()); err != nil {
		t.Fatalf("lancectx %s: %v\n%s", strings.Join(args, " "), err, errb.String())
	}
	return out.String()
}

func TestImportScanRoundTripMatchesLanceDB(t *testing.T) {
	o := oracle.New(t)
	dir := t.TempDir()
	uri := filepath.Join(dir, "rollouts.lance")
	src := filepath.Join("..", "..", "testdata", "rollouts.jsonl")
	schema := filepath.Join("..", "..", "testdata", "rollouts.schema.json")
	out := run(t, "dataset", "import", uri, "--jsonl", src, "--schema", schema)
	var res struct{ Version, Rows int64 }
	if err := json.Unmarshal([]byte(out), &res); err != nil || res.Version != 1 || res.Rows != 20 {
		t.Fatalf("import output %q (%v)", out, err)
	}
	scanned := strings.Split(strings.TrimSpace(run(t, "dataset", "scan", uri)), "\n")
	lines, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	in := strings.Split(strings.TrimSpace(string(lines)), "\n")
	if len(scanned) != len(in) {
		t.Fatalf("scan printed %d rows, imported %d", len(scanned), len(in))
	}
	for i := range in {
		var a, b map[string]any
		if err := json.Unmarshal([]byte(in[i]), &a); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(scanned[i]), &b); err != nil {
			t.Fatal(err)
		}
		if ja, jb := canonJSON(t, a), canonJSON(t, b); ja != jb {
			t.Fatalf("row %d: imported %s, scanned %s", i, ja, jb)
		}
	}
	ldb, err := o.Read(uri, oracle.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(ldb, "\n") != strings.Join(scanned, "\n") {
		t.Fatalf("LanceDB reads\n%s\nlancectx scans\n%s", strings.Join(ldb, "\n"), strings.Join(scanned, "\n"))
	}
	// Append, then a filtered, projected, limited scan.
	run(t, "dataset", "import", uri, "--jsonl", src, "--mode", "append", "--schema", schema)
	got := strings.TrimSpace(run(t, "dataset", "scan", uri, "--columns", "id,reward", "--filter", "rollout_id = 'r2' AND sequence_order >= 2", "--limit", "3"))
	want := `{"id":"r2-2","reward":0.777}` + "\n" + `{"id":"r2-3","reward":0.248}` + "\n" + `{"id":"r2-2","reward":0.777}`
	if got != want {
		t.Fatalf("filtered scan:\n%s\nwant\n%s", got, want)
	}
	var info struct {
		Version       int
		Rows          int
		NumFragments  int    `json:"num_fragments"`
		FormatVersion string `json:"format_version"`
	}
	if err := json.Unmarshal([]byte(run(t, "dataset", "inspect", uri)), &info); err != nil {
		t.Fatal(err)
	}
	if info.Version != 2 || info.Rows != 40 || info.NumFragments != 2 || info.FormatVersion != "2.1" {
		t.Fatalf("inspect: %+v", info)
	}
	var versions []map[string]any
	if err := json.Unmarshal([]byte(run(t, "dataset", "versions", uri)), &versions); err != nil || len(versions) != 2 {
		t.Fatalf("versions: %v %v", versions, err)
	}
}

func canonJSON(t *testing.T, v map[string]any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestImportInfersSchemaAndRejectsBadRowsWithoutWriting(t *testing.T) {
	dir := t.TempDir()
	uri := filepath.Join(dir, "inferred.lance")
	run(t, "dataset", "import", uri, "--jsonl", filepath.Join("..", "..", "testdata", "rollouts.jsonl"))
	var info struct {
		Rows   int
		Schema struct {
			Fields []struct {
				Name string
				Type any
			}
		}
	}
	if err := json.Unmarshal([]byte(run(t, "dataset", "inspect", uri)), &info); err != nil {
		t.Fatal(err)
	}
	types, _ := json.Marshal(info.Schema.Fields)
	if info.Rows != 20 || !strings.Contains(string(types), `{"Name":"sequence_order","Type":"int64"}`) ||
		!strings.Contains(string(types), `{"Name":"tokens","Type":{"list":"int64"}}`) {
		t.Fatalf("inferred: rows %d schema %s", info.Rows, types)
	}
	bad := filepath.Join(dir, "bad.jsonl")
	if err := os.WriteFile(bad, []byte(`{"id":"a","rollout_id":"r","sequence_order":1}`+"\n"+`{"id":"b","rollout_id":"r","sequence_order":"x"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := newRootCmd()
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetArgs([]string{"dataset", "import", uri, "--jsonl", bad, "--mode", "append", "--schema", filepath.Join("..", "..", "testdata", "rollouts.schema.json")})
	err := cmd.ExecuteContext(t.Context())
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("bad row: %v", err)
	}
	if err := json.Unmarshal([]byte(run(t, "dataset", "inspect", uri)), &info); err != nil || info.Rows != 20 {
		t.Fatalf("a rejected import changed the dataset: rows %d (%v)", info.Rows, err)
	}
}

// TestScanPrintsBlobsAndRowIDsLikeLanceDB: on a LanceDB table with a blob column and
// stable row ids, `dataset scan` prints what LanceDB's query returns (blob
// descriptions, stable _rowid); --blob-bytes prints the values written, --row-addr the
// row addresses.
func TestScanPrintsBlobsAndRowIDsLikeLanceDB(t *testing.T) {
	o := oracle.New(t)
	uri := filepath.Join(t.TempDir(), "blobs.lance")
	schema := `{"fields":[{"name":"id","type":"int64","nullable":false},
		{"name":"blob","type":"large_binary","metadata":{"lance-encoding:blob":"true"}}]}`
	rows := []string{
		`{"id":0,"blob":"aGVsbG8="}`, `{"id":1,"blob":""}`, `{"id":2,"blob":"d29ybGQgb2YgYmxvYnM="}`,
		`{"id":3,"blob":null}`, `{"id":4,"blob":"eA=="}`,
	}
	if _, err := o.Create(uri, []byte(schema), rows[:3], oracle.CreateOptions{StableRowIDs: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Add(uri, rows[3:]); err != nil {
		t.Fatal(err)
	}
	res, err := o.Query(uri, oracle.QuerySpec{WithRowID: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(run(t, "dataset", "scan", uri, "--row-id")); got != strings.Join(res.Rows, "\n") {
		t.Fatalf("lancectx scans\n%s\nLanceDB queries\n%s", got, strings.Join(res.Rows, "\n"))
	}
	// Rows 3 and 4 are the second fragment's (id 1): their addresses are 1<<32 | offset,
	// while their stable ids, above, are 3 and 4.
	want := strings.Join([]string{
		`{"id":"0","blob":"aGVsbG8=","_rowaddr":"0"}`,
		`{"id":"1","blob":"","_rowaddr":"1"}`,
		`{"id":"2","blob":"d29ybGQgb2YgYmxvYnM=","_rowaddr":"2"}`,
		`{"id":"3","blob":null,"_rowaddr":"4294967296"}`,
		`{"id":"4","blob":"eA==","_rowaddr":"4294967297"}`,
	}, "\n")
	if got := strings.TrimSpace(run(t, "dataset", "scan", uri, "--blob-bytes", "--row-addr")); got != want {
		t.Fatalf("--blob-bytes --row-addr prints\n%s\nwant\n%s", got, want)
	}
}
