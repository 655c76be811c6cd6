package lance

import (
	"context"
	"fmt"
	"sort"

	"google.golang.org/protobuf/proto"

	"github.com/lancectx/lancectx/lance/format/filepb"
	"github.com/lancectx/lancectx/lance/format/tablepb"
	"github.com/lancectx/lancectx/lance/schema"
	"github.com/lancectx/lancectx/objstore"
)

func schemaOf(m *tablepb.Manifest) (*schema.Schema, error) {
	return schema.FromProto(m.GetFields(), m.GetSchemaMetadata())
}

func cloneFragments(fs []*tablepb.DataFragment) []*tablepb.DataFragment {
	out := make([]*tablepb.DataFragment, len(fs))
	for i, f := range fs {
		out[i] = proto.Clone(f).(*tablepb.DataFragment)
	}
	return out
}

// assignIDs numbers new fragments after the highest id ever used in m.
func assignIDs(m *tablepb.Manifest, fs []*tablepb.DataFragment) []*tablepb.DataFragment {
	out := cloneFragments(fs)
	next := nextFragmentID(m)
	for _, f := range out {
		f.Id = next
		next++
	}
	return out
}

// appendOp adds fragments. It rebases over everything that keeps the table's identity.
type appendOp struct {
	fragments []*tablepb.DataFragment
}

func (o *appendOp) name() string { return "append" }

func (o *appendOp) fill(txn *tablepb.Transaction) {
	txn.Operation = &tablepb.Transaction_Append_{Append: &tablepb.Transaction_Append{Fragments: o.fragments}}
}

func (o *appendOp) apply(_ context.Context, _ objstore.Store, base *manifestFile) (*manifestFile, error) {
	if base == nil {
		return nil, fmt.Errorf("%w: append needs an existing dataset", ErrDatasetNotFound)
	}
	if err := checkStorageVersion(base.Manifest, o.fragments); err != nil {
		return nil, err
	}
	next := cloneBase(base)
	next.Manifest.Fragments = append(next.Manifest.Fragments, assignIDs(next.Manifest, o.fragments)...)
	return next, nil
}

// checkStorageVersion refuses new data files whose version is not the dataset's, as
// Lance does on every commit: a dataset's data files all have one version.
func checkStorageVersion(m *tablepb.Manifest, frags []*tablepb.DataFragment) error {
	want := manifestStorageVersion(m)
	for _, f := range frags {
		for _, df := range f.GetFiles() {
			if got := fileVersionString(df.GetFileMajorVersion(), df.GetFileMinorVersion()); got != want {
				return fmt.Errorf("%w: data file %s has version %s, the dataset's data storage version is %s", ErrStorageVersion, df.GetPath(), got, want)
			}
		}
	}
	return nil
}

func (o *appendOp) rebase(other *tablepb.Transaction) error {
	if isReplaceAll(other) {
		return fmt.Errorf("%w: the table was replaced", ErrConflict)
	}
	return nil
}

// overwriteOp replaces the table (also used to create it).
type overwriteOp struct {
	fragments     []*tablepb.DataFragment
	fields        []*filepb.Field
	schemaMeta    map[string][]byte
	configUpserts map[string]string
	storage       string // data storage version of the new files, e.g. "2.0"
}

func (o *overwriteOp) name() string { return "overwrite" }

func (o *overwriteOp) fill(txn *tablepb.Transaction) {
	txn.Operation = &tablepb.Transaction_Overwrite_{Overwrite: &tablepb.Transaction_Overwrite{
		Fragments: o.fragments, Schema: o.fields, SchemaMetadata: o.schemaMeta, ConfigUpsertValues: o.configUpserts,
	}}
}

