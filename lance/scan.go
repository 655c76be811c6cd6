package lance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"

	"github.com/RoaringBitmap/roaring/v2"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lancectx/lancectx/internal/arrowrows"
	"github.com/lancectx/lancectx/lance/expr"
	"github.com/lancectx/lancectx/lance/format/tablepb"
	"github.com/lancectx/lancectx/lance/schema"
	"github.com/lancectx/lancectx/objstore"
)

// RowIDColumn is the name of the row id column a scan adds on request (ScanOptions.
// WithRowID, or by name in Columns), which filters may use and Take accepts. Without
// stable row ids (lancectx never enables them) a row id is the row address:
// fragment_id<<32 | offset (see RowAddrColumn). On a dataset with stable row ids
// (LanceDB's new_table_enable_stable_row_ids, tables with blob v2 columns) it is the
// row's stable id, from its fragment's row id sequence, as Lance reports it.
const RowIDColumn = "_rowid"

// ScanOptions select what a scan returns.
type ScanOptions struct {
	// Columns to return, in order; nil returns every column of the table. RowIDColumn
	// and RowAddrColumn may be named.
	Columns []string
	// Filter is a SQL predicate (see package expr); empty keeps every row. It may use
	// RowIDColumn and RowAddrColumn.
	Filter string
	// Offset skips this many matching rows.
	Offset int64
	// Limit stops after this many rows; 0 means no limit.
	Limit int64
	// WithRowID appends the _rowid column (unless Columns names it).
	WithRowID bool
	// WithRowAddr appends the _rowaddr column, after _rowid (unless Columns names it).
	WithRowAddr bool
	// BlobBytes returns blob columns as their values (large_binary; legacy blobs keep
	// their type) instead of Lance's default, descriptions of where each value is
	// (file.BlobDescriptionField). Blob v2 values at external URIs fail the scan with
	// ErrUnsupported.
	BlobBytes bool
	// BatchSize is the number of physical rows read per batch (default 8192).
	BatchSize int
	// Fragments restricts the scan to these fragment ids (nil: all).
	Fragments []uint64
	// Parallelism is the number of fragments read ahead concurrently (default 4).
	Parallelism int
}

// Scanner iterates the batches of a scan in table order. It implements
// array.RecordReader; call Release when done (it stops the read-ahead).
type Scanner struct {
	schema *arrow.Schema
	cancel context.CancelFunc
	out    chan scanItem
	wg     sync.WaitGroup
	cur    arrow.RecordBatch
	err    error
	refs   int64
}

type scanItem struct {
	rec arrow.RecordBatch
	err error
}

// Scan starts a scan of this version.
func (d *Dataset) Scan(ctx context.Context, opts ScanOptions) (*Scanner, error) {
	plan, err := d.planScan(opts)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	s := &Scanner{schema: plan.outSchema, cancel: cancel, out: make(chan scanItem, 2), refs: 1}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(s.out)
		plan.run(ctx, d.store, s.out)
	}()
	return s, nil
}

// Schema is the schema of the batches.
func (s *Scanner) Schema() *arrow.Schema { return s.schema }

// Next advances to the next batch; it returns false at the end or on error (see Err).
func (s *Scanner) Next() bool {
	if s.cur != nil {
		s.cur.Release()
		s.cur = nil
	}
	if s.err != nil {
		return false
	}
	it, ok := <-s.out
	if !ok {
		return false
	}
	if it.err != nil {
		s.err = it.err
		return false
	}
	s.cur = it.rec
	return true
}

// RecordBatch is the current batch, valid until the next call to Next.
func (s *Scanner) RecordBatch() arrow.RecordBatch { return s.cur }

// Record is RecordBatch, for the array.RecordReader interface.
//
// Deprecated: use RecordBatch.
func (s *Scanner) Record() arrow.RecordBatch { return s.cur }

// Err is the error that ended the scan, if any.
func (s *Scanner) Err() error { return s.err }

// Retain is part of array.RecordReader.
func (s *Scanner) Retain() { s.refs++ }

