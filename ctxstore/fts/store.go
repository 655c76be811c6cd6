package fts

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/google/uuid"

	"github.com/lancectx/lancectx/ctxstore"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/lance/format/tablepb"
	"github.com/lancectx/lancectx/objstore"
)

// Dir is where a context store's full-text index lives, beside its base table: a
// directory Lance neither reads nor cleans (LanceDB opens the table as before; lance
// cleanup lists data/, _deletions/, _transactions/ and _indices/ only).
const Dir = "_lancectx/fts/"

// ManifestKey names the index's manifest: the segments in use, replaced whole by
// each build (a Put is atomic: readers see the old or the new one).
const ManifestKey = Dir + "index.json"

// segmentPrefix begins every segment file's key.
const segmentPrefix = Dir + "seg-"

// Manifest lists the segments of a store's full-text index.
type Manifest struct {
	// Incarnation is the base table's incarnation the segments were built from: a
	// manifest of another incarnation (a store deleted and created again) is ignored.
	Incarnation string `json:"incarnation"`
	// Version is the base table version of the last build.
	Version  uint64       `json:"version"`
	Segments []SegmentRef `json:"segments"`
}

// SegmentRef is one segment file and the fragments it covers.
type SegmentRef struct {
	Key       string     `json:"key"`
	Fragments []Fragment `json:"fragments"`
	Docs      int        `json:"docs"`
	Bytes     int64      `json:"bytes"`
}

