// Package registry records which rollout stores exist: one small JSON object per store,
// `_registry/{kind}/{name}.json` under the data directory, created with put-if-absent.
//
// Why objects and not a Lance table or etcd: a Lance registry gains a version per create
// and delete (the version churn that made the reference system's _stats table crawl), and
// etcd holds coordination state only — losing etcd must not lose the list of datasets.
// Objects are durable with the data, listable in pages, and a create race has exactly one
// winner.
//
// # Incarnations
//
// A name can be deleted and created again. Each creation is an incarnation with an id of
// its own, kept in the entry and in the base table's config (wal.IncarnationKey); everything
// that writes into a store (WAL shards, merges) records the incarnation it writes for and
// checks it, so a process still holding the deleted store can never write into the new
// one. Delete leaves a tombstone with the first version the next incarnation may use:
// the new base table starts past every version the deleted one reached, so a late commit
// of an old handle lands below the new history, where no reader looks, and lance refuses
// the rebase (see lance.WriteOptions.FirstVersion and lance.ErrDatasetReplaced).
package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
)

// VersionGap is how far past the deleted store's last version a re-created store's base
// table starts. A writer still holding the old store can commit a few versions after the
// delete read the last one (each needs files the delete removes, so it stops soon); the
// gap is far larger than any such run.
const VersionGap = 1 << 20

// Errors callers branch on.
var (
	ErrNotFound = errors.New("registry: store not found")
	ErrExists   = errors.New("registry: store already exists")
)

// Entry describes one store.
type Entry struct {
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	Dataset string `json:"dataset"` // dataset directory relative to the data dir
	// Incarnation identifies this creation of the store (empty for stores created before
	// incarnations existed; they behave as one incarnation named "").
	Incarnation string `json:"incarnation,omitempty"`
	// FirstVersion is the version the base table is created at: 1 for a name never used,
	// past the deleted incarnation's history otherwise.
	FirstVersion uint64    `json:"first_version,omitempty"`
	CreatedAt    time.Time `json:"created_at"`
	// Adopted is set for a store that was not created by lancectx but taken over with
	// its dataset and history (lancectx adopt): see Adopt.
	Adopted *Adoption `json:"adopted,omitempty"`
}

// Adoption records where an adopted store came from.
type Adoption struct {
	// Source names the system that created the dataset (e.g. "lance-context").
	Source string `json:"source"`
	// FromVersion is the base table version found when the adoption started; the
	// versions up to it are the other system's history.
	FromVersion uint64 `json:"from_version"`
	// Generations and Rows are what the adoption merged from the other system's
	// write-ahead log.
	Generations int   `json:"generations"`
	Rows        int64 `json:"rows"`
}

// Tombstone remembers a deleted incarnation of a name.
type Tombstone struct {
	Name        string `json:"name"`
	Kind        string `json:"kind"`
	Incarnation string `json:"incarnation,omitempty"`
	// NextVersion is the version a new incarnation's base table starts at.
	NextVersion uint64    `json:"next_version"`
	DeletedAt   time.Time `json:"deleted_at"`
}

// Registry is the set of stores of one kind (e.g. "rollout"). Safe for concurrent use.
type Registry struct {
	st   objstore.Store
	kind string
	// decoded holds, per name, the bytes of the entry last read and what they
	// decoded to (*decodedEntry). Get reads the object every time (an entry must be
	// confirmed on storage: a writer checks its incarnation once per WAL entry), but
	// decodes it only when the bytes changed.
	decoded sync.Map
	// bufs recycles Get's read buffers (*bytes.Buffer).
	bufs sync.Pool
}

// decodedEntry is an entry's bytes and their decoding.
type decodedEntry struct {
	raw []byte
	e   Entry
}

// New returns the registry of kind in the data directory st.
func New(st objstore.Store, kind string) *Registry { return &Registry{st: st, kind: kind} }

// DatasetDir is the dataset directory of a store: "{name}.{kind}.lance".
func (r *Registry) DatasetDir(name string) string { return name + "." + r.kind + ".lance" }

func (r *Registry) prefix() string { return "_registry/" + r.kind + "/" }

func (r *Registry) key(name string) string { return r.prefix() + name + ".json" }

// tombKey is outside the entries' listing (a "folder" Names does not descend into; names
// cannot contain '/').
func (r *Registry) tombKey(name string) string { return r.prefix() + "_deleted/" + name + ".json" }

