package objstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"sync"

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
func openAnon(dir string) (*os.File, error) { return openAnonWith(dir, unix.Open) }

// anonRetries bounds openAnon's opens again after EPERM from a directory that was
// removed and made again meanwhile (each retry needs a directory replaced once more).
const anonRetries = 8

// openAnonWith is openAnon with its open(2) (tests race it with a removal).
func openAnonWith(dir string, open func(path string, mode int, perm uint32) (int, error)) (*os.File, error) {
	const flags = unix.O_TMPFILE | unix.O_WRONLY | unix.O_CLOEXEC
	fd, err := open(dir, flags, 0o644)
	// ext4 refuses a new inode in a directory that was removed after the path was looked
	// up (a concurrent Delete pruned it) with EPERM, not ENOENT. Gone now: ENOENT, which
	// the caller answers by making the directory again. Made again since (another
	// writer): open it again, as long as each refusal came from a directory that has
	// since been replaced (another inode, or the same number reused with a new ctime).
	// A directory that refuses for good (chattr +i) refuses twice as itself.
	var seen unix.Stat_t
	for tries := 0; errors.Is(err, unix.EPERM) && tries < anonRetries; tries++ {
		var st unix.Stat_t
		if serr := unix.Lstat(dir, &st); errors.Is(serr, unix.ENOENT) {
			return nil, &fs.PathError{Op: "open", Path: dir, Err: unix.ENOENT}
		} else if serr != nil {
			break
		}
		if tries > 0 && st.Ino == seen.Ino && st.Ctim == seen.Ctim {
			break // the same directory refused again
		}
		seen = st
		fd, err = open(dir, flags, 0o644)
	}
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

// direntBufs holds getdents buffers: one 64 KiB read returns about 1,300 entries of a
// Lance manifest directory, where os.File.ReadDir reads 8 KiB at a time and allocates
// an fs.DirEntry per entry.
var direntBufs = sync.Pool{New: func() any { b := make([]byte, 64<<10); return &b }}

// readDirents reads all entries of dir in directory order, without a stat each.
func readDirents(dir string) ([]rawDirent, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: dir, Err: err}
	}
	defer unix.Close(fd)
	bp := direntBufs.Get().(*[]byte)
	defer direntBufs.Put(bp)
	buf := *bp
	var out []rawDirent
	for {
		n, err := unix.Getdents(fd, buf)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "readdirent", Path: dir, Err: err}
		}
		if n <= 0 {
			return out, nil
		}
		if out, err = parseDirents(out, buf[:n]); err != nil {
			return nil, &fs.PathError{Op: "readdirent", Path: dir, Err: err}
		}
	}
}

// parseDirents appends the entries of a getdents64 buffer (struct linux_dirent64:
// ino u64, off i64, reclen u16, type u8, NUL-terminated name), skipping "." and "..".
func parseDirents(out []rawDirent, b []byte) ([]rawDirent, error) {
	const nameOff = 19
	for len(b) > 0 {
		if len(b) < nameOff {
			return out, errors.New("short dirent record")
		}
		reclen := int(binary.NativeEndian.Uint16(b[16:18]))
		if reclen < nameOff || reclen > len(b) {
			return out, fmt.Errorf("dirent record length %d out of range", reclen)
		}
		typ, name := b[18], b[nameOff:reclen]
		b = b[reclen:]
		if i := bytes.IndexByte(name, 0); i >= 0 {
			name = name[:i]
		}
		if string(name) == "." || string(name) == ".." || len(name) == 0 {
			continue
		}
		de := rawDirent{name: string(name), typeKnown: true}
		switch typ {
		case unix.DT_REG:
		case unix.DT_DIR:
			de.mode = fs.ModeDir
		case unix.DT_LNK:
			de.mode = fs.ModeSymlink
		case unix.DT_UNKNOWN:
			de.typeKnown = false
		default:
			de.mode = fs.ModeIrregular
		}
		out = append(out, de)
	}
	return out, nil
}
