package lance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lancectx/lancectx/internal/arrowrows"
	"github.com/lancectx/lancectx/lance/file"
	"github.com/lancectx/lancectx/lance/format/tablepb"
	"github.com/lancectx/lancectx/lance/schema"
	"github.com/lancectx/lancectx/objstore"
)

// DefaultDataStorageVersion is the data storage version (the Lance data file format,
// "2.0" or "2.1") of datasets this package creates when WriteOptions.DataStorageVersion
// is empty. Writes into an existing dataset always use that dataset's version.
//
// It is "2.1", LanceDB 0.31's default (and the Rust lance-context's), so a table made by
// lancectx is what a LanceDB user would have made; "2.0" stays available for readers
// older than lance 6.
const DefaultDataStorageVersion = "2.1"

// ErrStorageVersion is wrapped by errors about data storage versions: a value other than
// "2.0" or "2.1", or one that differs from the version of the dataset written to.
var ErrStorageVersion = errors.New("lance: data storage version")

// ParseDataStorageVersion checks a data storage version as options and flags spell it
// ("2.0" or "2.1"; empty means DefaultDataStorageVersion) and returns it.
func ParseDataStorageVersion(s string) (string, error) {
	if s == "" {
		return DefaultDataStorageVersion, nil
	}
	if _, err := file.ParseFormatVersion(s); err != nil {
		return "", fmt.Errorf("%w %q: lancectx writes data files in format 2.0 or 2.1", ErrStorageVersion, s)
	}
	return s, nil
}

// WriteMode selects what Write does when a dataset already exists.
type WriteMode int

const (
	// ModeCreate fails with ErrDatasetExists when a dataset is already there.
	ModeCreate WriteMode = iota
	// ModeAppend adds rows to an existing dataset (creating it if absent).
	ModeAppend
	// ModeOverwrite replaces the content with a new version (creating it if absent).
	ModeOverwrite
)

// ParseWriteMode parses "create", "append" or "overwrite".
func ParseWriteMode(s string) (WriteMode, error) {
	switch s {
	case "create":
		return ModeCreate, nil
	case "append":
		return ModeAppend, nil
	case "overwrite":
		return ModeOverwrite, nil
	}
	return 0, fmt.Errorf("lance: unknown write mode %q (want create, append or overwrite)", s)
}

// WriteOptions tune how rows become data files.
type WriteOptions struct {
	Mode WriteMode
	// MaxRowsPerFile rolls to a new data file (and fragment) after this many rows.
	// Default 1,048,576 like Lance.
	MaxRowsPerFile int64
	// MaxBytesPerFile rolls to a new data file once this many bytes were written.
	// Default 2 GiB.
	MaxBytesPerFile int64
	// PageBytes is the per-column page buffer of the file writer (default 8 MiB).
	PageBytes int
	// VarBytesHint is passed to the file writer (file.WriterOptions.VarBytesHint) by
	// WriteDataFile: the expected bytes of each top-level string or binary column.
	VarBytesHint []int64
	// DataStorageVersion is the data file format of a dataset this write creates ("2.0"
	// or "2.1"; empty: DefaultDataStorageVersion), also when an overwrite replaces a
	// dataset. Appends and every other write into an existing dataset use the
	// dataset's version (Lance refuses datasets with mixed versions); asking for another
	// one there is an error wrapping ErrStorageVersion.
	DataStorageVersion string
	// format is the resolved file format of the data files written.
	format file.FormatVersion
	// Config is merged into the table config on create and overwrite.
	Config map[string]string
	// Properties are recorded in the transaction (transaction_properties).
	Properties map[string]string
	// ExpectVersion, when non-zero, makes the write a compare-and-swap on that version:
	// the dataset's latest version must be ExpectVersion and the write lands as the next
	// one, or it fails with ErrConflict having committed nothing (its data files are
	// left for cleanup). Writers that rebuild their whole content from what they read
	// (a stats round, an upsert carrying counters over) use it instead of a rebase.
	ExpectVersion uint64
	// FirstVersion is the version number a dataset created by this write starts at
	// (default 1). A dataset created where another one was deleted starts past every
	// version the deleted one reached: a late commit of an old writer then lands below
	// the new history, where no reader looks, instead of on top of it.
	FirstVersion uint64
}

