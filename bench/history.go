package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
)

// The maintenance backlog of issue 3: a stats table with tens of thousands of versions,
// shaped like the production `_stats.rollout.lance` of the incident (seeds/): one
// experiment per row, and every version a small change (an upsert of a few rows, or an
// append or a delete), so each old version leaves a manifest, a transaction file and
// usually a data file or a deletion file behind. The last two versions are the
// compaction a stats maintenance pass runs before its cleanup (materializing deletions
// into one fragment), so the latest version references one data file and LanceDB's
// optimize, which compacts before it cleans up, has no compaction left to do.

const (
	// DefaultHistoryKeys is the number of experiments (rows) of the history table. Far
	// fewer than production's ~10.4k: every upsert scans the key column of every live
	// fragment, and the fragment count grows with the key count, so 10k keys would make
	// each of the 68k commits hundreds of times slower. Cleanup does not depend on it:
	// it reads the latest manifest only (lancectx) or every manifest (LanceDB, whose
	// manifests are small here for the same reason).
	DefaultHistoryKeys = 48
	// historyRowsPerFile is the fragment size of version 1, so upserts of a subset of a
	// fragment's rows leave deletion files.
	historyRowsPerFile = 8
	// historyKey is the upsert key column.
	historyKey = "experiment"
	// markerSuffix names the file next to a generated dataset that records how it was
	// built; its presence means the build completed.
	markerSuffix = ".build.json"
)

// HistorySchema is the stats-shaped table of the history.
func HistorySchema() *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: historyKey, Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "rounds", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "rollouts", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "reward_mean", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "updated_at_ms", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
}

func historyKeyName(i int) string { return fmt.Sprintf("exp-%04d", i) }

// historyBatch builds the rows of keys as written by version v (values depend only on
// the key, the version and the seed).
func historyBatch(keys []int, v uint64, seed uint32) arrow.RecordBatch {
	mem := memory.DefaultAllocator
	b := array.NewRecordBuilder(mem, HistorySchema())
	defer b.Release()
	for _, k := range keys {
		r := splitmix32{s: seed ^ uint32(k)*0x85ebca6b ^ uint32(v)*0xc2b2ae35}
		b.Field(0).(*array.StringBuilder).Append(historyKeyName(k))
		b.Field(1).(*array.Int64Builder).Append(int64(v))
		b.Field(2).(*array.Int64Builder).Append(int64(r.next() % 100000))
		b.Field(3).(*array.Float64Builder).Append(float64(r.next()>>8) / (1 << 24))
		b.Field(4).(*array.Int64Builder).Append(1_760_000_000_000 + int64(v)*1000)
	}
	return b.NewRecordBatch()
}

func historyReader(keys []int, v uint64, seed uint32) (array.RecordReader, error) {
	rec := historyBatch(keys, v, seed)
	defer rec.Release()
	return array.NewRecordReader(HistorySchema(), []arrow.RecordBatch{rec})
}

// HistoryMarker is the content of the marker file written once a history is complete.
type HistoryMarker struct {
	Generator string `json:"generator"`
	Versions  uint64 `json:"versions"`
	Keys      int    `json:"keys"`
	Seed      uint32 `json:"seed"`
	Rows      int64  `json:"rows"`
	// Ops counts the commits by kind (upsert, append, delete, compaction) made by the
	// process that finished the build (all of them unless Resumed).
	Ops map[string]int `json:"ops"`
	// Objects is what the directory held when the build finished.
	Objects ObjectCounts `json:"objects"`
	// BuildSeconds covers the commits of this process only (a resumed build says so).
	BuildSeconds float64 `json:"build_seconds"`
	Resumed      bool    `json:"resumed"`
	CommitsPerS  float64 `json:"commits_per_s"`
	Store        string  `json:"store"`
	BuiltAt      string  `json:"built_at"`
	GoVersion    string  `json:"go_version"`
	Revision     string  `json:"vcs_revision,omitempty"`
}

// GenHistoryResult is the output of gen-history.
type GenHistoryResult struct {
	Cmd    string `json:"cmd"`
	Reused bool   `json:"reused"`
	HistoryMarker
}