// Release stops the scan and frees its batches once the last reference is released.
func (s *Scanner) Release() {
	if s.refs--; s.refs > 0 {
		return
	}
	s.cancel()
	for it := range s.out {
		if it.rec != nil {
			it.rec.Release()
		}
	}
	s.wg.Wait()
	if s.cur != nil {
		s.cur.Release()
		s.cur = nil
	}
}

// ToTable-like helper: Collect reads every batch of a scan into memory. Meant for small
// results (tests, CLI); large scans should iterate.
func (d *Dataset) Collect(ctx context.Context, opts ScanOptions) ([]arrow.RecordBatch, error) {
	s, err := d.Scan(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer s.Release()
	var out []arrow.RecordBatch
	for s.Next() {
		rec := s.RecordBatch()
		rec.Retain()
		out = append(out, rec)
	}
	if err := s.Err(); err != nil {
		for _, r := range out {
			r.Release()
		}
		return nil, err
	}
	return out, nil
}

// scanPlan is a validated scan: which fields to read, how to filter, what to output.
type scanPlan struct {
	frags      []*tablepb.DataFragment
	readFields []*schema.Field // fields read from data files (output ∪ filter columns)
	fileSchema *arrow.Schema   // of readFields
	// virtual are the virtual columns (_rowid, _rowaddr) the output or filter uses,
	// computed for each batch after readFields.
	virtual     []string
	readSchema  *arrow.Schema // readFields, then virtual
	outIdx      []int         // positions in readSchema of the output columns
	outSchema   *arrow.Schema
	filter      expr.Expr // bound to readSchema; nil when none
	stable      bool      // _rowid is the stable row id
	offset      int64
	limit       int64
	batchSize   int
	parallelism int

	// Late materialization, set when the filter reads fewer columns than the scan:
	// each batch reads the filter's columns first and the others only when a row
	// passes, so a point lookup (key = x) reads the key column of the table, not every
	// column of it.
	late *lateColumns
}

// lateColumns splits readFields into the filter's columns and the rest.
type lateColumns struct {
	filterFields []*schema.Field
	filterFile   *arrow.Schema // of filterFields
	filterSchema *arrow.Schema // filterFields, then the virtual columns
	filter       expr.Expr     // bound to filterSchema
	filterPos    []int         // positions in readFields
	restFields   []*schema.Field
	restSchema   *arrow.Schema
	restPos      []int
}

func (d *Dataset) planScan(opts ScanOptions) (*scanPlan, error) {
	p := &scanPlan{offset: opts.Offset, limit: opts.Limit, stable: usesStableRowIDs(d.mf.Manifest),
		batchSize: opts.BatchSize, parallelism: opts.Parallelism}
	if p.offset < 0 || p.limit < 0 {
		return nil, fmt.Errorf("lance: negative offset or limit")
	}
	if p.batchSize <= 0 {
		p.batchSize = 8192
	}
	if p.parallelism <= 0 {
		p.parallelism = 4
	}
	outNames := opts.Columns
	if outNames == nil {
		for _, f := range d.schema.Fields {
			outNames = append(outNames, f.Name)
		}
	}
	outNames = slices.Clip(outNames)
	if opts.WithRowID && !slices.Contains(outNames, RowIDColumn) {
		outNames = append(outNames, RowIDColumn)
	}
	if opts.WithRowAddr && !slices.Contains(outNames, RowAddrColumn) {
		outNames = append(outNames, RowAddrColumn)
	}
	var e expr.Expr
	var filterNames []string
	if opts.Filter != "" {
		var err error
		if e, err = expr.Parse(opts.Filter); err != nil {
			return nil, err
		}
		filterNames = e.Columns()
	}
	seen := map[string]bool{}
	for _, name := range slices.Concat(outNames, filterNames) {
		if seen[name] {
			continue
		}
		seen[name] = true
		if isVirtual(name) {
			p.virtual = append(p.virtual, name)
			continue
		}
		f := d.schema.Field(name)
		if f == nil {
			return nil, fmt.Errorf("lance: no column %q in the table", name)
		}
		p.readFields = append(p.readFields, scanField(f, opts.BlobBytes))
	}
	fields := make([]arrow.Field, 0, len(p.readFields)+len(p.virtual))
	for _, f := range p.readFields {
		fields = append(fields, f.Arrow())
	}
	p.fileSchema = arrow.NewSchema(slices.Clone(fields), nil)
	for _, v := range p.virtual {
		fields = append(fields, virtualField(v))
	}
	p.readSchema = arrow.NewSchema(fields, nil)
	pos := make(map[string]int, len(fields))
	for i, f := range fields {
		pos[f.Name] = i
	}
	out := make([]arrow.Field, 0, len(outNames))
	for _, name := range outNames {
		p.outIdx = append(p.outIdx, pos[name])
		out = append(out, fields[pos[name]])
	}
	p.outSchema = arrow.NewSchema(out, nil)
	if e != nil {
		bound, err := expr.Bind(e, p.readSchema)
		if err != nil {
			return nil, err
		}
		p.filter = bound
		if p.late, err = p.planLate(e); err != nil {
			return nil, err
		}
	}
	p.frags = d.Fragments()
	if opts.Fragments != nil {
		want := map[uint64]bool{}
		for _, id := range opts.Fragments {
			want[id] = true
		}
		var sel []*tablepb.DataFragment
		for _, f := range p.frags {
			if want[f.GetId()] {
				sel = append(sel, f)
			}
		}
		p.frags = sel
	}
	return p, nil
}

// planLate splits the read fields for late materialization; nil when the filter
// reads every one of them anyway. The virtual columns go with the filter's (they cost
// no read).
func (p *scanPlan) planLate(e expr.Expr) (*lateColumns, error) {
	inFilter := map[string]bool{}
	virtualOnly := true
	for _, c := range e.Columns() {
		inFilter[c] = true
		virtualOnly = virtualOnly && isVirtual(c)
	}
	l := &lateColumns{}
	var ff, rf []arrow.Field
	for i, f := range p.readFields {
		af := p.readSchema.Field(i)
		if inFilter[f.Name] {
			l.filterFields, l.filterPos, ff = append(l.filterFields, f), append(l.filterPos, i), append(ff, af)
		} else {
			l.restFields, l.restPos, rf = append(l.restFields, f), append(l.restPos, i), append(rf, af)
		}
	}
	if len(l.restFields) == 0 || len(l.filterFields) == 0 && !virtualOnly {
		return nil, nil
	}
	l.filterFile = arrow.NewSchema(slices.Clone(ff), nil)
	for _, v := range p.virtual {
		ff = append(ff, virtualField(v))
	}
	l.filterSchema, l.restSchema = arrow.NewSchema(ff, nil), arrow.NewSchema(rf, nil)
	bound, err := expr.Bind(e, l.filterSchema)
	if err != nil {
		return nil, err
	}
	l.filter = bound
	return l, nil
}

// readRows reads the fragment's physical rows [start, end) (or offs) as readSchema.
func (p *scanPlan) readRows(ctx context.Context, st objstore.Reader, fr *fragmentReader, start, end uint64, offs []uint64) (arrow.RecordBatch, error) {
	return p.readWith(ctx, st, fr, p.readFields, p.fileSchema, p.readSchema, start, end, offs)
}

// readWith reads fields (as fileSchema) of the fragment's rows and appends the virtual
// columns, giving a batch of schema s.
func (p *scanPlan) readWith(ctx context.Context, st objstore.Reader, fr *fragmentReader, fields []*schema.Field, fileSchema, s *arrow.Schema, start, end uint64, offs []uint64) (arrow.RecordBatch, error) {
	n := int64(end - start)
	if offs != nil {
		n = int64(len(offs))
	}
	var rec arrow.RecordBatch
	if len(fields) > 0 {
		var err error
		if rec, err = fr.read(ctx, st, fields, fileSchema, start, end, offs); err != nil {
			return nil, err
		}
	} else {
		rec = array.NewRecordBatch(fileSchema, nil, n)
	}
	if len(p.virtual) == 0 {
		return rec, nil
	}
	defer rec.Release()
	virt, err := fr.virtualColumns(p.virtual, p.stable, start, end, offs)
	if err != nil {
		return nil, err
	}
	cols := append(slices.Clone(rec.Columns()), virt...)
	out := array.NewRecordBatch(s, cols, n)
	for _, c := range virt {
		c.Release()
	}
	return out, nil
}

// project returns the output columns of a batch of readSchema.
func (p *scanPlan) project(rec arrow.RecordBatch) arrow.RecordBatch {
	cols := make([]arrow.Array, len(p.outIdx))
	for i, k := range p.outIdx {
		cols[i] = rec.Column(k)
	}
	return array.NewRecordBatch(p.outSchema, cols, rec.NumRows())
}

// run reads fragments with bounded read-ahead and sends output batches in table order.
func (p *scanPlan) run(ctx context.Context, st objstore.Store, out chan<- scanItem) {
	send := func(it scanItem) bool {
		select {
		case out <- it:
			return true
		case <-ctx.Done():
			if it.rec != nil {
				it.rec.Release()
			}
			return false
		}
	}
	frags := p.frags
	skip := p.offset
	if p.filter == nil {
		// Without a filter the visible row count of each fragment is known from the
		// manifest, so whole fragments inside the offset are never read.
		for len(frags) > 0 {
			n := int64(frags[0].GetPhysicalRows() - frags[0].GetDeletionFile().GetNumDeletedRows())
			if n > skip {
				break
			}
			skip -= n
			frags = frags[1:]
		}
	}
	remaining := p.limit
	// Each fragment gets a channel; workers fill them ahead, the loop drains in order.
	chans := make([]chan scanItem, len(frags))
	for i := range chans {
		chans[i] = make(chan scanItem, 4)
	}
	sem := make(chan struct{}, p.parallelism)
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		for i, f := range frags {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				for _, c := range chans[i:] {
					close(c)
				}
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				defer close(chans[i])
				p.readFragment(ctx, st, f, chans[i])
			}()
		}
	}()
	for _, c := range chans {
		for it := range c {
			if it.err != nil {
				send(it)
				cancel()
				drain(chans)
				return
			}
			rec := it.rec
			if skip > 0 {
				if rec.NumRows() <= skip {
					skip -= rec.NumRows()
					rec.Release()
					continue
				}
				s := rec.NewSlice(skip, rec.NumRows())
				rec.Release()
				rec, skip = s, 0
			}
			if p.limit > 0 {
				if rec.NumRows() >= remaining {
					s := rec.NewSlice(0, remaining)
					rec.Release()
					send(scanItem{rec: s})
					cancel()
					drain(chans)
					return
				}
				remaining -= rec.NumRows()
			}
			if !send(scanItem{rec: rec}) {
				drain(chans)
				return
			}
		}
	}
}

