package lance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"google.golang.org/protobuf/proto"

	"github.com/lancectx/lancectx/lance/file"
	"github.com/lancectx/lancectx/lance/format/tablepb"
	"github.com/lancectx/lancectx/lance/schema"
	"github.com/lancectx/lancectx/objstore"
)

// DataFileInfo describes a data file written by WriteDataFile: what a manifest needs to
// reference it as a fragment.
type DataFileInfo struct {
	Rows          uint64  `json:"rows"`
	Size          uint64  `json:"size"`
	Fields        []int32 `json:"fields"`
	ColumnIndices []int32 `json:"column_indices"`
	Major         uint32  `json:"major"`
	Minor         uint32  `json:"minor"`
}

// WriteDataFile writes every batch of rdr into one Lance data file at key (relative to
// the store root, anywhere: e.g. a WAL generation outside data/), with the field ids of
// sch, in format opts.DataStorageVersion (empty: DefaultDataStorageVersion; a file meant
// for a dataset must have the dataset's version, CommitFiles checks it). Batches are
// conformed to sch like Append does. The object appears only when complete.
func WriteDataFile(ctx context.Context, st objstore.Store, key string, sch *schema.Schema, rdr array.RecordReader, opts WriteOptions) (DataFileInfo, error) {
	storage, err := ParseDataStorageVersion(opts.DataStorageVersion)
	if err != nil {
		return DataFileInfo{}, err
	}
	if err := checkNoBlobColumns(sch); err != nil {
		return DataFileInfo{}, err
	}
	format, _ := file.ParseFormatVersion(storage)
	if err := checkWritable(sch, format); err != nil {
		return DataFileInfo{}, err
	}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := st.Put(ctx, key, pr)
		_ = pr.CloseWithError(err)
		done <- err
	}()
	fail := func(err error) (DataFileInfo, error) {
		_ = pw.CloseWithError(fmt.Errorf("aborted: %w", err))
		<-done
		return DataFileInfo{}, err
	}
	w, err := file.NewWriter(pw, sch, file.WriterOptions{PageBytes: opts.PageBytes, Version: format, VarBytesHint: opts.VarBytesHint})
	if err != nil {
		return fail(err)
	}
	target := sch.Arrow()
	for rdr.Next() {
		rec, err := conformBatch(rdr.RecordBatch(), target)
		if err != nil {
			return fail(err)
		}
		err = w.Write(rec)
		rec.Release()
		if err != nil {
			return fail(fmt.Errorf("write data file: %w", err))
		}
	}
	if err := rdr.Err(); err != nil {
		return fail(fmt.Errorf("read input: %w", err))
	}
	info, err := w.Close()
	if err != nil {
		return fail(fmt.Errorf("finish data file: %w", err))
	}
	_ = pw.Close()
	if err := <-done; err != nil {
		return DataFileInfo{}, fmt.Errorf("store data file %s: %w", key, err)
	}
	return DataFileInfo{Rows: info.Rows, Size: info.Size, Fields: info.Fields, ColumnIndices: info.ColumnIndices,
		Major: info.Major, Minor: info.Minor}, nil
}

// StoreSource reads an object of st by ranges, for file.Open.
func StoreSource(st objstore.Reader, key string) file.Source { return &storeSource{st: st, key: key} }

// FilesCommit adds data files already stored under data/ as new fragments, deletes rows
// of existing fragments and updates table metadata, all in one version.
type FilesCommit struct {
	// Files are paths relative to data/ with what the writer reported about them; each
	// becomes one fragment, in order.
	Files []NamedDataFile
	// Delete maps existing fragment ids to the physical row offsets to delete.
	Delete map[uint64]*roaring.Bitmap
	// TableMetadata upserts table metadata keys.
	TableMetadata map[string]string
	// Expect is a precondition on table metadata, checked against the version the commit
	// lands on: a key whose value differs (missing counts as "") fails the commit with
	// ErrConflict. It makes "advance a watermark from X to Y" a compare-and-swap.
	Expect map[string]string
	// ExpectConfig is the same precondition on table config keys (e.g. an identity the
	// dataset was created with).
	ExpectConfig map[string]string
	// Config upserts table config keys in the same version (e.g. the identity a table
	// takes on when another system's dataset is adopted).
	Config map[string]string
	// Properties are recorded in the transaction.
	Properties map[string]string
}

// NamedDataFile is a data file path (relative to data/) and its description.
type NamedDataFile struct {
	Path string
	DataFileInfo
	// Deleted are rows of this file (physical offsets) hidden from the start: a file
	// taken over from another dataset brings the rows its deletion vector hid there,
	// and a newer copy of a key elsewhere in the same commit hides the older one. The
	// fragment's deletion file is written when the commit assigns its id. It must not
	// cover every row.
	Deleted *roaring.Bitmap
}

// ErrPrecondition: a FilesCommit's Expect did not hold on the latest version.
var ErrPrecondition = fmt.Errorf("%w: table metadata precondition failed", ErrConflict)