// HistoryOptions tune gen-history.
type HistoryOptions struct {
	Versions uint64
	Keys     int
	Seed     uint32
	// PlainStore commits through the fixture store without the in-memory _versions
	// listing (diagnosis: shows what listing a large _versions directory costs).
	PlainStore bool
	// Progress receives a line every few seconds (nil: none).
	Progress io.Writer
}

// GenHistory builds (or reuses, or resumes) the history at uri: o.Versions versions of
// o.Keys stats rows, every one a real lancectx commit. A complete build is recorded in
// uri+".build.json"; with it present and matching, the dataset is reused untouched.
func GenHistory(ctx context.Context, uri string, o HistoryOptions) (*GenHistoryResult, error) {
	if o.Keys <= 0 {
		o.Keys = DefaultHistoryKeys
	}
	if o.Versions < 4 || o.Keys < 8 {
		return nil, fmt.Errorf("%w: gen-history needs --versions >= 4 and --keys >= 8", ErrUsage)
	}
	unlock, err := lockFile(uri + ".lock")
	if err != nil {
		return nil, err
	}
	defer unlock()
	if m, err := ReadMarker(uri); err == nil {
		if m.Versions != o.Versions || m.Keys != o.Keys || m.Seed != o.Seed {
			return nil, fmt.Errorf("gen-history: %s was built with versions=%d keys=%d seed=%d; remove it (and its %s) to rebuild",
				uri, m.Versions, m.Keys, m.Seed, markerSuffix)
		}
		return &GenHistoryResult{Cmd: "gen-history", Reused: true, HistoryMarker: *m}, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	fx, err := newFixtureStore(uri)
	if err != nil {
		return nil, err
	}
	var st objstore.Store = fx
	storeDesc := "bench fixture store (local files, no fsync), _versions/ listing served from an in-memory index"
	if o.PlainStore {
		storeDesc = "bench fixture store (local files, no fsync)"
	} else if st, err = newIndexedStore(fx); err != nil {
		return nil, err
	}
	defer st.Close()
	g := &historyGen{uri: uri, st: st, o: o, ops: map[string]int{}}
	t0 := time.Now()
	resumed, err := g.run(ctx)
	if err != nil {
		return nil, err
	}
	secs := time.Since(t0).Seconds()
	counts, err := CountObjects(uri)
	if err != nil {
		return nil, err
	}
	m := HistoryMarker{
		Generator: "lancebench gen-history (real lancectx commits: lance.Write, MergeInsert, Append, Delete, Compact)",
		Versions:  g.ds.Version(), Keys: o.Keys, Seed: o.Seed, Rows: g.ds.CountRows(), Ops: g.ops,
		Objects: counts, BuildSeconds: secs, Resumed: resumed, CommitsPerS: float64(g.commits) / secs,
		Store: storeDesc, BuiltAt: time.Now().UTC().Format(time.RFC3339), GoVersion: runtime.Version(), Revision: vcsRevision(),
	}
	buf, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(uri+markerSuffix, append(buf, '\n'), 0o644); err != nil {
		return nil, fmt.Errorf("gen-history: write marker: %w", err)
	}
	return &GenHistoryResult{Cmd: "gen-history", HistoryMarker: m}, nil
}

// ReadMarker reads the build marker of the generated dataset at uri.
func ReadMarker(uri string) (*HistoryMarker, error) {
	buf, err := os.ReadFile(uri + markerSuffix)
	if err != nil {
		return nil, err
	}
	var m HistoryMarker
	if err := json.Unmarshal(buf, &m); err != nil {
		return nil, fmt.Errorf("marker %s: %w", uri+markerSuffix, err)
	}
	return &m, nil
}

func vcsRevision() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev != "" && dirty {
		rev += "+dirty"
	}
	return rev
}

type historyGen struct {
	uri     string
	st      objstore.Store
	o       HistoryOptions
	ds      *lance.Dataset
	present []bool
	ops     map[string]int
	commits int
}

