package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/lancectx/lancectx/objstore"
)

// fixtureStore is objstore.FileStore with writes that skip fsync. The 10,000-version
// fixture costs ~5 fsyncs per commit (data file, transaction, manifest, hint, parent
// directories), which on this class of VM is most of ~50 ms per version; the fixture needs
// no durability, only the same bytes and names a durable write would leave. Reads, listing
// and deletes are the FileStore's own. The measured writes never use it.
type fixtureStore struct {
	*objstore.FileStore
}

func newFixtureStore(root string) (*fixtureStore, error) {
	fsStore, err := objstore.NewFile(root)
	if err != nil {
		return nil, err
	}
	return &fixtureStore{FileStore: fsStore}, nil
}

var _ objstore.Store = (*fixtureStore)(nil)

// tempPrefix is FileStore's reserved prefix for in-flight uploads, so a crashed fixture
// run leaves files every lancectx listing ignores.
const tempPrefix = ".tmp-put-"

func (s *fixtureStore) writeTemp(ctx context.Context, key string, r io.Reader) (final, tmp string, err error) {
	if err := ctx.Err(); err != nil {
		return "", "", err
	}
	if err := objstore.ValidateKey(key); err != nil {
		return "", "", err
	}
	final = filepath.Join(s.Root(), filepath.FromSlash(key))
	if err := os.MkdirAll(filepath.Dir(final), 0o755); err != nil {
		return "", "", fmt.Errorf("fixture store: %w", err)
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	tmp = filepath.Join(filepath.Dir(final), tempPrefix+hex.EncodeToString(rnd[:]))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return "", "", fmt.Errorf("fixture store: %w", err)
	}
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp)
		return "", "", fmt.Errorf("fixture store: write %s: %w", key, err)
	}
	return final, tmp, nil
}

// Put writes key via a temp file and rename, without fsync.
func (s *fixtureStore) Put(ctx context.Context, key string, r io.Reader) error {
	final, tmp, err := s.writeTemp(ctx, key, r)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, final); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("fixture store: %w", err)
	}
	return nil
}

// PutIfAbsent hard-links a temp file to key, like FileStore, without fsync.
func (s *fixtureStore) PutIfAbsent(ctx context.Context, key string, r io.Reader) error {
	final, tmp, err := s.writeTemp(ctx, key, r)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, final); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%w: %s", objstore.ErrExists, key)
		}
		return fmt.Errorf("fixture store: %w", err)
	}
	return nil
}