// CommitFiles commits c on top of the latest version. Deletion vectors are computed
// against the fragment state the commit lands on: if a concurrent commit added rows or
// touched the same fragments, the caller's view of which rows to delete may be stale, so
// the commit fails with an error wrapping ErrConflict and the caller recomputes.
func (d *Dataset) CommitFiles(ctx context.Context, c FilesCommit) (*Dataset, error) {
	if err := d.checkWritable(); err != nil {
		return nil, err
	}
	for _, f := range c.Files {
		if f.Deleted != nil && f.Deleted.GetCardinality() >= f.Rows {
			return nil, fmt.Errorf("lance: data file %s: every one of its %d rows is deleted", f.Path, f.Rows)
		}
	}
	byID := map[uint64]*tablepb.DataFragment{}
	for _, f := range d.Fragments() {
		byID[f.GetId()] = f
	}
	ids := make([]uint64, 0, len(c.Delete))
	for id := range c.Delete {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	op := &filesOp{expect: c.Expect, expectConfig: c.ExpectConfig, meta: c.TableMetadata, config: c.Config}
	for _, id := range ids {
		frag, ok := byID[id]
		if !ok {
			return nil, fmt.Errorf("%w: fragment %d is not in version %d", ErrConflict, id, d.Version())
		}
		all, err := readDeletionVector(ctx, d.store, frag)
		if err != nil {
			return nil, err
		}
		all.Or(c.Delete[id])
		if all.GetCardinality() >= frag.GetPhysicalRows() {
			op.removed = append(op.removed, id)
			continue
		}
		df, err := writeDeletionFile(ctx, d.store, id, d.Version(), all)
		if err != nil {
			return nil, err
		}
		nf := proto.Clone(frag).(*tablepb.DataFragment)
		nf.DeletionFile = df
		op.updated = append(op.updated, nf)
	}
	for _, f := range c.Files {
		op.deleted = append(op.deleted, f.Deleted)
		op.added = append(op.added, &tablepb.DataFragment{
			PhysicalRows: f.Rows,
			Files: []*tablepb.DataFile{{
				Path: f.Path, Fields: f.Fields, ColumnIndices: f.ColumnIndices,
				FileMajorVersion: f.Major, FileMinorVersion: f.Minor, FileSizeBytes: f.Size,
			}},
		})
	}
	out, err := commit(ctx, d.store, d, op, commitOptions{properties: c.Properties})
	if err != nil {
		return nil, err
	}
	out.uri = d.uri
	return out, nil
}

// filesOp is an Update (deletions + new fragments) with table metadata changes and a
// metadata precondition.
type filesOp struct {
	updateOp
	expect       map[string]string
	expectConfig map[string]string
	meta         map[string]string
	config       map[string]string
	// deleted[i] are the rows of added[i] to hide (nil: none).
	deleted []*roaring.Bitmap
}

func (o *filesOp) apply(ctx context.Context, st objstore.Store, base *manifestFile) (*manifestFile, error) {
	have := base.Manifest.GetTableMetadata()
	for k, v := range o.expect {
		if have[k] != v {
			return nil, fmt.Errorf("%w: %s is %q, expected %q", ErrPrecondition, k, have[k], v)
		}
	}
	config := base.Manifest.GetConfig()
	for k, v := range o.expectConfig {
		if config[k] != v {
			return nil, fmt.Errorf("%w: config %s is %q, expected %q", ErrPrecondition, k, config[k], v)
		}
	}
	next, err := o.updateOp.apply(ctx, st, base)
	if err != nil {
		return nil, err
	}
	// The added fragments are the last ones, with the ids this attempt assigned: their
	// deletion files are named after those ids, so they are written per attempt (an
	// attempt that loses the race leaves them unreferenced, for cleanup).
	added := next.Manifest.Fragments[len(next.Manifest.Fragments)-len(o.added):]
	for i, bm := range o.deleted {
		if bm == nil || bm.IsEmpty() {
			continue
		}
		df, err := writeDeletionFile(ctx, st, added[i].GetId(), base.Manifest.GetVersion(), bm)
		if err != nil {
			return nil, err
		}
		added[i].DeletionFile = df
	}
	if len(o.config) > 0 {
		if next.Manifest.Config == nil {
			next.Manifest.Config = map[string]string{}
		}
		for k, v := range o.config {
			next.Manifest.Config[k] = v
		}
	}
	if len(o.meta) > 0 {
		if next.Manifest.TableMetadata == nil {
			next.Manifest.TableMetadata = map[string]string{}
		}
		for k, v := range o.meta {
			next.Manifest.TableMetadata[k] = v
		}
	}
	return next, nil
}

// FindKeys returns, per fragment id, the physical offsets of visible rows whose column
// value (as produced by the column's key form: strings as is, integers in decimal) is in
// keys. It streams the column fragment by fragment: memory is bounded by keys.
func (d *Dataset) FindKeys(ctx context.Context, column string, keys map[string]struct{}) (map[uint64]*roaring.Bitmap, error) {
	f := d.schema.Field(column)
	if f == nil {
		return nil, fmt.Errorf("lance: no column %q in the table", column)
	}
	keyOf, err := keyFunc(f.Type)
	if err != nil {
		return nil, err
	}
	return d.matchRows(ctx, []*schema.Field{f}, func(_ context.Context, rec arrow.RecordBatch) ([]bool, error) {
		col := rec.Column(0)
		sel := make([]bool, col.Len())
		for i := range sel {
			if !col.IsNull(i) {
				_, sel[i] = keys[keyOf(col, i)]
			}
		}
		return sel, nil
	})
}

// IndexMetadata returns the index metadata of this version as stored (nil: none),
// details included (Indices summarises them). The messages are shared with the
// dataset: do not modify them.
func (d *Dataset) IndexMetadata() []*tablepb.IndexMetadata { return d.mf.Indices.GetIndices() }

// IsConflict reports whether err is a commit conflict (retry on a newer version).
func IsConflict(err error) bool { return errors.Is(err, ErrConflict) }
