package lance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/lancectx/lancectx/lance/format/tablepb"
	"github.com/lancectx/lancectx/objstore"
)

// WriterLibrary and WriterVersion are recorded in every manifest this package writes.
// Lance trusts physical_rows and file sizes only when a writer version is present; a
// library name other than "lance" tells it no old-Lance workaround applies.
const (
	WriterLibrary = "lancectx"
	WriterVersion = "0.1.0"
)

// Commit errors.
var (
	// ErrConflict: a concurrent commit made this operation invalid; re-read and retry.
	ErrConflict = errors.New("lance: commit conflict")
	// errRetryOp: the operation must be recomputed against the latest version.
	errRetryOp = fmt.Errorf("%w: operation must be recomputed", ErrConflict)
	// ErrDatasetReplaced: the history this handle was read from is gone: the latest
	// version on storage is older than the handle's, or no version is left. The dataset
	// was deleted (and perhaps created anew at the same place). It is deliberately not a
	// conflict: retrying on the latest version would write into the new dataset.
	ErrDatasetReplaced = errors.New("lance: the dataset was deleted or replaced since it was read")
)

// defaultCommitAttempts matches Lance's default of 20 commit retries.
const defaultCommitAttempts = 20

// operation is one kind of commit. It produces the transaction message, builds the next
// manifest from a base, and decides whether it can be rebased over a concurrent commit.
type operation interface {
	// name is the operation name used in logs and VersionInfo.
	name() string
	// fill sets the operation part of txn.
	fill(txn *tablepb.Transaction)
	// apply builds the next manifest file content from base (nil when creating). It must
	// not modify base. Version, timestamp, flags and transaction are set by the caller.
	apply(ctx context.Context, st objstore.Store, base *manifestFile) (*manifestFile, error)
	// rebase reports whether the operation stays valid on top of a version produced by
	// other: nil to rebase, errRetryOp when it must be recomputed, another error to fail.
	rebase(other *tablepb.Transaction) error
}

// commitOptions tune one commit.
type commitOptions struct {
	attempts   int
	properties map[string]string
	// readVersion overrides the recorded read version (compaction's two commits both
	// record the version the rewrite was planned on, as Lance does).
	readVersion *uint64
	// noRebase makes the commit a compare-and-swap on base: it lands as base+1 or fails
	// with ErrConflict, never on top of a concurrent commit.
	noRebase bool
	// firstVersion is the version a created dataset starts at (0: 1).
	firstVersion uint64
}