// Create records a new incarnation of a store. Exactly one of concurrent creators of a
// name succeeds; the others get ErrExists. The entry's FirstVersion continues past a
// deleted predecessor's history (see Tombstone).
func (r *Registry) Create(ctx context.Context, name string, now time.Time) (Entry, error) {
	first := uint64(1)
	t, ok, err := r.Tombstone(ctx, name)
	if err != nil {
		return Entry{}, err
	}
	if ok {
		first = max(t.NextVersion, 1)
	}
	inc, err := uuid.NewV7()
	if err != nil {
		return Entry{}, fmt.Errorf("registry: new incarnation id: %w", err)
	}
	e := Entry{Name: name, Kind: r.kind, Dataset: r.DatasetDir(name), Incarnation: inc.String(), FirstVersion: first,
		CreatedAt: now.UTC()}
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

// Adopt records an existing dataset as a store: an entry with the given incarnation,
// which the caller has already written into the dataset's config (wal.IncarnationKey),
// so the dataset and its history are kept as they are. Exactly one of concurrent
// adopters (or creators) of a name succeeds; the others get ErrExists.
func (r *Registry) Adopt(ctx context.Context, name, incarnation string, firstVersion uint64, a Adoption, now time.Time) (Entry, error) {
	if incarnation == "" {
		return Entry{}, fmt.Errorf("registry: adopt %s: an adopted store needs an incarnation", name)
	}
	e := Entry{Name: name, Kind: r.kind, Dataset: r.DatasetDir(name), Incarnation: incarnation, FirstVersion: max(firstVersion, 1),
		CreatedAt: now.UTC(), Adopted: &a}
	body, err := json.Marshal(e)
	if err != nil {
		return Entry{}, err
	}
	err = r.st.PutIfAbsent(ctx, r.key(name), bytes.NewReader(body))
	if errors.Is(err, objstore.ErrExists) {
		return Entry{}, fmt.Errorf("%w: %s", ErrExists, name)
	}
	if err != nil {
		return Entry{}, fmt.Errorf("registry: adopt %s: %w", name, err)
	}
	return e, nil
}

// Get returns the entry of name or ErrNotFound. It reads the entry from storage every
// time; the JSON is decoded again only when its bytes differ from the last read's.
func (r *Registry) Get(ctx context.Context, name string) (Entry, error) {
	key := r.key(name)
	b, _ := r.bufs.Get().(*bytes.Buffer)
	if b == nil {
		b = new(bytes.Buffer)
	}
	defer func() {
		if b.Cap() <= maxPooledEntry {
			b.Reset()
			r.bufs.Put(b)
		}
	}()
	err := readInto(ctx, r.st, key, b)
	if errors.Is(err, objstore.ErrNotFound) {
		r.decoded.Delete(name)
		return Entry{}, fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	if err != nil {
		return Entry{}, fmt.Errorf("registry: get %s: %w", name, err)
	}
	if v, ok := r.decoded.Load(name); ok {
		if d := v.(*decodedEntry); bytes.Equal(d.raw, b.Bytes()) {
			return d.e.clone(), nil
		}
	}
	var e Entry
	if err := json.Unmarshal(b.Bytes(), &e); err != nil {
		return Entry{}, fmt.Errorf("registry: decode %s: %w", key, err)
	}
	r.decoded.Store(name, &decodedEntry{raw: bytes.Clone(b.Bytes()), e: e.clone()})
	return e, nil
}

// maxPooledEntry bounds the read buffers Get keeps (an entry is a few hundred bytes).
const maxPooledEntry = 64 << 10

// clone returns e with its own copy of what it points to, so a caller that changes
// the entry it got does not change the cached one.
func (e Entry) clone() Entry {
	if e.Adopted != nil {
		a := *e.Adopted
		e.Adopted = &a
	}
	return e
}

// readInto reads the object key into b (empty).
func readInto(ctx context.Context, st objstore.Reader, key string, b *bytes.Buffer) error {
	rc, err := st.Get(ctx, key)
	if err != nil {
		return err
	}
	defer rc.Close()
	if _, err := b.ReadFrom(rc); err != nil {
		return fmt.Errorf("objstore: read %s: %w", key, err)
	}
	return nil
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

// Tombstone returns what the registry remembers of the last deleted incarnation of name
// (ok false: none).
func (r *Registry) Tombstone(ctx context.Context, name string) (Tombstone, bool, error) {
	buf, err := objstore.ReadAll(ctx, r.st, r.tombKey(name))
	if errors.Is(err, objstore.ErrNotFound) {
		return Tombstone{}, false, nil
	}
	if err != nil {
		return Tombstone{}, false, fmt.Errorf("registry: get tombstone of %s: %w", name, err)
	}
	var t Tombstone
	if err := json.Unmarshal(buf, &t); err != nil {
		return Tombstone{}, false, fmt.Errorf("registry: decode %s: %w", r.tombKey(name), err)
	}
	return t, true, nil
}

// Delete records a tombstone, removes the store's dataset (every object under its
// directory), then removes its entry. The tombstone goes first, so that a delete
// interrupted half-way (and repeated) never forgets how far the history went; the entry
// goes last, so the name is free for a new incarnation only once the data is gone.
func (r *Registry) Delete(ctx context.Context, name string) error {
	e, err := r.Get(ctx, name)
	if err != nil {
		return err
	}
	// The last version before the data goes: a writer still holding the store may commit
	// a little past it, and the next incarnation starts far past that.
	last, err := lance.LatestVersion(ctx, objstore.Prefixed(r.st, e.Dataset))
	if err != nil && !errors.Is(err, lance.ErrDatasetNotFound) {
		return fmt.Errorf("registry: read the last version of %s: %w", name, err)
	}
	t := Tombstone{Name: name, Kind: r.kind, Incarnation: e.Incarnation, NextVersion: max(last, e.FirstVersion) + VersionGap,
		DeletedAt: time.Now().UTC()}
	if old, ok, err := r.Tombstone(ctx, name); err != nil {
		return err
	} else if ok && old.Incarnation == e.Incarnation {
		t.NextVersion = max(t.NextVersion, old.NextVersion) // a repeated delete: the history may be gone already
	}
	body, err := json.Marshal(t)
	if err != nil {
		return err
	}
	if err := r.st.Put(ctx, r.tombKey(name), bytes.NewReader(body)); err != nil {
		return fmt.Errorf("registry: record the tombstone of %s: %w", name, err)
	}
	if err := r.Purge(ctx, name); err != nil {
		return err
	}
	if err := r.st.Delete(ctx, r.key(name)); err != nil {
		return fmt.Errorf("registry: delete entry %s: %w", name, err)
	}
	r.decoded.Delete(name)
	return nil
}

// Purge deletes every object under the store's dataset directory (not its entry): a
// delete's data, or what a writer of a deleted incarnation left at the place after it.
func (r *Registry) Purge(ctx context.Context, name string) error {
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
	return nil
}
