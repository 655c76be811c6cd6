package lance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/lancectx/lancectx/objstore"
)

// Tag errors.
var (
	// ErrTagNotFound: no tag of that name.
	ErrTagNotFound = errors.New("lance: tag not found")
	// ErrTagExists: CreateTag found the name taken.
	ErrTagExists = errors.New("lance: tag already exists")
	// ErrInvalidTag: the name breaks Lance's tag naming rules.
	ErrInvalidTag = errors.New("lance: invalid tag name")
)

// Tag is the content of _refs/tags/{name}.json as LanceDB 0.31 writes it.
type Tag struct {
	Branch       *string           `json:"branch"`
	Version      uint64            `json:"version"`
	CreatedAt    time.Time         `json:"createdAt"`
	UpdatedAt    time.Time         `json:"updatedAt"`
	ManifestSize int64             `json:"manifestSize"`
	Metadata     map[string]string `json:"metadata"`
}

// validTagName: alphanumerics, '.', '-', '_'; not starting or ending with '.', no "..",
// not ending in ".lock".
func validTagName(name string) error {
	if name == "" || strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") ||
		strings.Contains(name, "..") || strings.HasSuffix(name, ".lock") || len(name) > 255 {
		return fmt.Errorf("%w: %q", ErrInvalidTag, name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_') {
			return fmt.Errorf("%w: %q", ErrInvalidTag, name)
		}
	}
	return nil
}

// CreateTag points a new tag at an existing version. Tagged versions survive cleanup.
func (d *Dataset) CreateTag(ctx context.Context, name string, version uint64) error {
	if err := validTagName(name); err != nil {
		return err
	}
	v, err := checkoutVersion(ctx, d.store, version)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	body, err := json.Marshal(Tag{Version: version, CreatedAt: now, UpdatedAt: now, ManifestSize: v.manifestLen, Metadata: map[string]string{}})
	if err != nil {
		return err
	}
	err = d.store.PutIfAbsent(ctx, tagsDir+name+".json", bytes.NewReader(body))
	if errors.Is(err, objstore.ErrExists) {
		return fmt.Errorf("%w: %q", ErrTagExists, name)
	}
	return err
}

// DeleteTag removes a tag.
func (d *Dataset) DeleteTag(ctx context.Context, name string) error {
	if err := validTagName(name); err != nil {
		return err
	}
	if _, err := d.store.Stat(ctx, tagsDir+name+".json"); errors.Is(err, objstore.ErrNotFound) {
		return fmt.Errorf("%w: %q", ErrTagNotFound, name)
	}
	return d.store.Delete(ctx, tagsDir+name+".json")
}

// Tags lists every tag by name.
func (d *Dataset) Tags(ctx context.Context) (map[string]Tag, error) {
	return listTags(ctx, d.store)
}

func listTags(ctx context.Context, st objstore.Reader) (map[string]Tag, error) {
	out := map[string]Tag{}
	err := objstore.Walk(ctx, st, objstore.ListOptions{Prefix: tagsDir, Delimiter: "/"}, func(o objstore.ObjectInfo) error {
		name, ok := strings.CutSuffix(strings.TrimPrefix(o.Key, tagsDir), ".json")
		if !ok {
			return nil
		}
		t, err := readTag(ctx, st, name)
		if errors.Is(err, ErrTagNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		out[name] = t
		return nil
	})
	return out, err
}

func readTag(ctx context.Context, st objstore.Reader, name string) (Tag, error) {
	buf, err := objstore.ReadAll(ctx, st, tagsDir+name+".json")
	if errors.Is(err, objstore.ErrNotFound) {
		return Tag{}, fmt.Errorf("%w: %q", ErrTagNotFound, name)
	}
	if err != nil {
		return Tag{}, err
	}
	var t Tag
	if err := json.Unmarshal(buf, &t); err != nil {
		return Tag{}, corruptf(tagsDir+name+".json", "decode tag: %v", err)
	}
	return t, nil
}

// CheckoutTag returns the version a tag points at.
func (d *Dataset) CheckoutTag(ctx context.Context, name string) (*Dataset, error) {
	if err := validTagName(name); err != nil {
		return nil, err
	}
	t, err := readTag(ctx, d.store, name)
	if err != nil {
		return nil, err
	}
	if t.Branch != nil && *t.Branch != "" && *t.Branch != "main" {
		return nil, fmt.Errorf("%w: tag %q is on branch %q", ErrUnsupported, name, *t.Branch)
	}
	return d.Checkout(ctx, t.Version)
}