// commit writes the transaction file, then creates the next manifest with put-if-absent.
// base is nil when creating a dataset.
//
// Every attempt starts from the newest committed version, not from base: a long-lived
// handle whose next version number was already used and then removed by cleanup must not
// recreate it (that manifest would land behind the latest and its rows would be lost).
// The versions between base and the latest are rebased over one by one; if one of them
// is gone (cleaned up) the operation cannot prove it is still valid and fails with
// ErrConflict. A put that reports failure but landed (an ambiguous store error, then a
// retry) is recognised by its transaction uuid.
func commit(ctx context.Context, st objstore.Store, base *Dataset, op operation, opts commitOptions) (*Dataset, error) {
	if opts.attempts <= 0 {
		opts.attempts = defaultCommitAttempts
	}
	var cur *manifestFile
	var readVersion uint64
	naming := namingV2
	if base != nil {
		cur = base.mf
		readVersion = base.Version()
		if len(base.manifestKey)-len(versionsDir) != v2NameLen {
			naming = namingV1
		}
	}
	if opts.readVersion != nil {
		readVersion = *opts.readVersion
	}
	txn := &tablepb.Transaction{ReadVersion: readVersion, Uuid: uuid.NewString(), TransactionProperties: opts.properties}
	op.fill(txn)
	txnName := fmt.Sprintf("%d-%s.txn", readVersion, txn.Uuid)
	txnBytes, err := proto.Marshal(txn)
	if err != nil {
		return nil, fmt.Errorf("encode transaction: %w", err)
	}
	if err := st.Put(ctx, transactionsDir+txnName, bytes.NewReader(txnBytes)); err != nil {
		return nil, fmt.Errorf("write transaction file: %w", err)
	}
	for attempt := 1; ; attempt++ {
		// Catch up with everything committed after cur.
		_, latest, err := latestManifestKey(ctx, st)
		switch {
		case errors.Is(err, ErrDatasetNotFound):
			if cur != nil {
				return nil, fmt.Errorf("%w: every manifest is gone", ErrDatasetReplaced)
			}
		case err != nil:
			return nil, err
		case cur == nil:
			return nil, fmt.Errorf("%w: version %d exists", ErrDatasetExists, latest)
		case latest < cur.Manifest.GetVersion():
			// Versions only grow and cleanup never removes the latest: a lower latest
			// means this history was deleted and another one started in its place.
			return nil, fmt.Errorf("%w: the latest version is %d, this %s was built on version %d",
				ErrDatasetReplaced, latest, op.name(), cur.Manifest.GetVersion())
		}
		if opts.noRebase && cur != nil && latest > cur.Manifest.GetVersion() {
			// Only our own earlier attempt (an ambiguous put that landed) may sit there.
			nextDS, err := checkoutVersion(ctx, st, cur.Manifest.GetVersion()+1)
			if err == nil {
				if other, terr := transactionOf(ctx, st, nextDS); terr == nil && other.GetUuid() == txn.GetUuid() {
					return nextDS, nil
				}
			}
			return nil, fmt.Errorf("%w: version %d was committed after version %d, which this conditional %s required",
				ErrConflict, latest, cur.Manifest.GetVersion(), op.name())
		}
		for cur != nil && cur.Manifest.GetVersion() < latest {
			v := cur.Manifest.GetVersion() + 1
			nextDS, err := checkoutVersion(ctx, st, v)
			if errors.Is(err, ErrVersionNotFound) {
				return nil, fmt.Errorf("%w: version %d, committed after version %d this %s was built on, was cleaned up; re-read the dataset and retry",
					ErrConflict, v, readVersion, op.name())
			}
			if err != nil {
				return nil, fmt.Errorf("read concurrent commit: %w", err)
			}
			other, err := transactionOf(ctx, st, nextDS)
			if err != nil {
				return nil, err
			}
			if other.GetUuid() == txn.GetUuid() {
				return nextDS, nil // our own earlier attempt landed
			}
			if err := op.rebase(other); err != nil {
				return nil, fmt.Errorf("%s over concurrent %s (version %d): %w", op.name(), operationName(other), v, err)
			}
			cur = nextDS.mf
		}
		if cur != nil {
			if err := checkWriterFlags(cur.Manifest); err != nil {
				return nil, err
			}
		}
		next, err := op.apply(ctx, st, cur)
		if err != nil {
			return nil, err
		}
		// Lance keeps fragments in id order (its compaction planner relies on it: a
		// rewrite of fragments out of order makes Lance 8 panic), and so do we: a
		// compaction's new fragments, with the highest ids, go to the end.
		sort.SliceStable(next.Manifest.Fragments, func(i, j int) bool {
			return next.Manifest.Fragments[i].GetId() < next.Manifest.Fragments[j].GetId()
		})
		if err := assignRowIDs(cur, next); err != nil {
			return nil, err
		}
		if err := maintainIndices(txn, cur, next); err != nil {
			return nil, fmt.Errorf("%s: %w", op.name(), err)
		}
		m := next.Manifest
		m.Version = max(opts.firstVersion, 1)
		if cur != nil {
			m.Version = cur.Manifest.GetVersion() + 1
		}
		m.Timestamp = timestamppb.New(time.Now())
		m.WriterVersion = &tablepb.Manifest_WriterVersion{Library: WriterLibrary, Version: WriterVersion}
		m.TransactionFile = txnName
		m.Tag = ""
		updateMaxFragmentID(m)
		setFeatureFlags(m)
		next.Transaction = txn
		buf, written, err := encodeManifest(next)
		if err != nil {
			return nil, err
		}
		key := manifestKeyV2(m.Version)
		if naming == namingV1 {
			key = manifestKeyV1(m.Version)
		}
		err = st.PutIfAbsent(ctx, key, bytes.NewReader(buf))
		if err == nil {
			writeVersionHint(ctx, st, m.Version)
			sch, err := schemaOf(written)
			if err != nil {
				return nil, err
			}
			mf := &manifestFile{Manifest: written, Transaction: txn, Indices: next.Indices}
			return &Dataset{store: st, mf: mf, schema: sch, manifestKey: key, manifestLen: int64(len(buf))}, nil
		}
		if !errors.Is(err, objstore.ErrExists) {
			return nil, fmt.Errorf("commit version %d: %w", m.Version, err)
		}
		if opts.noRebase && cur != nil {
			return nil, fmt.Errorf("%w: version %d was committed concurrently with this conditional %s",
				ErrConflict, m.Version, op.name())
		}
		if attempt >= opts.attempts {
			return nil, fmt.Errorf("%w: gave up after %d attempts", ErrConflict, attempt)
		}
		slog.Debug("lance: commit lost a race, rebasing", "op", op.name(), "attempt", attempt, "version", m.Version)
	}
}