func (o *overwriteOp) apply(_ context.Context, _ objstore.Store, base *manifestFile) (*manifestFile, error) {
	frags := cloneFragments(o.fragments)
	for i, f := range frags {
		f.Id = uint64(i) // Lance restarts fragment ids at 0 on overwrite
	}
	m := &tablepb.Manifest{}
	if base != nil {
		prev := base.Manifest
		m.MaxFragmentId = prev.MaxFragmentId
		m.Config = copyMap(prev.GetConfig())
		m.TableMetadata = copyMap(prev.GetTableMetadata())
		m.NextRowId = prev.GetNextRowId()
		m.BasePaths = prev.GetBasePaths()
		m.Branch = prev.Branch
	}
	m.Fields = o.fields
	m.SchemaMetadata = o.schemaMeta
	m.Fragments = frags
	m.DataFormat = &tablepb.Manifest_DataStorageFormat{FileFormat: "lance", Version: o.storage}
	if len(o.configUpserts) > 0 {
		if m.Config == nil {
			m.Config = map[string]string{}
		}
		for k, v := range o.configUpserts {
			m.Config[k] = v
		}
	}
	return &manifestFile{Manifest: m}, nil // indices do not survive an overwrite
}

func (o *overwriteOp) rebase(*tablepb.Transaction) error { return nil }

// deleteOp replaces fragments' deletion files and drops fully deleted fragments.
type deleteOp struct {
	updated   []*tablepb.DataFragment
	removed   []uint64
	predicate string
}

func (o *deleteOp) name() string { return "delete" }

func (o *deleteOp) fill(txn *tablepb.Transaction) {
	txn.Operation = &tablepb.Transaction_Delete_{Delete: &tablepb.Transaction_Delete{
		UpdatedFragments: o.updated, DeletedFragmentIds: o.removed, Predicate: o.predicate,
	}}
}

func (o *deleteOp) apply(_ context.Context, _ objstore.Store, base *manifestFile) (*manifestFile, error) {
	next := cloneBase(base)
	frags, err := replaceFragments(next.Manifest.Fragments, o.updated, o.removed)
	if err != nil {
		return nil, err
	}
	next.Manifest.Fragments = frags
	return next, nil
}

func (o *deleteOp) touched() map[uint64]bool {
	ids := map[uint64]bool{}
	for _, f := range o.updated {
		ids[f.GetId()] = true
	}
	for _, id := range o.removed {
		ids[id] = true
	}
	return ids
}

func (o *deleteOp) rebase(other *tablepb.Transaction) error {
	return rebaseDisjoint(o.touched(), other)
}

// replaceFragments swaps in updated fragments by id and drops removed ids, keeping order.
func replaceFragments(frags, updated []*tablepb.DataFragment, removed []uint64) ([]*tablepb.DataFragment, error) {
	byID := make(map[uint64]*tablepb.DataFragment, len(updated))
	for _, f := range updated {
		byID[f.GetId()] = f
	}
	drop := make(map[uint64]bool, len(removed))
	for _, id := range removed {
		drop[id] = true
	}
	out := frags[:0:0]
	seen := 0
	for _, f := range frags {
		if drop[f.GetId()] {
			seen++
			continue
		}
		if u, ok := byID[f.GetId()]; ok {
			out = append(out, proto.Clone(u).(*tablepb.DataFragment))
			seen++
			continue
		}
		out = append(out, f)
	}
	if seen != len(byID)+len(drop) {
		return nil, fmt.Errorf("%w: fragments to update are gone", errRetryOp)
	}
	return out, nil
}

// updateOp is a row update: old copies get deletion files (or their fragment is removed)
// and new copies are appended, all in one version. Merge-insert commits this way.
type updateOp struct {
	deleteOp
	added []*tablepb.DataFragment
}

func (o *updateOp) name() string { return "update" }

func (o *updateOp) fill(txn *tablepb.Transaction) {
	txn.Operation = &tablepb.Transaction_Update_{Update: &tablepb.Transaction_Update{
		RemovedFragmentIds: o.removed, UpdatedFragments: o.updated, NewFragments: o.added,
		UpdateMode: tablepb.Transaction_REWRITE_ROWS,
	}}
}

func (o *updateOp) apply(ctx context.Context, st objstore.Store, base *manifestFile) (*manifestFile, error) {
	if base != nil {
		if err := checkStorageVersion(base.Manifest, o.added); err != nil {
			return nil, err
		}
	}
	next, err := o.deleteOp.apply(ctx, st, base)
	if err != nil {
		return nil, err
	}
	next.Manifest.Fragments = append(next.Manifest.Fragments, assignIDs(next.Manifest, o.added)...)
	return next, nil
}

