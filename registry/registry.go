// Package registry records which rollout stores exist: one small JSON object per store,
// `_registry/{kind}/{name}.json` under the data directory, created with put-if-absent.
//
// Why objects and not a Lance table or etcd: a Lance registry gains a version per create
// and delete (the version churn that made the reference system's _stats table crawl), and
// etcd holds coordination state only — losing etcd must not lose the list of datasets.
// Objects are durable with the data, listable in pages, and a create race has exactly one
// winner.
package registry

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

// Errors callers branch on.
var (
	ErrNotFound = errors.New("registry: store not found")
	ErrExists   = errors.New("registry: store already exists")
)

// Entry describes one store.
type Entry struct {
	Name      string    `json:"name"`
	Kind      string    `json:"kind"`
	Dataset   string    `json:"dataset"` // dataset directory relative to the data dir
	CreatedAt time.Time `json:"created_at"`
}

// Registry is the set of stores of one kind (e.g. "rollout"). Safe for concurrent use.
type Registry struct {
	st   objstore.Store
	kind string
}

// New returns the registry of kind in the data directory st.
func New(st objstore.Store, kind string) *Registry { return &Registry{st: st, kind: kind} }

// DatasetDir is the dataset directory of a store: "{name}.{kind}.lance".
func (r *Registry) DatasetDir(name string) string { return name + "." + r.kind + ".lance" }

func (r *Registry) prefix() string { return "_registry/" + r.kind + "/" }

func (r *Registry) key(name string) string { return r.prefix() + name + ".json" }

// Create records a new store. Exactly one of concurrent creators of a name succeeds; the
// others get ErrExists.
func (r *Registry) Create(ctx context.Context, name string, now time.Time) (Entry, error) {
	e := Entry{Name: name, Kind: r.kind, Dataset: r.DatasetDir(name), CreatedAt: now.UTC()}
	body, err := json.Marshal(e)
	if err != nil {
		return Entry{}, err
	}
	err = r.st.PutIfAbsent(ctx, r.key(name), bytes.NewReader(body))
	if errors.Is(err, objstore.ErrExists) {
		return Entry{}, fmt.Errorf("%w: %s", ErrExists, name)
	}
	if err != nil {
		return Entry{}, fmt.Errorf("registry: create %s: %w", name, err)
	}
	return e, nil
}

// Get returns the entry of name or ErrNotFound.
func (r *Registry) Get(ctx context.Context, name string) (Entry, error) {
	buf, err := objstore.ReadAll(ctx, r.st, r.key(name))
	if errors.Is(err, objstore.ErrNotFound) {
		return Entry{}, fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	if err != nil {
		return Entry{}, fmt.Errorf("registry: get %s: %w", name, err)
	}
	var e Entry
	if err := json.Unmarshal(buf, &e); err != nil {
		return Entry{}, fmt.Errorf("registry: decode %s: %w", r.key(name), err)
	}
	return e, nil
}

// Names lists store names in ascending order, reading only the listing (no entry reads).
func (r *Registry) Names(ctx context.Context) ([]string, error) {
	var out []string
	err := objstore.Walk(ctx, r.st, objstore.ListOptions{Prefix: r.prefix(), Delimiter: "/"}, func(o objstore.ObjectInfo) error {
		if name, ok := strings.CutSuffix(strings.TrimPrefix(o.Key, r.prefix()), ".json"); ok {
			out = append(out, name)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("registry: list: %w", err)
	}
	return out, nil
}

// Delete removes the store's dataset (every object under its directory), then its entry.
// The entry goes last, so a delete interrupted half-way is retried by deleting again.
func (r *Registry) Delete(ctx context.Context, name string) error {
	if _, err := r.Get(ctx, name); err != nil {
		return err
	}
	var keys []string
	err := objstore.Walk(ctx, r.st, objstore.ListOptions{Prefix: r.DatasetDir(name) + "/"}, func(o objstore.ObjectInfo) error {
		keys = append(keys, o.Key)
		return nil
	})
	if err != nil {
		return fmt.Errorf("registry: list %s: %w", name, err)
	}
	if err := objstore.DeleteAll(ctx, r.st, keys, 1000); err != nil {
		return fmt.Errorf("registry: delete data of %s: %w", name, err)
	}
	if err := r.st.Delete(ctx, r.key(name)); err != nil {
		return fmt.Errorf("registry: delete entry %s: %w", name, err)
	}
	return nil
}
