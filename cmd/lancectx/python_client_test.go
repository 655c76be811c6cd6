package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestPythonClient runs the Python client's tests (clients/python/tests, standard
// library unittest) with the system python3 against a running `lancectx serve`.
// python3 is required: .ci/run installs it when the machine lacks it.
func TestPythonClient(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is not installed (.ci/run installs it): the Python client cannot be tested")
	}
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	p := startServe(t, t.TempDir(), "--stats-scan-interval-secs", "1")
	done := make(chan error)
	go func() { <-p.exited; done <- nil }()
	if _, err := waitServing(t, p.url, done); err != nil {
		t.Fatalf("%v\n%s", err, p.log)
	}
	cmd := exec.CommandContext(t.Context(), py, "-m", "unittest", "-v", "test_client")
	cmd.Dir = filepath.Join(root, "clients", "python", "tests")
	cmd.Env = append(cmd.Environ(), "LANCECTX_SERVER="+p.url, "PYTHONDONTWRITEBYTECODE=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	t.Logf("python3 -m unittest:\n%s", out.String())
	if err != nil {
		t.Fatalf("the Python client's tests failed: %v\nserve log:\n%s", err, p.log)
	}
	// Every test ran: only the pyarrow test may skip, and only without pyarrow.
	ran := regexp.MustCompile(`Ran (\d+) tests?`).FindStringSubmatch(out.String())
	if ran == nil || ran[1] != "4" {
		t.Fatalf("expected 4 Python tests to run, got %v", ran)
	}
	if n := strings.Count(out.String(), "... skipped"); n > 1 || n == 1 && !strings.Contains(out.String(), "test_to_arrow (test_client.ClientTest.test_to_arrow) ... skipped 'pyarrow is not installed'") {
		t.Fatalf("unexpected skips:\n%s", out.String())
	}
}
