package lance

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lancectx/lancectx/lance/file"
	"github.com/lancectx/lancectx/lance/format/tablepb"
	"github.com/lancectx/lancectx/lance/schema"
	"github.com/lancectx/lancectx/objstore"
)

// fragmentReader reads rows of one fragment across its data files.
type fragmentReader struct {
	frag *tablepb.DataFragment
	// mu guards readers, views, opening and rowIDs (never across I/O): a fragment's
	// batches, and the takes of a Dataset's searches, read it concurrently.
	mu      sync.Mutex
	readers map[string]*file.Reader // by data file path
	views   map[string]*fileView    // by data file path
	opening map[string]*fileOpen    // by data file path: being opened
	// rowIDs are the stable row ids of the fragment's physical rows, decoded on first use.
	rowIDs []uint64
	// owner maps the field ids a data file lists to it: every field of a 2.0 file, only
	// the leaves (no struct or list parents) of a 2.1+ file.
	owner map[int32]*tablepb.DataFile
}

// fileOf returns the data file storing top-level field f: the file listing f itself
// (2.0) or, for a 2.1+ struct or list, the file listing its leaves.
func (fr *fragmentReader) fileOf(f *schema.Field) (*tablepb.DataFile, bool) {
	if df, ok := fr.owner[f.ID]; ok {
		return df, true
	}
	var found *tablepb.DataFile
	f.Walk(func(c *schema.Field) bool {
		if df, ok := fr.owner[c.ID]; ok && found == nil {
			found = df
		}
		return found == nil
	})
	return found, found != nil
}

func openFragment(frag *tablepb.DataFragment) (*fragmentReader, error) {
	fr := &fragmentReader{frag: frag, readers: map[string]*file.Reader{}, views: map[string]*fileView{}, owner: map[int32]*tablepb.DataFile{}}
	for _, df := range frag.GetFiles() {
		if df.BaseId != nil {
			return nil, fmt.Errorf("%w: data file with base_id (shallow clone)", ErrUnsupported)
		}
		// Ids below 0 are tombstones (-2: the file's column of a field replaced since).
		for _, id := range df.GetFields() {
			if id >= 0 {
				fr.owner[id] = df
			}
		}
	}
	return fr, nil
}