// ReadManifest reads the manifest of the index kept in st (nil when there is none).
func ReadManifest(ctx context.Context, st objstore.Reader) (*Manifest, error) {
	buf, err := objstore.ReadAll(ctx, st, ManifestKey)
	if errors.Is(err, objstore.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("fts: read manifest: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(buf, &m); err != nil {
		return nil, fmt.Errorf("%w: manifest: %v", ErrCorrupt, err)
	}
	return &m, nil
}

// LoadSegment reads and decodes one segment file.
func LoadSegment(ctx context.Context, st objstore.Reader, key string) (*Segment, error) {
	buf, err := objstore.ReadAll(ctx, st, key)
	if err != nil {
		return nil, fmt.Errorf("fts: read %s: %w", key, err)
	}
	s, err := DecodeSegment(buf)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	return s, nil
}

// FragmentOf describes a base fragment as a segment records it.
func FragmentOf(f *tablepb.DataFragment) Fragment {
	out := Fragment{ID: f.GetId(), Rows: f.GetPhysicalRows()}
	if files := f.GetFiles(); len(files) > 0 {
		out.DataFile = files[0].GetPath()
	}
	return out
}

// Coverage maps the fragments of ds that the manifest's segments cover (the same id,
// row count and data file) to the index of the covering segment in m.Segments. A
// fragment two segments claim (two builds that raced) goes to the first.
func Coverage(m *Manifest, ds *lance.Dataset, incarnation string) map[uint64]int {
	out := map[uint64]int{}
	if m == nil || m.Incarnation != incarnation {
		return out
	}
	cur := map[uint64]Fragment{}
	for _, f := range ds.Fragments() {
		cur[f.GetId()] = FragmentOf(f)
	}
	for i, s := range m.Segments {
		for _, f := range s.Fragments {
			if c, ok := cur[f.ID]; ok && c == f {
				if _, taken := out[f.ID]; !taken {
					out[f.ID] = i
				}
			}
		}
	}
	return out
}

// Unindexed counts the live rows of ds in fragments the manifest does not cover.
func Unindexed(m *Manifest, ds *lance.Dataset, incarnation string) (rows, indexed int64) {
	cov := Coverage(m, ds, incarnation)
	for _, f := range ds.Fragments() {
		n := int64(f.GetPhysicalRows()) - int64(f.GetDeletionFile().GetNumDeletedRows())
		if _, ok := cov[f.GetId()]; ok {
			indexed += n
		} else {
			rows += n
		}
	}
	return rows, indexed
}

// BuildOptions tune Build.
type BuildOptions struct {
	// Incarnation is the base table's (wal.Incarnation).
	Incarnation string
	// MaxSegments: a build that would leave more segments merges them all into one
	// (default 8).
	MaxSegments int
	// GCAge: segment files no manifest lists and older than this are deleted (default
	// one hour: a reader that read the previous manifest has long loaded its files).
	GCAge time.Duration
	// Now is the clock of the GC (default time.Now).
	Now func() time.Time
}

// BuildResult says what a build did.
type BuildResult struct {
	// Op is "build" (a new segment), "rebuild" (all segments merged into one) or
	// "noop" (every fragment covered).
	Op string
	// Docs are the documents of the new segment; Segments and Indexed describe the
	// index after the build; Deleted counts the segment files removed.
	Docs, Segments int
	Indexed        int64
	Deleted        int
}

// Build brings the full-text index of ds up to date: the fragments no segment covers
// (appended since, or written by a compaction) get a new segment, segments that cover
// no fragment of ds any more are dropped, and too many segments are merged into one.
// It writes the segment, then the manifest; a reader of an older version of the table
// still finds the fragments of its version covered or scans them. It never changes
// the table. Two builds racing lose nothing but coverage (the later manifest wins; the
// rows of the other's segment are read from the table until the next build).
func Build(ctx context.Context, ds *lance.Dataset, o BuildOptions) (BuildResult, error) {
	if o.MaxSegments <= 0 {
		o.MaxSegments = 8
	}
	if o.GCAge <= 0 {
		o.GCAge = time.Hour
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	st := ds.Store()
	old, err := ReadManifest(ctx, st)
	if err != nil && !errors.Is(err, ErrCorrupt) {
		return BuildResult{}, err
	}
	cov := Coverage(old, ds, o.Incarnation)
	next := &Manifest{Incarnation: o.Incarnation, Version: ds.Version()}
	used := map[int]bool{}
	for _, i := range cov {
		used[i] = true
	}
	if old != nil && old.Incarnation == o.Incarnation {
		for i, s := range old.Segments {
			if used[i] {
				next.Segments = append(next.Segments, s)
			}
		}
	}
	res := BuildResult{Op: "build"}
	var todo []uint64
	for _, f := range ds.Fragments() {
		if _, ok := cov[f.GetId()]; !ok {
			todo = append(todo, f.GetId())
		}
	}
	if len(next.Segments)+1 > o.MaxSegments && len(todo) > 0 {
		res.Op = "rebuild"
		next.Segments = nil
		todo = todo[:0]
		for _, f := range ds.Fragments() {
			todo = append(todo, f.GetId())
		}
	}
	if len(todo) == 0 {
		res.Op = "noop"
	} else {
		seg, err := buildSegment(ctx, ds, todo)
		if err != nil {
			return res, err
		}
		buf, err := seg.Encode()
		if err != nil {
			return res, err
		}
		key := segmentPrefix + uuid.NewString() + ".fts"
		if err := st.Put(ctx, key, bytes.NewReader(buf)); err != nil {
			return res, fmt.Errorf("fts: write segment: %w", err)
		}
		res.Docs = len(seg.Addr)
		next.Segments = append(next.Segments, SegmentRef{Key: key, Fragments: seg.Fragments, Docs: len(seg.Addr), Bytes: int64(len(buf))})
	}
	changed := old == nil || res.Op != "noop" || len(next.Segments) != len(old.Segments) || old.Incarnation != o.Incarnation
	if changed {
		mbuf, err := json.Marshal(next)
		if err != nil {
			return res, err
		}
		if err := st.Put(ctx, ManifestKey, bytes.NewReader(mbuf)); err != nil {
			return res, fmt.Errorf("fts: write manifest: %w", err)
		}
	}
	res.Segments = len(next.Segments)
	_, res.Indexed = Unindexed(next, ds, o.Incarnation)
	res.Deleted, err = gc(ctx, st, next, o.Now().Add(-o.GCAge))
	return res, err
}

// gc deletes the segment files m does not list that were written before cutoff.
func gc(ctx context.Context, st objstore.Store, m *Manifest, cutoff time.Time) (int, error) {
	keep := map[string]bool{}
	for _, s := range m.Segments {
		keep[s.Key] = true
	}
	var dead []string
	err := objstore.Walk(ctx, st, objstore.ListOptions{Prefix: segmentPrefix}, func(o objstore.ObjectInfo) error {
		if !keep[o.Key] && o.LastModified.Before(cutoff) {
			dead = append(dead, o.Key)
		}
		return nil
	})
	if err != nil || len(dead) == 0 {
		return 0, err
	}
	if err := st.DeleteBatch(ctx, dead); err != nil {
		return 0, fmt.Errorf("fts: delete old segments: %w", err)
	}
	return len(dead), nil
}

// buildSegment indexes the rows of fragments frags of ds, one fragment at a time in
// id order (so documents come by row address).
func buildSegment(ctx context.Context, ds *lance.Dataset, frags []uint64) (*Segment, error) {
	slices.Sort(frags)
	byID := map[uint64]*tablepb.DataFragment{}
	for _, f := range ds.Fragments() {
		byID[f.GetId()] = f
	}
	b := NewBuilder()
	cols := append([]string{ctxstore.ColID, ctxstore.ColTextPayload}, ctxstore.StateColumns...)
	for _, id := range frags {
		b.AddFragment(FragmentOf(byID[id]))
		sc, err := ds.Scan(ctx, lance.ScanOptions{Columns: cols, WithRowAddr: true, Fragments: []uint64{id}})
		if err != nil {
			return nil, err
		}
		for sc.Next() {
			rec := sc.RecordBatch()
			idx := rec.Schema().FieldIndices(lance.RowAddrColumn)
			if len(idx) == 0 {
				sc.Release()
				return nil, errors.New("fts: scan returned no row addresses")
			}
			addrs := rec.Column(idx[0]).(*array.Uint64)
			rows := ctxstore.NewRows(rec)
			for i := 0; i < rows.Len(); i++ {
				t := rows.Str(ctxstore.ColTextPayload, i)
				if t == nil {
					continue
				}
				tomb := rows.String(ctxstore.ColContentType, i) == ctxstore.ContentTypeTombstone
				retired := ctxstore.Retired(rows.String(ctxstore.ColLifecycleStatus, i), rows.Time(ctxstore.ColRetiredAt, i) != nil)
				if err := b.Add(addrs.Value(i), rows.String(ctxstore.ColID, i), *t, rows.Time(ctxstore.ColExpiresAt, i), tomb, retired); err != nil {
					sc.Release()
					return nil, err
				}
			}
		}
		err = sc.Err()
		sc.Release()
		if err != nil {
			return nil, fmt.Errorf("fts: scan fragment %d: %w", id, err)
		}
	}
	return b.Segment(), nil
}