func drain(chans []chan scanItem) {
	for _, c := range chans {
		for it := range c {
			if it.rec != nil {
				it.rec.Release()
			}
		}
	}
}

// readFragment streams the output batches of one fragment into ch.
func (p *scanPlan) readFragment(ctx context.Context, st objstore.Store, frag *tablepb.DataFragment, ch chan<- scanItem) {
	send := func(it scanItem) bool {
		select {
		case ch <- it:
			return true
		case <-ctx.Done():
			if it.rec != nil {
				it.rec.Release()
			}
			return false
		}
	}
	fr, err := openFragment(frag)
	if err != nil {
		send(scanItem{err: err})
		return
	}
	deleted, err := readDeletionVector(ctx, st, frag)
	if err != nil {
		send(scanItem{err: fmt.Errorf("fragment %d: %w", frag.GetId(), err)})
		return
	}
	// Up to batchWindow batches are decoded at once and sent in order: a table of one
	// large fragment (LanceDB's default is 1M rows per file) then keeps more than one
	// core busy, and the compressed 2.1 encodings make decoding the bulk of a scan.
	total := frag.GetPhysicalRows()
	var pending []chan scanItem
	next := uint64(0)
	launch := func() {
		start, end := next, min(next+uint64(p.batchSize), total)
		next = end
		c := make(chan scanItem, 1)
		pending = append(pending, c)
		go func() {
			rec, err := p.readBatch(ctx, st, fr, deleted, start, end)
			c <- scanItem{rec: rec, err: err}
		}()
	}
	defer func() {
		for _, c := range pending {
			if it := <-c; it.rec != nil {
				it.rec.Release()
			}
		}
	}()
	for next < total && len(pending) < batchWindow {
		launch()
	}
	for len(pending) > 0 {
		it := <-pending[0]
		pending = pending[1:]
		if next < total && ctx.Err() == nil && it.err == nil {
			launch()
		}
		if it.err != nil {
			send(scanItem{err: it.err})
			return
		}
		if it.rec == nil {
			continue
		}
		if !send(it) {
			return
		}
	}
}

