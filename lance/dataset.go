package lance

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/lancectx/lancectx/lance/format/tablepb"
	"github.com/lancectx/lancectx/lance/schema"
	"github.com/lancectx/lancectx/objstore"
)

// Errors callers branch on.
var (
	// ErrDatasetNotFound: the location holds no committed manifest.
	ErrDatasetNotFound = errors.New("lance: dataset not found")
	// ErrDatasetExists: Create found a dataset already there.
	ErrDatasetExists = errors.New("lance: dataset already exists")
	// ErrVersionNotFound: the requested version (or tag) does not exist.
	ErrVersionNotFound = errors.New("lance: version not found")
	// ErrUnsupported: the dataset uses a feature lancectx does not implement.
	ErrUnsupported = errors.New("lance: unsupported")
)

// Dataset is one version of a Lance dataset. It is immutable and safe for concurrent use.
type Dataset struct {
	store       objstore.Store
	uri         string
	mf          *manifestFile
	schema      *schema.Schema
	manifestKey string
	manifestLen int64

	// The stable row id index (rowIDIndex), built on first use.
	ridOnce sync.Once
	rid     *rowIDIndex
	ridErr  error

	// lookupPlans holds, per key cache scope and column, the fragments LookupKey
	// searches (opened once per version, not once per lookup): *lookupPlan.
	lookupPlans sync.Map

	// vecIndices holds the vector index segments VectorSearch opened, by index uuid:
	// *vecindex.Index (their files never change, so a version opens each once).
	vecIndices sync.Map

	// frags holds the fragments takes and key lookups read, by fragment id:
	// *fragmentReader, whose data file Readers keep their footers, column metadata
	// and chunk tables. Opened per take, every take of a search re-read them: a
	// round trip for the footer and one for the chunk tables before the rows' own.
	frags sync.Map
}

// fragment returns the reader of frag (a fragment of this version), opened once.
func (d *Dataset) fragment(frag *tablepb.DataFragment) (*fragmentReader, error) {
	if v, ok := d.frags.Load(frag.GetId()); ok {
		return v.(*fragmentReader), nil
	}
	fr, err := openFragment(frag)
	if err != nil {
		return nil, err
	}
	v, _ := d.frags.LoadOrStore(frag.GetId(), fr)
	return v.(*fragmentReader), nil
}

// Open opens the latest version of the dataset at uri (file:// path, plain path, mem://).
func Open(ctx context.Context, uri string) (*Dataset, error) {
	st, err := objstore.Open(ctx, uri)
	if err != nil {
		return nil, err
	}
	ds, err := OpenStore(ctx, st)
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	ds.uri = uri
	return ds, nil
}

// OpenStore opens the latest version of the dataset rooted at st (its keys are
// "_versions/...", "data/...").
func OpenStore(ctx context.Context, st objstore.Store) (*Dataset, error) {
	key, _, err := latestManifestKey(ctx, st)
	if err != nil {
		return nil, err
	}
	return loadDataset(ctx, st, key)
}

// URI is the location the dataset was opened from (empty when opened from a store).
func (d *Dataset) URI() string { return d.uri }

// Store is the object store rooted at the dataset directory.
func (d *Dataset) Store() objstore.Store { return d.store }

// Version is this snapshot's version number (the first version is 1).
func (d *Dataset) Version() uint64 { return d.mf.Manifest.GetVersion() }

// Schema is the table schema of this version.
func (d *Dataset) Schema() *schema.Schema { return d.schema }

// Timestamp is the commit time of this version.
func (d *Dataset) Timestamp() time.Time { return manifestTime(d.mf.Manifest) }

// Manifest returns the decoded manifest of this version. Callers must not modify it.
func (d *Dataset) Manifest() *tablepb.Manifest { return d.mf.Manifest }

// Transaction returns the transaction that produced this version, nil if the writer
// recorded none inline.
func (d *Dataset) Transaction() *tablepb.Transaction { return d.mf.Transaction }

// Fragments returns the fragments of this version. Callers must not modify them.
func (d *Dataset) Fragments() []*tablepb.DataFragment { return d.mf.Manifest.GetFragments() }

// Config returns a copy of the table config (manifest field 16).
func (d *Dataset) Config() map[string]string { return copyMap(d.mf.Manifest.GetConfig()) }