// reader opens a data file of the fragment (once) with its view. The open (a stat and
// the file's footer) runs outside fr.mu: a Dataset keeps its fragments, so the searches
// of a version share them, and a call that finds the file being opened waits for that
// open under its own context instead of behind a lock held across the reads.
func (fr *fragmentReader) reader(ctx context.Context, st objstore.Reader, df *tablepb.DataFile) (*file.Reader, *fileView, error) {
	path := df.GetPath()
	fr.mu.Lock()
	if r, ok := fr.readers[path]; ok {
		v := fr.views[path]
		fr.mu.Unlock()
		return r, v, nil
	}
	if o, ok := fr.opening[path]; ok {
		fr.mu.Unlock()
		select {
		case <-o.done:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		if o.err == nil {
			return o.r, o.v, nil
		}
		// That open failed (perhaps its caller gave up): open it ourselves.
		return fr.open(ctx, st, df)
	}
	o := &fileOpen{done: make(chan struct{})}
	if fr.opening == nil {
		fr.opening = map[string]*fileOpen{}
	}
	fr.opening[path] = o
	fr.mu.Unlock()
	o.r, o.v, o.err = fr.open(ctx, st, df)
	fr.mu.Lock()
	delete(fr.opening, path)
	if o.err == nil {
		fr.readers[path], fr.views[path] = o.r, o.v
	}
	fr.mu.Unlock()
	close(o.done)
	return o.r, o.v, o.err
}

// fileOpen is a data file being opened; calls that want it wait for it.
type fileOpen struct {
	done chan struct{}
	r    *file.Reader
	v    *fileView
	err  error
}

// open opens data file df of the fragment with its view.
func (fr *fragmentReader) open(ctx context.Context, st objstore.Reader, df *tablepb.DataFile) (*file.Reader, *fileView, error) {
	key := dataDir + df.GetPath()
	size := int64(df.GetFileSizeBytes())
	if size == 0 {
		info, err := st.Stat(ctx, key)
		if err != nil {
			return nil, nil, fmt.Errorf("stat data file: %w", err)
		}
		size = info.Size
	}
	r, err := file.Open(ctx, &storeSource{st: st, key: key}, size)
	if err != nil {
		return nil, nil, fmt.Errorf("open data file %s of fragment %d: %w", df.GetPath(), fr.frag.GetId(), err)
	}
	v, err := newFileView(df, r)
	if err != nil {
		return nil, nil, fmt.Errorf("data file %s of fragment %d: %w", df.GetPath(), fr.frag.GetId(), err)
	}
	return r, v, nil
}

// fileView maps the table's field ids to the fields of one data file by the columns the
// manifest names for them (DataFile.fields and column_indices), which is how Lance reads
// a data file: the file's own field ids are not consulted. They differ in files written
// for a table by other means (Lance's Fragment.create_from_file and data replacement take
// files written with any ids) and a data file may list ids the table dropped since.
type fileView struct {
	byID   map[int32]*schema.Field         // table field id -> file field
	parent map[*schema.Field]*schema.Field // file field -> its parent (absent at the top)
}

func newFileView(df *tablepb.DataFile, r *file.Reader) (*fileView, error) {
	v := &fileView{byID: map[int32]*schema.Field{}, parent: map[*schema.Field]*schema.Field{}}
	r.Schema().Walk(func(f *schema.Field) bool {
		for _, c := range f.Children {
			v.parent[c] = f
		}
		return true
	})
	ids, cols := df.GetFields(), df.GetColumnIndices()
	if len(cols) > 0 && len(cols) != len(ids) {
		return nil, corruptf(dataDir, "data file lists %d fields but %d column indices", len(ids), len(cols))
	}
	for i, id := range ids {
		if id < 0 {
			continue
		}
		if len(cols) == 0 {
			// No column indices (files of early writers): the file's own ids are the
			// table's.
			if ff := r.Schema().FieldByID(id); ff != nil {
				v.byID[id] = ff
			}
			continue
		}
		if cols[i] < 0 {
			continue // a field without a column of its own (a 2.0 writer's parent)
		}
		ff := r.ColumnField(int(cols[i]))
		if ff == nil {
			return nil, corruptf(dataDir, "field %d is column %d, which no field of the file owns", id, cols[i])
		}
		v.byID[id] = ff
	}
	return v, nil
}

// locate finds where table field want is stored in the file: the file's top-level field
// holding it (nil when the file stores none of it), and for every node of want that has
// a column in the file, the file field it reads from (with their ancestors). A table
// field must sit at the same depth in the file as in the table.
func (v *fileView) locate(want *schema.Field) (*schema.Field, map[*schema.Field]*schema.Field, error) {
	match := map[*schema.Field]*schema.Field{}
	var top *schema.Field
	var walk func(n *schema.Field, path []*schema.Field) error
	walk = func(n *schema.Field, path []*schema.Field) error {
		path = append(slices.Clip(path), n)
		if fn, ok := v.byID[n.ID]; ok {
			var fpath []*schema.Field
			for p := fn; p != nil; p = v.parent[p] {
				fpath = append(fpath, p)
			}
			slices.Reverse(fpath)
			if len(fpath) != len(path) {
				return corruptf(dataDir, "field %q (id %d) is stored at depth %d of the data file, at depth %d in the table", n.Name, n.ID, len(fpath), len(path))
			}
			if top != nil && fpath[0] != top {
				return corruptf(dataDir, "field %q is stored in two top-level fields of the data file", want.Name)
			}
			top = fpath[0]
			for k, tn := range path {
				if m, ok := match[tn]; ok && m != fpath[k] {
					return corruptf(dataDir, "field %q (id %d) maps to two fields of the data file", tn.Name, tn.ID)
				}
				match[tn] = fpath[k]
			}
		}
		for _, c := range n.Children {
			if err := walk(c, path); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(want, nil); err != nil {
		return nil, nil, err
	}
	return top, match, nil
}

// read returns rows [start, end) (or the rows take lists) of fields, in order, as one
// batch with schema s. Fields stored in no file of the fragment read as nulls (columns
// added later). A blob field reads as what fields asks for: its descriptions
// (file.BlobDescriptionField), its bytes (a binary field) or, for blob v2, the struct
// {data, uri} of the table schema.
func (fr *fragmentReader) read(ctx context.Context, st objstore.Reader, fields []*schema.Field, s *arrow.Schema, start, end uint64, take []uint64) (arrow.RecordBatch, error) {
	cols := make([]arrow.Array, len(fields))
	release := func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}
	n := int64(end - start)
	if take != nil {
		n = int64(len(take))
	}
	// One read per data file, and per way of reading legacy blobs.
	type part struct {
		df   *tablepb.DataFile
		desc bool
	}
	var parts []part
	byPart := map[part][]int{}
	for i, f := range fields {
		df, ok := fr.fileOf(f)
		if !ok {
			cols[i] = array.MakeArrayOfNull(memory.DefaultAllocator, f.ArrowType(), int(n))
			continue
		}
		p := part{df, wantsBlobDescriptions(f)}
		if _, ok := byPart[p]; !ok {
			parts = append(parts, p)
		}
		byPart[p] = append(byPart[p], i)
	}
	for _, p := range parts {
		if err := fr.readPart(ctx, st, p.df, p.desc, fields, byPart[p], cols, int(n), start, end, take); err != nil {
			release()
			return nil, err
		}
	}
	for i, c := range cols {
		if int64(c.Len()) != n {
			release()
			return nil, corruptf(dataDir, "fragment %d column %q has %d rows, want %d", fr.frag.GetId(), fields[i].Name, c.Len(), n)
		}
	}
	rec := array.NewRecordBatch(s, cols, n)
	release()
	return rec, nil
}

// readPart reads fields[idx] from data file df into cols.
func (fr *fragmentReader) readPart(ctx context.Context, st objstore.Reader, df *tablepb.DataFile, desc bool, fields []*schema.Field, idx []int, cols []arrow.Array, n int, start, end uint64, take []uint64) error {
	r, v, err := fr.reader(ctx, st, df)
	if err != nil {
		return err
	}
	type located struct {
		top   *schema.Field
		match map[*schema.Field]*schema.Field
	}
	locs := make([]located, len(idx))
	var ids []int32
	pos := map[int32]int{}
	for j, i := range idx {
		top, match, err := v.locate(fields[i])
		if err != nil {
			return fmt.Errorf("fragment %d, data file %s: %w", fr.frag.GetId(), df.GetPath(), err)
		}
		locs[j] = located{top, match}
		if top == nil {
			continue
		}
		if _, ok := pos[top.ID]; !ok {
			pos[top.ID] = len(ids)
			ids = append(ids, top.ID)
		}
	}
	var rec arrow.RecordBatch
	if len(ids) > 0 {
		opts := file.ReadOptions{BlobDescriptions: desc}
		if take != nil {
			rec, err = r.TakeWith(ctx, ids, take, opts)
		} else {
			rec, err = r.ReadWith(ctx, ids, start, end, opts)
		}
		if err != nil {
			return fmt.Errorf("read fragment %d: %w", fr.frag.GetId(), err)
		}
		defer rec.Release()
	}
	for j, i := range idx {
		l := locs[j]
		if l.top == nil {
			// Listed for this file, but without a column in it.
			cols[i] = array.MakeArrayOfNull(memory.DefaultAllocator, fields[i].ArrowType(), n)
			continue
		}
		col := rec.Column(pos[l.top.ID])
		var c arrow.Array
		if r.IsBlobV2(l.top.ID) {
			c, err = blobV2Column(ctx, st, df, r.Size(), col, fields[i])
		} else {
			c, err = conformColumn(col, l.top, fields[i], l.match)
		}
		if err != nil {
			return fmt.Errorf("read fragment %d: %w", fr.frag.GetId(), err)
		}
		cols[i] = c
	}
	return nil
}

// wantsBlobDescriptions reports whether f is, or holds, a legacy blob's description.
func wantsBlobDescriptions(f *schema.Field) bool {
	found := false
	f.Walk(func(c *schema.Field) bool {
		if _, ok := c.Metadata[file.MetaBlob]; ok && c.Type.ID() == arrow.STRUCT {
			found = true
		}
		return !found
	})
	return found
}