// batchWindow is how many batches of one fragment a scan decodes at once.
const batchWindow = 2

// readBatch reads physical rows [start,end) of a fragment and applies deletions, the
// filter and the projection. It returns nil when no row survives.
func (p *scanPlan) readBatch(ctx context.Context, st objstore.Reader, fr *fragmentReader, deleted *roaring.Bitmap, start, end uint64) (arrow.RecordBatch, error) {
	n := int(end - start)
	var keep []bool
	anyDeleted := !deleted.IsEmpty() && deleted.IntersectsWithInterval(start, end)
	if anyDeleted {
		keep = make([]bool, n)
		for i := range keep {
			keep[i] = !deleted.Contains(uint32(start) + uint32(i))
		}
	}
	var rec arrow.RecordBatch
	filtered := false
	var err error
	if p.late != nil {
		rec, keep, err = p.readLate(ctx, st, fr, start, end, keep)
		if err != nil || rec == nil {
			return nil, err
		}
		filtered = true
	} else if rec, err = p.readRows(ctx, st, fr, start, end, nil); err != nil {
		return nil, err
	}
	defer rec.Release()
	if p.filter != nil && !filtered {
		sel, err := expr.Select(ctx, p.filter, rec)
		if err != nil {
			return nil, err
		}
		if keep == nil {
			keep = make([]bool, n)
			for i := range keep {
				keep[i] = sel.Get(i)
			}
		} else {
			for i := range keep {
				keep[i] = keep[i] && sel.Get(i)
			}
		}
	}
	outRec := p.project(rec)
	if keep == nil {
		return outRec, nil
	}
	defer outRec.Release()
	return arrowrows.Select(outRec, keep)
}