// TableMetadata returns a copy of the table metadata (manifest field 19).
func (d *Dataset) TableMetadata() map[string]string {
	return copyMap(d.mf.Manifest.GetTableMetadata())
}

// DataStorageVersion is the Lance data file version of the dataset, e.g. "2.0".
func (d *Dataset) DataStorageVersion() string {
	if f := d.mf.Manifest.GetDataFormat(); f != nil {
		return f.GetVersion()
	}
	return ""
}

// CountRows returns the number of visible rows (physical rows minus deleted rows).
func (d *Dataset) CountRows() int64 {
	var n int64
	for _, f := range d.Fragments() {
		n += int64(f.GetPhysicalRows()) - int64(f.GetDeletionFile().GetNumDeletedRows())
	}
	return n
}

// Latest returns the newest version of the dataset (possibly d itself).
func (d *Dataset) Latest(ctx context.Context) (*Dataset, error) {
	key, v, err := latestManifestKey(ctx, d.store)
	if err != nil {
		return nil, err
	}
	if v == d.Version() {
		return d, nil
	}
	return d.withURI(loadDataset(ctx, d.store, key))
}

// Checkout returns the given version of the dataset.
func (d *Dataset) Checkout(ctx context.Context, version uint64) (*Dataset, error) {
	if version == d.Version() {
		return d, nil
	}
	return d.withURI(checkoutVersion(ctx, d.store, version))
}

func (d *Dataset) withURI(ds *Dataset, err error) (*Dataset, error) {
	if err != nil {
		return nil, err
	}
	ds.uri = d.uri
	return ds, nil
}

func checkoutVersion(ctx context.Context, st objstore.Store, version uint64) (*Dataset, error) {
	if version == 0 {
		return nil, fmt.Errorf("%w: version 0", ErrVersionNotFound)
	}
	ds, err := loadDataset(ctx, st, manifestKeyV2(version))
	if errors.Is(err, objstore.ErrNotFound) {
		ds, err = loadDataset(ctx, st, manifestKeyV1(version))
	}
	if errors.Is(err, objstore.ErrNotFound) {
		return nil, fmt.Errorf("%w: version %d", ErrVersionNotFound, version)
	}
	return ds, err
}

// loadDataset reads and validates one manifest file.
func loadDataset(ctx context.Context, st objstore.Store, key string) (*Dataset, error) {
	buf, err := objstore.ReadAll(ctx, st, key)
	if err != nil {
		return nil, fmt.Errorf("read manifest %s: %w", key, err)
	}
	mf, err := decodeManifest(key, buf)
	if err != nil {
		return nil, err
	}
	if err := checkReaderFlags(mf.Manifest); err != nil {
		return nil, err
	}
	sch, err := schema.FromProto(mf.Manifest.GetFields(), mf.Manifest.GetSchemaMetadata())
	if errors.Is(err, schema.ErrUnsupportedType) {
		// A valid table with a type lancectx does not model (a sorted-keys map, an
		// extension type Lance added later...): not corruption.
		return nil, fmt.Errorf("%w: %s: %w", ErrUnsupported, key, err)
	}
	if err != nil {
		return nil, corruptf(key, "schema: %v", err)
	}
	return &Dataset{store: st, mf: mf, schema: sch, manifestKey: key, manifestLen: int64(len(buf))}, nil
}

// VersionInfo describes one committed version.
type VersionInfo struct {
	Version   uint64    `json:"version"`
	Timestamp time.Time `json:"timestamp"`
	// Key is the manifest object key relative to the dataset root.
	Key string `json:"-"`
	// Size of the manifest object in bytes.
	Size int64 `json:"manifest_size"`
	// Operation names the transaction that produced the version ("append", "delete", ...).
	Operation string            `json:"operation,omitempty"`
	Metadata  map[string]string `json:"metadata,omitempty"`
	// Rows (live: physical less deleted) and Fragments of the version, read from the
	// same manifest, so a history of the table's size costs no further reads.
	Rows      int64 `json:"rows"`
	Fragments int   `json:"fragments"`
}