// commitOptions are the commit settings a write asks for.
func (o WriteOptions) commitOptions() commitOptions {
	return commitOptions{properties: o.Properties, noRebase: o.ExpectVersion != 0, firstVersion: o.FirstVersion}
}

// checkExpected fails with ErrConflict when ExpectVersion is set and v is not it.
func (o WriteOptions) checkExpected(v uint64) error {
	if o.ExpectVersion != 0 && v != o.ExpectVersion {
		return fmt.Errorf("%w: the latest version is %d, the write expected %d", ErrConflict, v, o.ExpectVersion)
	}
	return nil
}

func (o *WriteOptions) defaults() {
	if o.MaxRowsPerFile <= 0 {
		o.MaxRowsPerFile = 1 << 20
	}
	if o.MaxBytesPerFile <= 0 {
		o.MaxBytesPerFile = 2 << 30
	}
}

// Write writes all batches of rdr as a new version of the dataset at uri, according to
// opts.Mode. The reader's schema defines the table on create and overwrite.
func Write(ctx context.Context, uri string, rdr array.RecordReader, opts WriteOptions) (*Dataset, error) {
	st, err := objstore.Open(ctx, uri)
	if err != nil {
		return nil, err
	}
	ds, err := WriteStore(ctx, st, rdr, opts)
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	ds.uri = uri
	return ds, nil
}

// WriteStore is Write on a store rooted at the dataset directory.
func WriteStore(ctx context.Context, st objstore.Store, rdr array.RecordReader, opts WriteOptions) (*Dataset, error) {
	opts.defaults()
	existing, err := OpenStore(ctx, st)
	switch {
	case errors.Is(err, ErrDatasetNotFound):
		existing = nil
	case err != nil:
		return nil, err
	case opts.Mode == ModeCreate:
		return nil, fmt.Errorf("%w: version %d exists", ErrDatasetExists, existing.Version())
	}
	if opts.ExpectVersion != 0 {
		if existing == nil {
			return nil, fmt.Errorf("%w: the dataset does not exist, the write expected version %d", ErrConflict, opts.ExpectVersion)
		}
		if err := opts.checkExpected(existing.Version()); err != nil {
			return nil, err
		}
	}
	if existing != nil && opts.Mode == ModeAppend {
		return existing.Append(ctx, rdr, opts)
	}
	sch, err := schema.FromArrow(rdr.Schema())
	if errors.Is(err, schema.ErrUnsupportedType) {
		return nil, fmt.Errorf("%w: %w", ErrUnsupported, err)
	}
	if err != nil {
		return nil, err
	}
	storage := opts.DataStorageVersion
	if storage == "" && existing != nil {
		// An overwrite keeps the dataset's version unless asked otherwise.
		storage, _ = existing.fileVersion()
	}
	if storage, err = ParseDataStorageVersion(storage); err != nil {
		return nil, err
	}
	opts.format, _ = file.ParseFormatVersion(storage)
	frags, err := writeFragments(ctx, st, sch, rdr, opts)
	if err != nil {
		return nil, err
	}
	fields, meta := sch.ToProto()
	op := &overwriteOp{fragments: frags, fields: fields, schemaMeta: meta, configUpserts: opts.Config, storage: storage}
	return commit(ctx, st, existing, op, opts.commitOptions())
}

// Append adds the batches of rdr as new fragments. Columns are matched by name; table
// columns missing from the input must be nullable and are stored as nulls.
func (d *Dataset) Append(ctx context.Context, rdr array.RecordReader, opts WriteOptions) (*Dataset, error) {
	opts.defaults()
	if err := d.checkWritable(); err != nil {
		return nil, err
	}
	if err := opts.checkExpected(d.Version()); err != nil {
		return nil, err
	}
	frags, err := d.writeDataFragments(ctx, rdr, opts)
	if err != nil {
		return nil, err
	}
	if len(frags) == 0 {
		return d, nil
	}
	ds, err := commit(ctx, d.store, d, &appendOp{fragments: frags}, opts.commitOptions())
	return d.withURI(ds, err)
}

// Overwrite replaces the table's rows and schema with the batches of rdr.
func (d *Dataset) Overwrite(ctx context.Context, rdr array.RecordReader, opts WriteOptions) (*Dataset, error) {
	opts.Mode = ModeOverwrite
	ds, err := WriteStore(ctx, d.store, rdr, opts)
	return d.withURI(ds, err)
}