// transactionOf returns the transaction that produced ds: inline section first, then the
// transaction file. Lance refuses to rebase over a version without one, and so do we.
func transactionOf(ctx context.Context, st objstore.Store, ds *Dataset) (*tablepb.Transaction, error) {
	if ds.mf.Transaction != nil {
		return ds.mf.Transaction, nil
	}
	name := ds.mf.Manifest.GetTransactionFile()
	if name == "" {
		return nil, fmt.Errorf("%w: dataset version %d does not have a transaction file", ErrConflict, ds.Version())
	}
	buf, err := objstore.ReadAll(ctx, st, transactionsDir+name)
	if err != nil {
		return nil, fmt.Errorf("read transaction of version %d: %w", ds.Version(), err)
	}
	txn := &tablepb.Transaction{}
	if err := proto.Unmarshal(buf, txn); err != nil {
		return nil, corruptf(transactionsDir+name, "decode transaction: %v", err)
	}
	return txn, nil
}

// writeVersionHint rewrites _versions/latest_version_hint.json. It is an optimisation for
// readers that use it; failure is harmless, so it is only logged.
func writeVersionHint(ctx context.Context, st objstore.Store, version uint64) {
	body := fmt.Sprintf(`{"version":%d}`, version)
	if err := st.Put(ctx, hintKey, strings.NewReader(body)); err != nil {
		slog.Debug("lance: write version hint", "version", version, "err", err)
	}
}

// updateMaxFragmentID raises max_fragment_id to the highest id present; it never lowers
// it, so ids of removed fragments are not reused.
func updateMaxFragmentID(m *tablepb.Manifest) {
	if len(m.Fragments) == 0 {
		return
	}
	var hi uint64
	for _, f := range m.Fragments {
		hi = max(hi, f.GetId())
	}
	if m.MaxFragmentId == nil || uint64(m.GetMaxFragmentId()) < hi {
		m.MaxFragmentId = proto.Uint32(uint32(hi))
	}
}

// nextFragmentID is the first unused fragment id of m: past max_fragment_id and past
// every fragment present (a manifest of an old writer may lack max_fragment_id). A
// reused id would be taken for the removed fragment an index's bitmap still names.
func nextFragmentID(m *tablepb.Manifest) uint64 {
	if m == nil {
		return 0
	}
	next := uint64(0)
	if m.MaxFragmentId != nil {
		next = uint64(m.GetMaxFragmentId()) + 1
	}
	for _, f := range m.GetFragments() {
		next = max(next, f.GetId()+1)
	}
	return next
}

// cloneBase starts the next manifest from base: same schema, fragments, config, metadata,
// indices; no per-version fields. Fragment messages are shared with base, not copied:
// they are treated as immutable everywhere (operations replace a fragment with a modified
// clone, never edit it), which keeps a commit on a manifest with many fragments cheap.
func cloneBase(base *manifestFile) *manifestFile {
	b := base.Manifest
	m := &tablepb.Manifest{
		Fields:             b.Fields,
		Fragments:          append([]*tablepb.DataFragment(nil), b.Fragments...),
		Version:            b.Version,
		VersionAuxData:     b.VersionAuxData,
		SchemaMetadata:     copyMap(b.SchemaMetadata),
		Timestamp:          b.Timestamp,
		Tag:                b.Tag,
		ReaderFeatureFlags: b.ReaderFeatureFlags,
		WriterFeatureFlags: b.WriterFeatureFlags,
		MaxFragmentId:      b.MaxFragmentId,
		TransactionFile:    b.TransactionFile,
		WriterVersion:      b.WriterVersion,
		NextRowId:          b.NextRowId,
		DataFormat:         b.DataFormat,
		Config:             copyMap(b.Config),
		BasePaths:          b.BasePaths,
		TableMetadata:      copyMap(b.TableMetadata),
		Branch:             b.Branch,
	}
	// Fields this package does not know (newer Lance) survive the rewrite.
	m.ProtoReflect().SetUnknown(b.ProtoReflect().GetUnknown())
	var idx *tablepb.IndexSection
	if base.Indices != nil {
		idx = proto.Clone(base.Indices).(*tablepb.IndexSection)
	}
	return &manifestFile{Manifest: m, Indices: idx}
}

