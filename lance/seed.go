package lance

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/lancectx/lancectx/lance/format/tablepb"
	"github.com/lancectx/lancectx/objstore"
)

// SeedHistoryOptions shape the versions SeedHistory writes.
type SeedHistoryOptions struct {
	// Versions to add.
	Versions int
	// CopyData gives every new version its own copies of the latest version's data files
	// (through the store's Copier), so old versions leave data files behind like a table
	// overwritten every round; otherwise all versions share the files.
	CopyData bool
	// Progress, if set, is called every 1000 versions.
	Progress func(done int)
}

// SeedHistory appends versions to the dataset at st quickly, for tests and benchmarks
// that need a long version history (the reference system's incident had 68,000): each
// new version is an Overwrite transaction whose content equals the latest version's,
// with a transaction file and a manifest like any commit, but written without listing
// _versions and without conflict checks. It must not run concurrently with any writer.
func SeedHistory(ctx context.Context, st objstore.Store, o SeedHistoryOptions) (*Dataset, error) {
	ds, err := OpenStore(ctx, st)
	if err != nil {
		return nil, err
	}
	cur := ds.mf
	for i := 0; i < o.Versions; i++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		next := cloneBase(cur)
		m := next.Manifest
		m.Version = cur.Manifest.GetVersion() + 1
		if o.CopyData {
			frags := cloneFragments(m.Fragments)
			for _, f := range frags {
				for _, df := range f.Files {
					name := newDataFileName()
					if err := objstore.CopyVia(ctx, st, dataDir+df.GetPath(), dataDir+name); err != nil {
						return nil, fmt.Errorf("seed history: copy data file: %w", err)
					}
					df.Path = name
				}
			}
			m.Fragments = frags
		}
		txn := &tablepb.Transaction{ReadVersion: m.Version - 1, Uuid: uuid.NewString(),
			Operation: &tablepb.Transaction_Overwrite_{Overwrite: &tablepb.Transaction_Overwrite{
				Fragments: m.Fragments, Schema: m.Fields, SchemaMetadata: m.SchemaMetadata}}}
		txnName := fmt.Sprintf("%d-%s.txn", txn.ReadVersion, txn.Uuid)
		txnBytes, err := proto.Marshal(txn)
		if err != nil {
			return nil, err
		}
		if err := st.Put(ctx, transactionsDir+txnName, bytes.NewReader(txnBytes)); err != nil {
			return nil, err
		}
		m.Timestamp = timestamppb.New(time.Now())
		m.WriterVersion = &tablepb.Manifest_WriterVersion{Library: WriterLibrary, Version: WriterVersion}
		m.TransactionFile = txnName
		setFeatureFlags(m)
		next.Transaction = txn
		buf, written, err := encodeManifest(next)
		if err != nil {
			return nil, err
		}
		if err := st.PutIfAbsent(ctx, manifestKeyV2(m.Version), bytes.NewReader(buf)); err != nil {
			return nil, fmt.Errorf("seed history: version %d: %w", m.Version, err)
		}
		cur = &manifestFile{Manifest: written, Transaction: txn, Indices: next.Indices}
		if o.Progress != nil && (i+1)%1000 == 0 {
			o.Progress(i + 1)
		}
	}
	writeVersionHint(ctx, st, cur.Manifest.GetVersion())
	return OpenStore(ctx, st)
}