// checkWritable refuses datasets whose data files lancectx cannot add to.
func (d *Dataset) checkWritable() error {
	if err := checkWriterFlags(d.mf.Manifest); err != nil {
		return err
	}
	if v, err := d.fileVersion(); err != nil {
		return fmt.Errorf("%w: dataset stores data files in format %s; lancectx writes 2.0 and 2.1", ErrUnsupported, v)
	}
	return nil
}

// fileVersion is the data storage version new data files of the dataset must have:
// the manifest's data format or, in manifests without one, the version of its data
// files (2.0 when it has none). The error says lancectx cannot write it.
func (d *Dataset) fileVersion() (string, error) {
	v := manifestStorageVersion(d.mf.Manifest)
	if _, err := file.ParseFormatVersion(v); err != nil {
		return v, err
	}
	return v, nil
}

// WriteStorageVersion is the data storage version of data files written into the
// dataset ("2.0", "2.1", or a version lancectx cannot write, which writes then refuse):
// the manifest's data format or, for manifests without one, its data files' version.
func (d *Dataset) WriteStorageVersion() string {
	v, _ := d.fileVersion()
	return v
}

// manifestStorageVersion is a manifest's data storage version, as Lance infers it.
func manifestStorageVersion(m *tablepb.Manifest) string {
	if v := m.GetDataFormat().GetVersion(); v != "" {
		return v
	}
	for _, f := range m.GetFragments() {
		for _, df := range f.GetFiles() {
			return fileVersionString(df.GetFileMajorVersion(), df.GetFileMinorVersion())
		}
	}
	return "2.0"
}

// fileVersionString names a DataFile's version the way manifests spell data storage
// versions ((0,3) and (2,0) are both 2.0; (0,1) and (0,2) legacy).
func fileVersionString(major, minor uint32) string {
	switch {
	case major == 0 && minor == 3:
		return "2.0"
	case major == 0:
		return "0.1"
	}
	return fmt.Sprintf("%d.%d", major, minor)
}

// writeOptions resolves the file format of data files written into d: the dataset's,
// which an explicit opts.DataStorageVersion must match.
func (d *Dataset) writeOptions(opts WriteOptions) (WriteOptions, error) {
	v, err := d.fileVersion()
	if err != nil {
		return opts, fmt.Errorf("%w: dataset stores data files in format %s; lancectx writes 2.0 and 2.1", ErrUnsupported, v)
	}
	if opts.DataStorageVersion != "" && opts.DataStorageVersion != v {
		return opts, fmt.Errorf("%w: the dataset stores data files in format %s, the write asked for %s (a dataset's files all have one version)",
			ErrStorageVersion, v, opts.DataStorageVersion)
	}
	opts.format, _ = file.ParseFormatVersion(v)
	return opts, nil
}

// writeDataFragments writes rdr as new data files of the dataset (one fragment each),
// in the dataset's data storage version.
func (d *Dataset) writeDataFragments(ctx context.Context, rdr array.RecordReader, opts WriteOptions) ([]*tablepb.DataFragment, error) {
	opts, err := d.writeOptions(opts)
	if err != nil {
		return nil, err
	}
	return writeFragments(ctx, d.store, d.schema, rdr, opts)
}

// newDataFileName follows Lance's convention: 16 random bytes, the first 3 as 24 binary
// digits and the rest as hex.
func newDataFileName() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	name := make([]byte, 0, 56)
	for _, x := range b[:3] {
		s := strconv.FormatUint(uint64(x), 2)
		for i := len(s); i < 8; i++ {
			name = append(name, '0')
		}
		name = append(name, s...)
	}
	name = append(name, hex.EncodeToString(b[3:])...)
	return string(name) + ".lance"
}

