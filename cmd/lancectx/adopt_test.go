package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// adoptCmd runs `lancectx adopt args...` in-process.
func adoptCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := newRootCmd()
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SetArgs(append([]string{"adopt", "--log-level", "error"}, args...))
	err := cmd.ExecuteContext(t.Context())
	return out.String(), err
}

// TestAdoptCommand: `lancectx adopt` prints one line per store and a summary, exits 0,
// and a second run reports every rollout store as already registered.
func TestAdoptCommand(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("the fixture needs node on PATH: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "data")
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, node, filepath.Join("..", "..", "tests", "interop", "lancecontext-fixture.mjs"), dir,
		"--stores", "2", "--generations", "2", "--storage-version", "2.0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the fixture: %v\n%s", err, out)
	}
	out, err := adoptCmd(t, dir, "--json", "--concurrency", "2")
	if err != nil {
		t.Fatalf("adopt: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	outcomes := map[string]string{}
	for _, l := range lines[:len(lines)-1] {
		var r struct{ Name, Kind, Outcome string }
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		outcomes[r.Kind+"/"+r.Name] = r.Outcome
	}
	want := map[string]string{"rollout/exp-000": "adopted", "rollout/exp-001": "adopted", "rollout/legacy": "adopted",
		"generic/g0": "adopted", "datagen/d0": "not adopted"} // d0's four columns are not the datagen event schema
	for k, v := range want {
		if outcomes[k] != v {
			t.Errorf("%s: %q, want %q (output %s)", k, outcomes[k], v, out)
		}
	}
	var sum struct{ Found, Adopted, Failed int }
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil || sum.Found != 5 || sum.Adopted != 4 || sum.Failed != 0 {
		t.Errorf("summary %q (%v)", lines[len(lines)-1], err)
	}

	out, err = adoptCmd(t, dir)
	if err != nil {
		t.Fatalf("second adopt: %v\n%s", err, out)
	}
	for _, name := range []string{"exp-000", "exp-001", "legacy", "g0"} {
		if !strings.Contains(out, name) || !containsLine(out, name, "already registered") {
			t.Errorf("second run, %s: not reported as already registered:\n%s", name, out)
		}
	}
	if !strings.Contains(out, "found 5 stores: 0 adopted, 4 already registered, 1 not adopted, 0 failed") {
		t.Errorf("second run summary:\n%s", out)
	}
}

func containsLine(out, a, b string) bool {
	for l := range strings.Lines(out) {
		if strings.Contains(l, " "+a+" ") && strings.Contains(l, b) {
			return true
		}
	}
	return false
}

// TestAdoptCommandBadInput: a bad URI, a missing directory, a file and an empty
// directory are clear errors, not a silent success (and nothing is created).
func TestAdoptCommandBadInput(t *testing.T) {
	tmp := t.TempDir()
	file := filepath.Join(tmp, "a-file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(tmp, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(tmp, "missing")
	cases := map[string]struct {
		arg      string
		want     string
		exitCode int // 0: any error
	}{
		"a missing directory":     {missing, "does not exist", 0},
		"a file":                  {file, "is not a directory", 0},
		"an empty directory":      {empty, "holds no datasets", 0},
		"a file URI with a host":  {"file://somehost/data", "bad data directory URI", 2},
		"a scheme lancectx lacks": {"nosuch://bucket/data", "nosuch", 2},
		"a zero concurrency":      {empty + " --concurrency 0", "--concurrency must be positive", 2},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := adoptCmd(t, strings.Fields(c.arg)...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v (output %q), want one saying %q", err, out, c.want)
			}
			var ee *exitError
			if c.exitCode != 0 && (!errors.As(err, &ee) || ee.code != c.exitCode) {
				t.Errorf("exit code: %v, want %d", err, c.exitCode)
			}
		})
	}
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("adopt created the missing directory: %v", err)
	}
}