// readLate reads the filter's columns of rows [start,end), evaluates the filter, and
// only when a row passes reads the other columns. It returns the batch in readSchema
// order and keep (deletions and filter combined), or a nil batch when no row passes.
func (p *scanPlan) readLate(ctx context.Context, st objstore.Reader, fr *fragmentReader, start, end uint64, keep []bool) (arrow.RecordBatch, []bool, error) {
	l := p.late
	n := int(end - start)
	frec, err := p.readWith(ctx, st, fr, l.filterFields, l.filterFile, l.filterSchema, start, end, nil)
	if err != nil {
		return nil, nil, err
	}
	defer frec.Release()
	sel, err := expr.Select(ctx, l.filter, frec)
	if err != nil {
		return nil, nil, err
	}
	if keep == nil {
		keep = make([]bool, n)
		for i := range keep {
			keep[i] = true
		}
	}
	hit := false
	for i := range keep {
		keep[i] = keep[i] && sel.Get(i)
		hit = hit || keep[i]
	}
	if !hit {
		return nil, nil, nil
	}
	rrec, err := fr.read(ctx, st, l.restFields, l.restSchema, start, end, nil)
	if err != nil {
		return nil, nil, err
	}
	defer rrec.Release()
	cols := make([]arrow.Array, p.readSchema.NumFields())
	for j, i := range l.filterPos {
		cols[i] = frec.Column(j)
	}
	for j, i := range l.restPos {
		cols[i] = rrec.Column(j)
	}
	for k := range p.virtual {
		cols[len(p.readFields)+k] = frec.Column(len(l.filterFields) + k)
	}
	return array.NewRecordBatch(p.readSchema, cols, int64(n)), keep, nil
}

// storeSource adapts an object to file.Source with range reads.
type storeSource struct {
	st  objstore.Reader
	key string
}

func (s *storeSource) ReadRange(ctx context.Context, off, length int64) ([]byte, error) {
	rc, err := s.st.GetRange(ctx, s.key, off, length)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	buf := make([]byte, length)
	if _, err := io.ReadFull(rc, buf); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: %s is shorter than %d bytes at %d", ErrCorrupt, s.key, length, off)
		}
		return nil, err
	}
	return buf, nil
}
