package objstore

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// A directory removed between the path lookup and the inode's creation makes ext4
// answer O_TMPFILE with EPERM (what a concurrent Delete's pruning does to a put). The
// removal is staged inside the open here, where the kernel's window is too short to
// hit on purpose.
func TestOpenAnonTellsARemovedDirectoryFromARefusal(t *testing.T) {
	if !anonSupported() {
		t.Skip("no /proc/self/fd: unnamed temp files are not used here")
	}
	removedThenEPERM := func(dir string) func(string, int, uint32) (int, error) {
		calls := 0
		return func(path string, mode int, perm uint32) (int, error) {
			calls++
			if calls == 1 {
				if err := os.Remove(dir); err != nil {
					t.Fatal(err)
				}
				return -1, unix.EPERM
			}
			return unix.Open(path, mode, perm)
		}
	}
	// Removed, and still gone: ENOENT, which PutIfAbsent answers by making it again.
	dir := filepath.Join(t.TempDir(), "gone")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := openAnonWith(dir, removedThenEPERM(dir)); !isNotExist(err) {
		t.Fatalf("a directory removed during the open: %v, want not-exist", err)
	}
	// Removed and made again by another writer before we look: the second open works.
	dir2 := filepath.Join(t.TempDir(), "again")
	if err := os.Mkdir(dir2, 0o755); err != nil {
		t.Fatal(err)
	}
	open := removedThenEPERM(dir2)
	remade := func(path string, mode int, perm uint32) (int, error) {
		fd, err := open(path, mode, perm)
		if errors.Is(err, unix.EPERM) {
			if err := os.Mkdir(dir2, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		return fd, err
	}
	f, err := openAnonWith(dir2, remade)
	if err != nil {
		t.Fatalf("a directory removed and made again: %v", err)
	}
	f.Close()
	// Removed and made again three times over, each open racing one more prune and
	// re-make: every refusal came from a directory replaced since, so the opens go on
	// (a bounded number of times).
	dir3 := filepath.Join(t.TempDir(), "churn")
	if err := os.Mkdir(dir3, 0o755); err != nil {
		t.Fatal(err)
	}
	opens := 0
	churn := func(path string, mode int, perm uint32) (int, error) {
		opens++
		if opens <= 3 {
			if err := os.Remove(dir3); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(dir3, 0o755); err != nil {
				t.Fatal(err)
			}
			return -1, unix.EPERM
		}
		return unix.Open(path, mode, perm)
	}
	f, err = openAnonWith(dir3, churn)
	if err != nil {
		t.Fatalf("a directory replaced during each of three opens: %v", err)
	}
	f.Close()
	// A directory that refuses every time: EPERM, not mistaken for a missing one.
	refuse := func(string, int, uint32) (int, error) { return -1, unix.EPERM }
	if _, err := openAnonWith(t.TempDir(), refuse); !errors.Is(err, unix.EPERM) || isNotExist(err) {
		t.Fatalf("a refusing directory: %v, want EPERM", err)
	}
}