// Versions lists every committed version in ascending order, reading each manifest for
// its commit timestamp (with bounded concurrency).
func (d *Dataset) Versions(ctx context.Context) ([]VersionInfo, error) {
	refs, err := listManifests(ctx, d.store)
	if err != nil {
		return nil, err
	}
	out := make([]VersionInfo, len(refs))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for i, r := range refs {
		g.Go(func() error {
			buf, err := objstore.ReadAll(gctx, d.store, r.Key)
			if errors.Is(err, objstore.ErrNotFound) {
				return nil // removed by a concurrent cleanup
			}
			if err != nil {
				return err
			}
			mf, err := decodeManifest(r.Key, buf)
			if err != nil {
				return err
			}
			out[i] = VersionInfo{
				Version: r.Version, Timestamp: manifestTime(mf.Manifest), Key: r.Key,
				Size: int64(len(buf)), Operation: operationName(mf.Transaction),
				Fragments: len(mf.Manifest.GetFragments()),
			}
			for _, f := range mf.Manifest.GetFragments() {
				out[i].Rows += int64(f.GetPhysicalRows()) - int64(f.GetDeletionFile().GetNumDeletedRows())
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	kept := out[:0]
	for _, v := range out {
		if v.Version != 0 {
			kept = append(kept, v)
		}
	}
	return kept, nil
}

// manifestRef is a manifest known from a listing, without reading it.
type manifestRef struct {
	Version      uint64
	Key          string
	Size         int64
	LastModified time.Time
	Scheme       namingScheme
}

// listManifests lists every committed manifest, ascending by version.
func listManifests(ctx context.Context, st objstore.Reader) ([]manifestRef, error) {
	var refs []manifestRef
	var scheme namingScheme
	err := objstore.Walk(ctx, st, objstore.ListOptions{Prefix: versionsDir, Delimiter: "/"}, func(o objstore.ObjectInfo) error {
		v, s, ok := parseManifestName(o.Key[len(versionsDir):])
		if !ok {
			return nil
		}
		if scheme == namingUnknown {
			scheme = s
		} else if s != scheme {
			return fmt.Errorf("%w: _versions mixes V1 and V2 manifest names", ErrUnsupported)
		}
		refs = append(refs, manifestRef{Version: v, Key: o.Key, Size: o.Size, LastModified: o.LastModified, Scheme: s})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list versions: %w", err)
	}
	sort.Slice(refs, func(i, j int) bool { return refs[i].Version < refs[j].Version })
	return refs, nil
}

// latestManifestKey finds the newest manifest. With V2 names the newest sorts first, so
// a first page of one key answers whatever the number of versions (a page of 100 cost
// 100 stats on a local disk); V1 names need the full listing, in pages of 1,000.
func latestManifestKey(ctx context.Context, st objstore.Reader) (string, uint64, error) {
	opts := objstore.ListOptions{Prefix: versionsDir, Delimiter: "/", MaxKeys: 1}
	var best manifestRef
	for {
		page, err := st.List(ctx, opts)
		if err != nil {
			return "", 0, fmt.Errorf("list versions: %w", err)
		}
		for _, o := range page.Objects {
			v, s, ok := parseManifestName(o.Key[len(versionsDir):])
			if !ok {
				continue
			}
			if s == namingV2 {
				if best.Scheme == namingV1 {
					return "", 0, fmt.Errorf("%w: _versions mixes V1 and V2 manifest names", ErrUnsupported)
				}
				return o.Key, v, nil
			}
			if v > best.Version {
				best = manifestRef{Version: v, Key: o.Key, Scheme: s}
			}
		}
		if page.NextStartAfter == "" {
			break
		}
		opts.StartAfter, opts.MaxKeys = page.NextStartAfter, 1000
	}
	if best.Key == "" {
		return "", 0, ErrDatasetNotFound
	}
	return best.Key, best.Version, nil
}

func manifestTime(m *tablepb.Manifest) time.Time {
	if ts := m.GetTimestamp(); ts != nil {
		return ts.AsTime()
	}
	return time.Unix(0, 0).UTC()
}

func copyMap[V any](m map[string]V) map[string]V {
	out := make(map[string]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// CountVersions counts the committed manifests of the dataset at st from the listing
// alone (no manifest is read).
func CountVersions(ctx context.Context, st objstore.Reader) (int, error) {
	refs, err := listManifests(ctx, st)
	return len(refs), err
}

// LatestVersion returns the newest committed version of the dataset at st from the
// listing alone (no manifest is read), or ErrDatasetNotFound.
func LatestVersion(ctx context.Context, st objstore.Reader) (uint64, error) {
	_, v, err := latestManifestKey(ctx, st)
	return v, err
}
