package objstore

import (
	"errors"
	"io/fs"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// procFD is where a file descriptor of this process can be named for linkat(2).
const procFD = "/proc/self/fd/"

// anonSupported reports whether linkAnon can work here: it names the anonymous file
// through /proc (linkat's AT_EMPTY_PATH needs a capability a worker should not hold).
func anonSupported() bool {
	fi, err := os.Stat(procFD)
	return err == nil && fi.IsDir()
}

// openAnon creates an unnamed regular file in dir's filesystem (O_TMPFILE): it has no
// directory entry until linkAnon gives it one, so there is no temp name to create in,
// and later remove from, a directory that other puts and deletes are changing (under
// append load the temp file's create was the largest single cost of a WAL entry). A
// filesystem or kernel without O_TMPFILE answers errNoAnon.
func openAnon(dir string) (*os.File, error) {
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o644)
	if err != nil {
		if errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EISDIR) || errors.Is(err, unix.EINVAL) {
			return nil, errNoAnon
		}
		return nil, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	return os.NewFile(uintptr(fd), dir), nil
}

// linkAnon gives f (from openAnon) the name path; like link(2) it fails with EEXIST
// rather than replace an existing file, which is what makes PutIfAbsent atomic.
func linkAnon(f *os.File, path string) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var lerr error
	if err := rc.Control(func(fd uintptr) {
		lerr = unix.Linkat(unix.AT_FDCWD, procFD+strconv.Itoa(int(fd)), unix.AT_FDCWD, path, unix.AT_SYMLINK_FOLLOW)
	}); err != nil {
		return err
	}
	if lerr != nil {
		return &os.LinkError{Op: "link", Old: f.Name(), New: path, Err: lerr}
	}
	return nil
}