// rebase: an upsert must see every row that could carry one of its keys, so a concurrent
// commit that added rows (or touched our fragments) makes it recompute.
func (o *updateOp) rebase(other *tablepb.Transaction) error {
	if addsFragments(other) {
		return errRetryOp
	}
	return rebaseDisjoint(o.touched(), other)
}

// updateConfigOp edits config, table metadata and schema metadata with upsert/delete maps.
type updateConfigOp struct {
	config, tableMeta, schemaMeta *tablepb.Transaction_UpdateMap
}

func (o *updateConfigOp) name() string { return "update_config" }

func (o *updateConfigOp) fill(txn *tablepb.Transaction) {
	txn.Operation = &tablepb.Transaction_UpdateConfig_{UpdateConfig: &tablepb.Transaction_UpdateConfig{
		ConfigUpdates: o.config, TableMetadataUpdates: o.tableMeta, SchemaMetadataUpdates: o.schemaMeta,
	}}
}

func applyUpdateMap(m map[string]string, u *tablepb.Transaction_UpdateMap) map[string]string {
	if u == nil {
		return m
	}
	if u.GetReplace() || m == nil {
		m = map[string]string{}
	}
	for _, e := range u.GetUpdateEntries() {
		if e.Value == nil {
			delete(m, e.GetKey())
		} else {
			m[e.GetKey()] = e.GetValue()
		}
	}
	return m
}

func (o *updateConfigOp) apply(_ context.Context, _ objstore.Store, base *manifestFile) (*manifestFile, error) {
	next := cloneBase(base)
	m := next.Manifest
	m.Config = applyUpdateMap(m.Config, o.config)
	m.TableMetadata = applyUpdateMap(m.TableMetadata, o.tableMeta)
	if o.schemaMeta != nil {
		sm := map[string]string{}
		for k, v := range m.SchemaMetadata {
			sm[k] = string(v)
		}
		sm = applyUpdateMap(sm, o.schemaMeta)
		m.SchemaMetadata = make(map[string][]byte, len(sm))
		for k, v := range sm {
			m.SchemaMetadata[k] = []byte(v)
		}
	}
	return next, nil
}

// rebase: the maps are deltas, so applying them on any newer version is what the caller
// meant; only a restore of an older state invalidates them.
func (o *updateConfigOp) rebase(other *tablepb.Transaction) error {
	if _, ok := other.GetOperation().(*tablepb.Transaction_Restore_); ok {
		return errRetryOp
	}
	return nil
}

// reserveOp raises max_fragment_id so a later Rewrite can use the ids.
type reserveOp struct{ n uint32 }

func (o *reserveOp) name() string { return "reserve_fragments" }

func (o *reserveOp) fill(txn *tablepb.Transaction) {
	txn.Operation = &tablepb.Transaction_ReserveFragments_{ReserveFragments: &tablepb.Transaction_ReserveFragments{NumFragments: o.n}}
}

func (o *reserveOp) apply(_ context.Context, _ objstore.Store, base *manifestFile) (*manifestFile, error) {
	next := cloneBase(base)
	// As Lance: (max_fragment_id or 0) + n, so the reserved ids are old+1 .. old+n.
	next.Manifest.MaxFragmentId = proto.Uint32(next.Manifest.GetMaxFragmentId() + o.n)
	return next, nil
}

func (o *reserveOp) rebase(*tablepb.Transaction) error { return nil }

// restoreOp makes an old version current again.
type restoreOp struct {
	version uint64
	target  *manifestFile
}

func (o *restoreOp) name() string { return "restore" }

func (o *restoreOp) fill(txn *tablepb.Transaction) {
	txn.Operation = &tablepb.Transaction_Restore_{Restore: &tablepb.Transaction_Restore{Version: o.version}}
}

func (o *restoreOp) apply(_ context.Context, _ objstore.Store, base *manifestFile) (*manifestFile, error) {
	next := cloneBase(o.target)
	next.Manifest.MaxFragmentId = base.Manifest.MaxFragmentId
	updateMaxFragmentID(next.Manifest)
	return next, nil
}

func (o *restoreOp) rebase(*tablepb.Transaction) error { return nil }

// sortedIDs returns the keys of a set in ascending order.
func sortedIDs(m map[uint64]bool) []uint64 {
	out := make([]uint64, 0, len(m))
	for id := range m {
		out = append(out, id)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}