// run commits until the history is complete. It resumes a dataset left by an
// interrupted build (the op of each version depends only on the seed, the version and
// the rows present, which are read back).
func (g *historyGen) run(ctx context.Context) (resumed bool, err error) {
	o := g.o
	churnEnd := o.Versions - 2 // the last two versions are the compaction
	g.present = make([]bool, o.Keys)
	g.ds, err = lance.OpenStore(ctx, g.st)
	switch {
	case errors.Is(err, lance.ErrDatasetNotFound):
		all := make([]int, o.Keys)
		for i := range all {
			all[i] = i
			g.present[i] = true
		}
		rdr, err := historyReader(all, 1, o.Seed)
		if err != nil {
			return false, err
		}
		g.ds, err = lance.WriteStore(ctx, g.st, rdr, lance.WriteOptions{Mode: lance.ModeCreate, MaxRowsPerFile: historyRowsPerFile})
		rdr.Release()
		if err != nil {
			return false, fmt.Errorf("gen-history: version 1: %w", err)
		}
		g.ops["create"]++
		g.commits++
	case err != nil:
		return false, err
	default:
		resumed = true
		if g.ds.Version() == o.Versions && g.ds.Transaction().GetRewrite() != nil {
			return resumed, nil // complete; only the marker was missing
		}
		if g.ds.Version() > churnEnd {
			return false, fmt.Errorf("gen-history: %s stopped during its final compaction (version %d); remove it to rebuild", g.uri, g.ds.Version())
		}
		if err := g.readPresent(ctx); err != nil {
			return false, err
		}
	}
	start, last := time.Now(), time.Now()
	first := g.ds.Version()
	for g.ds.Version() < churnEnd {
		if err := ctx.Err(); err != nil {
			return resumed, err
		}
		if err := g.step(ctx); err != nil {
			return resumed, fmt.Errorf("gen-history: version %d: %w", g.ds.Version()+1, err)
		}
		if o.Progress != nil && time.Since(last) >= 5*time.Second {
			last = time.Now()
			done := g.ds.Version() - first
			fmt.Fprintf(o.Progress, "gen-history: version %d/%d, %.0f commits/s, %d fragments\n",
				g.ds.Version(), o.Versions, float64(done)/time.Since(start).Seconds(), len(g.ds.Fragments()))
		}
	}
	next, cres, err := g.ds.Compact(ctx, lance.CompactOptions{Logger: discardLogger()})
	if err != nil {
		return resumed, fmt.Errorf("gen-history: final compaction: %w", err)
	}
	if next.Version() != o.Versions || cres.FragmentsAdded != 1 {
		return resumed, fmt.Errorf("gen-history: final compaction made version %d with %d fragments, want version %d with 1", next.Version(), cres.FragmentsAdded, o.Versions)
	}
	g.ds = next
	g.ops["compaction"] += 2
	g.commits += 2
	return resumed, nil
}

// readPresent learns which keys are present from a scan of the key column.
func (g *historyGen) readPresent(ctx context.Context) error {
	sc, err := g.ds.Scan(ctx, lance.ScanOptions{Columns: []string{historyKey}})
	if err != nil {
		return err
	}
	defer sc.Release()
	for sc.Next() {
		col, ok := sc.RecordBatch().Column(0).(*array.String)
		if !ok {
			return fmt.Errorf("gen-history: %s is not a history dataset", historyKey)
		}
		for i := range col.Len() {
			var k int
			if _, err := fmt.Sscanf(col.Value(i), "exp-%04d", &k); err != nil || k < 0 || k >= len(g.present) {
				return fmt.Errorf("gen-history: unexpected key %q (built with another --keys?)", col.Value(i))
			}
			g.present[k] = true
		}
	}
	return sc.Err()
}