// operationName names the operation of a transaction, for logs and conflict errors.
func operationName(txn *tablepb.Transaction) string {
	if txn == nil {
		return ""
	}
	switch txn.GetOperation().(type) {
	case *tablepb.Transaction_Append_:
		return "append"
	case *tablepb.Transaction_Delete_:
		return "delete"
	case *tablepb.Transaction_Overwrite_:
		return "overwrite"
	case *tablepb.Transaction_CreateIndex_:
		return "create_index"
	case *tablepb.Transaction_Rewrite_:
		return "rewrite"
	case *tablepb.Transaction_Merge_:
		return "merge"
	case *tablepb.Transaction_Restore_:
		return "restore"
	case *tablepb.Transaction_ReserveFragments_:
		return "reserve_fragments"
	case *tablepb.Transaction_Update_:
		return "update"
	case *tablepb.Transaction_Project_:
		return "project"
	case *tablepb.Transaction_UpdateConfig_:
		return "update_config"
	case *tablepb.Transaction_DataReplacement_:
		return "data_replacement"
	case *tablepb.Transaction_Clone_:
		return "clone"
	case *tablepb.Transaction_UpdateBases_:
		return "update_bases"
	default:
		return "unknown"
	}
}

// touchedFragments lists the existing fragments a committed transaction modified or
// removed; replacesAll is true for operations that replace the whole table state.
func touchedFragments(txn *tablepb.Transaction) (ids map[uint64]bool, replacesAll bool) {
	ids = map[uint64]bool{}
	addFrags := func(fs []*tablepb.DataFragment) {
		for _, f := range fs {
			ids[f.GetId()] = true
		}
	}
	switch op := txn.GetOperation().(type) {
	case *tablepb.Transaction_Append_, *tablepb.Transaction_ReserveFragments_, *tablepb.Transaction_CreateIndex_,
		*tablepb.Transaction_UpdateConfig_, *tablepb.Transaction_UpdateBases_:
	case *tablepb.Transaction_Delete_:
		addFrags(op.Delete.GetUpdatedFragments())
		for _, id := range op.Delete.GetDeletedFragmentIds() {
			ids[id] = true
		}
	case *tablepb.Transaction_Update_:
		addFrags(op.Update.GetUpdatedFragments())
		for _, id := range op.Update.GetRemovedFragmentIds() {
			ids[id] = true
		}
	case *tablepb.Transaction_Rewrite_:
		addFrags(op.Rewrite.GetOldFragments())
		for _, g := range op.Rewrite.GetGroups() {
			addFrags(g.GetOldFragments())
		}
	case *tablepb.Transaction_DataReplacement_:
		for _, r := range op.DataReplacement.GetReplacements() {
			ids[r.GetFragmentId()] = true
		}
	default:
		// Overwrite, Restore, Merge, Project, Clone and anything unknown change every
		// fragment or the schema.
		return ids, true
	}
	return ids, false
}

// addsFragments reports whether a committed transaction added new fragments (rows).
func addsFragments(txn *tablepb.Transaction) bool {
	switch op := txn.GetOperation().(type) {
	case *tablepb.Transaction_Append_:
		return len(op.Append.GetFragments()) > 0
	case *tablepb.Transaction_Update_:
		return len(op.Update.GetNewFragments()) > 0
	}
	return false
}

// rebaseDisjoint is the rule for operations that rewrite specific fragments: fine over
// commits that touched other fragments, recompute otherwise.
func rebaseDisjoint(mine map[uint64]bool, other *tablepb.Transaction) error {
	theirs, all := touchedFragments(other)
	if all {
		return errRetryOp
	}
	for id := range theirs {
		if mine[id] {
			return errRetryOp
		}
	}
	return nil
}

func isReplaceAll(txn *tablepb.Transaction) bool {
	switch txn.GetOperation().(type) {
	case *tablepb.Transaction_Overwrite_, *tablepb.Transaction_Restore_, *tablepb.Transaction_Clone_:
		return true
	case nil:
		return true
	}
	return false
}