// writeFragments streams rdr into data files of at most MaxRowsPerFile rows, one
// fragment per file. Memory is bounded by the file writer's page buffers, not the input.
func writeFragments(ctx context.Context, st objstore.Store, sch *schema.Schema, rdr array.RecordReader, opts WriteOptions) ([]*tablepb.DataFragment, error) {
	if err := checkNoBlobColumns(sch); err != nil {
		return nil, err
	}
	// Before any file: a write of no rows would otherwise commit the schema anyway.
	if err := checkWritable(sch, opts.format); err != nil {
		return nil, err
	}
	var frags []*tablepb.DataFragment
	var cur *fileSink
	fail := func(err error) ([]*tablepb.DataFragment, error) {
		if cur != nil {
			cur.abort(err)
		}
		return nil, err
	}
	target := sch.Arrow()
	for rdr.Next() {
		rec, err := conformBatch(rdr.RecordBatch(), target)
		if err != nil {
			return fail(err)
		}
		for off := int64(0); off < rec.NumRows(); {
			if cur == nil {
				if cur, err = newFileSink(ctx, st, sch, opts); err != nil {
					rec.Release()
					return fail(err)
				}
			}
			n := min(rec.NumRows()-off, opts.MaxRowsPerFile-cur.rows)
			part := rec
			if off != 0 || n != rec.NumRows() {
				part = rec.NewSlice(off, off+n)
			}
			err := cur.w.Write(part)
			if part != rec {
				part.Release()
			}
			if err != nil {
				rec.Release()
				return fail(fmt.Errorf("write data file: %w", err))
			}
			cur.rows += n
			off += n
			if cur.rows >= opts.MaxRowsPerFile || int64(cur.w.WrittenBytes()) >= opts.MaxBytesPerFile {
				frag, err := cur.finish()
				cur = nil
				if err != nil {
					rec.Release()
					return fail(err)
				}
				frags = append(frags, frag)
			}
		}
		rec.Release()
	}
	if err := rdr.Err(); err != nil {
		return fail(fmt.Errorf("read input: %w", err))
	}
	if cur != nil {
		frag, err := cur.finish()
		if err != nil {
			return nil, err
		}
		frags = append(frags, frag)
	}
	return frags, nil
}

// checkWritable refuses a schema with a type lancectx cannot write in format (maps,
// which Lance stores only in 2.2 files; see file.CheckWritable), naming it.
func checkWritable(sch *schema.Schema, format file.FormatVersion) error {
	if err := file.CheckWritable(sch, format); err != nil {
		return fmt.Errorf("%w: %w", ErrUnsupported, err)
	}
	return nil
}

// fileSink is one data file being streamed to the store through a pipe.
type fileSink struct {
	name string
	w    *file.Writer
	pw   *io.PipeWriter
	done chan error
	rows int64
}

func newFileSink(ctx context.Context, st objstore.Store, sch *schema.Schema, opts WriteOptions) (*fileSink, error) {
	pr, pw := io.Pipe()
	s := &fileSink{name: newDataFileName(), pw: pw, done: make(chan error, 1)}
	go func() {
		err := st.Put(ctx, dataDir+s.name, pr)
		_ = pr.CloseWithError(err) // unblock the writer if the store gave up
		s.done <- err
	}()
	w, err := file.NewWriter(pw, sch, file.WriterOptions{PageBytes: opts.PageBytes, Version: opts.format})
	if err != nil {
		s.abort(err)
		return nil, err
	}
	s.w = w
	return s, nil
}

func (s *fileSink) finish() (*tablepb.DataFragment, error) {
	info, err := s.w.Close()
	if err != nil {
		s.abort(err)
		return nil, fmt.Errorf("finish data file: %w", err)
	}
	_ = s.pw.Close()
	if err := <-s.done; err != nil {
		return nil, fmt.Errorf("store data file %s: %w", s.name, err)
	}
	return &tablepb.DataFragment{
		PhysicalRows: info.Rows,
		Files: []*tablepb.DataFile{{
			Path: s.name, Fields: info.Fields, ColumnIndices: info.ColumnIndices,
			FileMajorVersion: info.Major, FileMinorVersion: info.Minor, FileSizeBytes: info.Size,
		}},
	}, nil
}

// abort stops the upload; the store never publishes a partial object.
func (s *fileSink) abort(err error) {
	_ = s.pw.CloseWithError(fmt.Errorf("aborted: %w", err))
	<-s.done
}

// conformBatch returns rec laid out as target (arrowrows.Conform: columns matched by
// name, types equal, missing nullable columns filled with nulls, no nulls in a
// non-nullable column). The result must be released.
func conformBatch(rec arrow.RecordBatch, target *arrow.Schema) (arrow.RecordBatch, error) {
	out, err := arrowrows.Conform(rec, target)
	if err != nil {
		return nil, fmt.Errorf("lance: input does not fit the table schema: %w", err)
	}
	return out, nil
}
