// Package objstore is the object-store seam of lancectx: a small interface with
// put-if-absent as a first-class operation (Lance commits depend on it), paginated
// listing, and batch delete with per-key results (maintenance depends on it).
//
// Keys are slash-separated, relative to the store's root, never start with "/" and
// never contain "." or ".." segments. All methods are safe for concurrent use.
// Stores are strongly consistent for read-after-write and list-after-write.
package objstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// Sentinel errors. Backends wrap them with %w so callers branch with errors.Is.
var (
	// ErrNotFound: the object does not exist.
	ErrNotFound = errors.New("objstore: object not found")
	// ErrExists: PutIfAbsent found the key already present (a lost commit race).
	ErrExists = errors.New("objstore: object already exists")
	// ErrInvalidKey: the key is empty, absolute, or escapes the root.
	ErrInvalidKey = errors.New("objstore: invalid key")
	// ErrInvalidRange: a range read asked for a negative offset (a negative length
	// means "to the end" and is valid).
	ErrInvalidRange = errors.New("objstore: invalid range")
	// ErrTransient: a failure worth retrying after a pause (5xx, timeouts, resets).
	// Backends wrap such errors with it; the retry wrapper retries only these.
	ErrTransient = errors.New("objstore: transient failure")
	// ErrThrottled: the service asked us to slow down (429, 503 SlowDown, ServerBusy).
	// It wraps ErrTransient, so errors.Is(err, ErrTransient) holds for it too.
	ErrThrottled = fmt.Errorf("%w: throttled", ErrTransient)
)

// IsTransient reports whether err is worth retrying.
func IsTransient(err error) bool { return errors.Is(err, ErrTransient) }

// Copier is implemented by stores that copy objects without moving the bytes through
// this process: a hard link on local disk, a server-side copy on S3, Azure and GCS.
type Copier interface {
	// Copy creates dst with the content of src. Like PutIfAbsent it fails with ErrExists
	// when dst is present (so a retried copy is detectably idempotent) and with
	// ErrNotFound when src is missing.
	Copy(ctx context.Context, src, dst string) error
}

// ObjectInfo describes one stored object.
type ObjectInfo struct {
	Key          string
	Size         int64
	LastModified time.Time
}

// ListOptions selects one page of a listing.
type ListOptions struct {
	// Prefix restricts the listing to keys starting with it (plain string prefix).
	Prefix string
	// StartAfter returns only keys and common prefixes strictly greater than it; used
	// for pagination. A common prefix equal to StartAfter is skipped with everything
	// below it, so a NextStartAfter that names a common prefix resumes after it.
	StartAfter string
	// Delimiter "/" groups keys below the next "/" after Prefix into CommonPrefixes.
	// Empty lists every key under Prefix recursively. No other delimiter is supported.
	Delimiter string
	// MaxKeys bounds Objects+CommonPrefixes of the page; <= 0 means the backend default:
	// DefaultMaxKeys on cloud stores (their page limit), LocalMaxKeys on stores where every
	// page costs a full directory read (local disk, memory).
	MaxKeys int
}

// ListPage is one page of a listing, in ascending lexical key order.
type ListPage struct {
	Objects []ObjectInfo
	// CommonPrefixes are the grouped "directories" (each ends with the delimiter).
	CommonPrefixes []string
	// NextStartAfter is set when more results may follow: pass it as StartAfter. It is
	// the last key or common prefix of this page.
	NextStartAfter string
}

// DefaultMaxKeys is the page size cloud stores use when ListOptions.MaxKeys is unset.
const DefaultMaxKeys = 1000

// LocalMaxKeys is the default page size of FileStore and MemStore. Each of their pages
// reads (and sorts) whole directories, so small pages would make listing n keys cost
// O(n^2 / page); a large page keeps a full listing O(n log n) with bounded memory.
const LocalMaxKeys = 100_000

// Reader is the read side of a store.
type Reader interface {
	// Get returns the whole object. The caller closes the reader.
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	// GetRange returns length bytes starting at off; length < 0 reads to the end.
	// A range past the end is truncated at the end of the object (possibly empty).
	GetRange(ctx context.Context, key string, off, length int64) (io.ReadCloser, error)
	// Stat returns the object's size and modification time, or ErrNotFound.
	Stat(ctx context.Context, key string) (ObjectInfo, error)
	// List returns one page of keys in ascending lexical order.
	List(ctx context.Context, opts ListOptions) (ListPage, error)
}

// Store is a read-write object store.
type Store interface {
	Reader
	// Put stores r under key, replacing any existing object. Readers observe either the
	// old or the new object, never a partial one.
	Put(ctx context.Context, key string, r io.Reader) error
	// PutIfAbsent stores r under key only if no object exists there, atomically: of
	// concurrent callers for one key exactly one succeeds, the others get ErrExists.
	PutIfAbsent(ctx context.Context, key string, r io.Reader) error
	// Delete removes key. A missing object is not an error.
	Delete(ctx context.Context, key string) error
	// DeleteBatch removes keys using the backend's batch API where it has one. Missing
	// objects are not errors. If some keys fail, the error is a *DeleteBatchError naming
	// them and every other key was deleted; any other error means nothing is known.
	DeleteBatch(ctx context.Context, keys []string) error
	// Close releases resources held by the store.
	Close() error
}

// DeleteBatchError reports the keys a DeleteBatch could not delete.
type DeleteBatchError struct {
	// Failed maps each failed key to its error.
	Failed map[string]error
}

func (e *DeleteBatchError) Error() string {
	keys := make([]string, 0, len(e.Failed))
	for k := range e.Failed {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	fmt.Fprintf(&b, "objstore: %d of batch delete failed", len(keys))
	for i, k := range keys {
		if i == 3 {
			fmt.Fprintf(&b, "; and %d more", len(keys)-3)
			break
		}
		fmt.Fprintf(&b, "; %s: %v", k, e.Failed[k])
	}
	return b.String()
}

// ValidateKey reports whether key is usable: non-empty, relative, no empty, "." or ".."
// segments, no NUL or backslash.
func ValidateKey(key string) error {
	if key == "" || strings.HasPrefix(key, "/") || strings.ContainsAny(key, "\x00\\") {
		return fmt.Errorf("%w: %q", ErrInvalidKey, key)
	}
	for _, seg := range strings.Split(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("%w: %q", ErrInvalidKey, key)
		}
	}
	return nil
}
