package worker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestStartSweepsStaleTempFiles: a worker over a local data directory removes the
// temp files of uploads older than SweepTempAge (a process killed mid-put leaves
// them) and keeps younger ones, which may be another process's upload in flight;
// objects are never touched.
func TestStartSweepsStaleTempFiles(t *testing.T) {
	dir := t.TempDir()
	sub := filepath.Join(dir, "exp.rollout.lance", "_wal", "shard")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * time.Hour)
	write := func(name string, mtime time.Time) string {
		p := filepath.Join(sub, name)
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		return p
	}
	stale1 := write(".tmp-put-AAAA", old)
	stale2 := write(".tmp-put-BBBB", old)
	fresh := write(".tmp-put-CCCC", time.Now())
	object := write("00000000000000000001.entry", old)

	tw := newTestWorker(t, dir, func(c *Config) {
		c.SweepTempAge = time.Hour
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		m := string(tw.do("GET", "/metrics", "", nil).body)
		if strings.Contains(m, "rollout_temp_files_swept_total 2") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sweep not done after 10 s; metrics:\n%.2000s", m)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, p := range []string{stale1, stale2} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s: stale temp file kept (%v)", filepath.Base(p), err)
		}
	}
	for _, p := range []string{fresh, object} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s: %v, want kept", filepath.Base(p), err)
		}
	}
}
