package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lancectx/lancectx/api"
)

// postJSON POSTs an empty body and decodes the answer into out.
func postJSON(t *testing.T, url string, out any) int {
	t.Helper()
	resp, err := http.Post(url, api.ContentTypeJSON, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("POST %s: %d: %v", url, resp.StatusCode, err)
	}
	return resp.StatusCode
}

// runErr runs the CLI in process and returns its output and error.
func runErr(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := newRootCmd()
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(t.Context())
	return out.String(), err
}

// TestClientCommands drives a running `lancectx serve` through the client commands:
// create, append (JSON Lines, flushed), list, get, query, experiments and tasks, in
// tables and as JSON; bad input is an error that names it and appends nothing.
func TestClientCommands(t *testing.T) {
	p := startServe(t, t.TempDir(), "--stats-scan-interval-secs", "1")
	done := make(chan error)
	go func() { <-p.exited; done <- nil }()
	if _, err := waitServing(t, p.url, done); err != nil {
		t.Fatalf("%v\n%s", err, p.log)
	}
	srv := []string{"--server", p.url}
	cli := func(stdin string, args ...string) string {
		t.Helper()
		out, err := runErr(t, stdin, append(args, srv...)...)
		if err != nil {
			t.Fatalf("lancectx %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}

	if out := cli("", "rollouts", "create", "demo"); !strings.Contains(out, "created rollout store demo") {
		t.Fatalf("create: %s", out)
	}
	lines := `{"id":"s1","rollout_id":"r1","sequence_order":0,"role":"user","content":"What is 2+2?"}
{"id":"s2","rollout_id":"r1","sequence_order":1,"role":"assistant","content":"4","reward":1}

{"id":"s3","rollout_id":"r2","sequence_order":0,"role":"user","content":"tab\there"}
`
	file := filepath.Join(t.TempDir(), "r.jsonl")
	if err := os.WriteFile(file, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := cli("", "rollouts", "append", "demo", "--file", file, "--flush", "--batch", "2"); !strings.Contains(out, "appended 3 records to demo (durable, visible)") {
		t.Fatalf("append: %s", out)
	}
	out := cli("", "rollouts", "list", "demo")
	if !strings.HasPrefix(out, "ID ") || !strings.Contains(out, "s2  r1") || !strings.Contains(out, "tab here") || strings.Count(out, "\n") != 4 {
		t.Fatalf("list:\n%s", out)
	}
	if out := cli("", "rollouts", "list", "demo", "--limit", "1", "--filter", "reward > 0"); !strings.Contains(out, "s2") ||
		strings.Contains(out, "s1") || strings.Contains(out, "more:") {
		t.Fatalf("list with a filter:\n%s", out)
	}
	if out := cli("", "rollouts", "list", "demo", "--limit", "2"); !strings.Contains(out, "(more: --offset 2)") {
		t.Fatalf("list, first page:\n%s", out)
	}
	var list api.ListRecordsResponse[map[string]any]
	if err := json.Unmarshal([]byte(cli("", "rollouts", "list", "demo", "--json")), &list); err != nil || len(list.Records) != 3 {
		t.Fatalf("list --json: %+v %v", list, err)
	}
	var rec map[string]any
	if err := json.Unmarshal([]byte(cli("", "rollouts", "get", "demo", "s2")), &rec); err != nil || rec["reward"] != 1.0 || rec["content"] != "4" {
		t.Fatalf("get: %v %v", rec, err)
	}

	// Appends from standard input; a bad line stops before its batch is sent.
	if out := cli(`{"id":"s4","rollout_id":"r2","sequence_order":1}`+"\n", "rollouts", "append", "demo"); !strings.Contains(out, "appended 1 records") {
		t.Fatalf("append from stdin: %s", out)
	}
	if _, err := runErr(t, `{"id":"s5","rollout_id":"r3"}`+"\n"+`{"id":"s6","bogus":1}`+"\n", append([]string{"rollouts", "append", "demo", "--flush"}, srv...)...); err == nil ||
		!strings.Contains(err.Error(), "line 2") || !strings.Contains(err.Error(), "bogus") {
		t.Fatalf("a bad line: %v", err)
	}
	if out, err := runErr(t, "", append([]string{"rollouts", "get", "demo", "s5"}, srv...)...); err == nil || !strings.Contains(err.Error(), "no such record") {
		t.Fatalf("the batch with a bad line was sent: %v\n%s", err, out)
	}
	if _, err := runErr(t, `{"id":"","rollout_id":"r3"}`+"\n", append([]string{"rollouts", "append", "demo"}, srv...)...); err == nil ||
		!strings.Contains(err.Error(), "INVALID_REQUEST") {
		t.Fatalf("a record the server refuses: %v", err)
	}

	// The master: SQL, experiments (after its first stats scan), tasks.
	out = cli("", "query", "demo", "SELECT rollout_id, count(*) AS n, max(reward) AS best FROM records GROUP BY rollout_id ORDER BY rollout_id")
	if !strings.Contains(out, "rollout_id  n  best") || !strings.Contains(out, "r1          2  1") || !strings.Contains(out, "r2          1  NULL") ||
		!strings.Contains(out, "2 rows") {
		t.Fatalf("query:\n%s", out)
	}
	if _, err := runErr(t, "", append([]string{"query", "demo", "DROP TABLE records"}, srv...)...); err == nil || !strings.Contains(err.Error(), "INVALID_REQUEST") {
		t.Fatalf("a write through query: %v", err)
	}
	// The master lists a store once its stats are observed: a rescan does that now,
	// instead of waiting for the next scan round.
	var d api.ExperimentDetail
	if st := postJSON(t, p.url+"/api/v1/experiments/demo/rescan", &d); st != 200 || d.Name != "demo" {
		t.Fatalf("rescan: %d %+v\n%s", st, d, p.log)
	}
	if out = cli("", "experiments"); !strings.Contains(out, "demo  rollout  ") {
		t.Fatalf("experiments does not list demo after a rescan:\n%s", out)
	}
	var exps api.ExperimentListResponse
	if err := json.Unmarshal([]byte(cli("", "experiments", "--kind", "rollout", "--json")), &exps); err != nil || exps.Total != 1 {
		t.Fatalf("experiments --json: %+v %v", exps, err)
	}
	if out := cli("", "tasks"); !strings.HasPrefix(out, "ID ") || !strings.Contains(out, "tasks") {
		t.Fatalf("tasks:\n%s", out)
	}
	if _, err := runErr(t, "", "experiments", "--server", "ftp://x"); err == nil || !strings.Contains(err.Error(), "http://host:port") {
		t.Fatalf("a bad server address: %v", err)
	}
}