// step commits version ds.Version()+1: 70% an upsert of random experiments (present or
// not: one row three times out of four, else 2-4), 15% the delete of one present
// experiment, 15% the append of 1-2 absent ones (an upsert when nothing qualifies).
func (g *historyGen) step(ctx context.Context) error {
	v := g.ds.Version() + 1
	r := splitmix32{s: g.o.Seed ^ uint32(v)*0x9e3779b1}
	pick := func(want bool, n int) []int {
		var cands []int
		for k, p := range g.present {
			if p == want {
				cands = append(cands, k)
			}
		}
		var out []int
		for len(out) < n && len(cands) > 0 {
			i := int(r.next() % uint32(len(cands)))
			out = append(out, cands[i])
			cands = slices.Delete(cands, i, i+1)
		}
		slices.Sort(out)
		return out
	}
	u := r.next() % 100
	var next *lance.Dataset
	var err error
	switch del, add := pick(true, 1), pick(false, 1+int(r.next()%2)); {
	case u >= 70 && u < 85 && len(del) > 0:
		next, _, err = g.ds.Delete(ctx, fmt.Sprintf("%s = '%s'", historyKey, historyKeyName(del[0])))
		g.present[del[0]] = false
		g.ops["delete"]++
	case u >= 85 && len(add) > 0:
		rdr, rerr := historyReader(add, v, g.o.Seed)
		if rerr != nil {
			return rerr
		}
		next, err = g.ds.Append(ctx, rdr, lance.WriteOptions{Mode: lance.ModeAppend})
		rdr.Release()
		for _, k := range add {
			g.present[k] = true
		}
		g.ops["append"]++
	default:
		// Mostly one row, as the production stats writer upserted one experiment per
		// version; sometimes a few.
		n := 1
		if r.next()%4 == 0 {
			n = 2 + int(r.next()%3)
		}
		keys := map[int]bool{}
		for len(keys) < n {
			keys[int(r.next()%uint32(len(g.present)))] = true
		}
		var ks []int
		for k := range keys {
			ks = append(ks, k)
			g.present[k] = true
		}
		slices.Sort(ks)
		rdr, rerr := historyReader(ks, v, g.o.Seed)
		if rerr != nil {
			return rerr
		}
		next, _, err = g.ds.MergeInsert(ctx, historyKey, rdr, lance.WriteOptions{})
		rdr.Release()
		g.ops["upsert"]++
	}
	if err != nil {
		return err
	}
	if next.Version() != v {
		return fmt.Errorf("commit made version %d", next.Version())
	}
	g.ds = next
	g.commits++
	return nil
}

// ObjectCounts classifies the files of a local dataset directory by kind.
type ObjectCounts struct {
	Manifests     int   `json:"manifests"`
	Transactions  int   `json:"transaction_files"`
	DataFiles     int   `json:"data_files"`
	DeletionFiles int   `json:"deletion_files"`
	IndexFiles    int   `json:"index_files"`
	Other         int   `json:"other"`
	Total         int   `json:"total"`
	Bytes         int64 `json:"bytes"`
	// Digest is the FNV-1a (32-bit) hash of the sorted relative paths, one per line:
	// equal digests mean the same set of files (the JS peer computes the same).
	Digest string `json:"digest,omitempty"`
}

// Sub is c minus after, kind by kind (Digest and Bytes left out of kinds).
func (c ObjectCounts) Sub(after ObjectCounts) ObjectCounts {
	return ObjectCounts{
		Manifests: c.Manifests - after.Manifests, Transactions: c.Transactions - after.Transactions,
		DataFiles: c.DataFiles - after.DataFiles, DeletionFiles: c.DeletionFiles - after.DeletionFiles,
		IndexFiles: c.IndexFiles - after.IndexFiles, Other: c.Other - after.Other,
		Total: c.Total - after.Total, Bytes: c.Bytes - after.Bytes,
	}
}

// CountObjects walks a local dataset directory. Temp files of in-flight uploads
// count as other.
func CountObjects(dir string) (ObjectCounts, error) {
	var c ObjectCounts
	var paths []string
	err := walkFiles(dir, func(rel string, size int64) {
		paths = append(paths, rel)
		c.Total++
		c.Bytes += size
		switch {
		case strings.HasPrefix(rel, "_versions/") && strings.HasSuffix(rel, ".manifest"):
			c.Manifests++
		case strings.HasPrefix(rel, "_transactions/"):
			c.Transactions++
		case strings.HasPrefix(rel, "data/"):
			c.DataFiles++
		case strings.HasPrefix(rel, "_deletions/"):
			c.DeletionFiles++
		case strings.HasPrefix(rel, "_indices/"):
			c.IndexFiles++
		default:
			c.Other++
		}
	})
	if err != nil {
		return c, err
	}
	slices.Sort(paths)
	d := NewDigest()
	for _, p := range paths {
		d.bytes([]byte(p))
		d.bytes([]byte{'\n'})
	}
	c.Digest = d.Sum()
	return c, nil
}
