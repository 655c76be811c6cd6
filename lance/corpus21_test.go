package lance_test

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/lancectx/lancectx/internal/arrowjson"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/lance/format/encodings21pb"
	"github.com/lancectx/lancectx/lance/format/file2pb"
	"github.com/lancectx/lancectx/lance/format/tablepb"
)

// corpus21Env names a directory holding an already generated corpus (its manifest.json), so a
// developer iterating on the reader can skip the generator: the test then reads that corpus
// instead of generating one. Unset, the test always generates a fresh corpus.
const corpus21Env = "LANCECTX_CORPUS21_DIR"

// corpus21Manifest is DIR/manifest.json as tests/interop/corpus21.mjs writes it.
type corpus21Manifest struct {
	LanceDB string          `json:"lancedb"`
	Quick   bool            `json:"quick"`
	Tables  []corpus21Table `json:"tables"`
}

// corpus21Table is one case: a table LanceDB wrote and the rows LanceDB read back from it.
type corpus21Table struct {
	Name           string   `json:"name"`
	Path           string   `json:"path"`
	Expected       string   `json:"expected"`
	StorageVersion string   `json:"storage_version"`
	About          string   `json:"about"`
	Rows           int      `json:"rows"`
	Columns        []string `json:"columns"`
	Project        []string `json:"project"`
	Boundaries     []int    `json:"boundaries"`
	Pages          int      `json:"pages"`
	SinglePage     []string `json:"single_page"`
	Fragments      int      `json:"fragments"`
	Indices        []string `json:"indices"`
	Encodings      []string `json:"encodings"`
	StableRowIDs   bool     `json:"stable_row_ids"`
}

// TestCorpus21 is the acceptance test of lancectx's reader for tables LanceDB writes: LanceDB
// 0.31 generates a corpus (tests/interop/corpus21.mjs: every type with and without nulls, nested
// types, small and multi-page, default settings, storage versions 2.1 and 2.2, each compression
// asked for through field metadata, stable row ids, indexed tables), then every table is read
// with package lance and must give exactly the rows LanceDB read back, by scan and by take.
// Each table is a subtest with parts: read (scan), take (scattered row positions), project
// (every second column in reverse order, for tables of two columns or more) and corpus (the
// data files use the encodings the case claims to exercise, so the corpus keeps covering what
// it says). -short (and -race) generate the corpus without its largest tables.
func TestCorpus21(t *testing.T) {
	dir, man := corpus21(t)
	t.Logf("corpus: %d tables from LanceDB %s in %s (quick=%v)", len(man.Tables), man.LanceDB, dir, man.Quick)
	for _, tc := range man.Tables {
		t.Run(tc.Name, func(t *testing.T) {
			expected, err := readLines(filepath.Join(dir, tc.Expected))
			if err != nil {
				t.Fatalf("expected rows: %v", err)
			}
			if len(expected) != tc.Rows {
				t.Fatalf("expected rows file has %d lines, manifest says %d", len(expected), tc.Rows)
			}
			path := filepath.Join(dir, tc.Path)
			if gap, ok := corpus21Gaps[tc.Name]; ok {
				t.Run("gap", func(t *testing.T) {
					defer failOnPanic(t)
					corpus21Gap(t, path, tc, gap)
				})
				t.Run("corpus", func(t *testing.T) { corpus21Coverage(t, path, tc) })
				return
			}
			t.Run("read", func(t *testing.T) {
				defer failOnPanic(t)
				corpus21Read(t, path, tc, expected)
			})
			t.Run("take", func(t *testing.T) {
				defer failOnPanic(t)
				corpus21Take(t, path, tc, expected)
			})
			if cols := projection(tc); cols != nil {
				t.Run("project", func(t *testing.T) {
					defer failOnPanic(t)
					corpus21Project(t, path, tc, cols, expected)
				})
			}
			t.Run("corpus", func(t *testing.T) { corpus21Coverage(t, path, tc) })
		})
	}
}

// corpus21Gaps lists the tables lancectx does not yet read as LanceDB does (open items of
// issue 11), each with the way it must fail meanwhile: a clear error naming what is missing
// (never wrong data, never a panic), or for blobs the documented difference. A gap that
// closes, or starts failing another way, fails the test until it is taken off this list and
// compared in full.
var corpus21Gaps = map[string]corpus21GapSpec{}

type corpus21GapSpec struct {
	openErr string   // lance.Open fails with ErrUnsupported containing this
	scanErr string   // the scan fails with an error containing this
	columns []string // the scan succeeds with these columns and every row
}

func corpus21Gap(t *testing.T, path string, tc corpus21Table, gap corpus21GapSpec) {
	ctx := t.Context()
	ds, err := lance.Open(ctx, path)
	if gap.openErr != "" {
		if err == nil || !errors.Is(err, lance.ErrUnsupported) || !strings.Contains(err.Error(), gap.openErr) {
			t.Fatalf("known gap: open should fail with ErrUnsupported naming %q, got %v (if this now reads, take %q off corpus21Gaps)", gap.openErr, err, tc.Name)
		}
		return
	}
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	recs, err := ds.Collect(ctx, lance.ScanOptions{Columns: tc.Project})
	for _, r := range recs {
		defer r.Release()
	}
	if gap.scanErr != "" {
		if err == nil || !strings.Contains(err.Error(), gap.scanErr) {
			t.Fatalf("known gap: scan should fail naming %q, got %v (if this now reads, take %q off corpus21Gaps)", gap.scanErr, err, tc.Name)
		}
		return
	}
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	var n int64
	for _, r := range recs {
		n += r.NumRows()
	}
	if n != int64(tc.Rows) || len(recs) == 0 {
		t.Fatalf("scan returned %d rows in %d batches, LanceDB wrote %d", n, len(recs), tc.Rows)
	}
	got := make([]string, recs[0].Schema().NumFields())
	for i, f := range recs[0].Schema().Fields() {
		got[i] = fieldString(f)
	}
	if !slices.Equal(got, gap.columns) {
		t.Fatalf("known gap: columns %q, want %q (LanceDB's are %q)", got, gap.columns, tc.Columns)
	}
}

// failOnPanic turns a panic in the reader (on this goroutine) into a failure of the one case,
// so the run goes on and lists every case. A panic is still a bug: bad input must be an error.
func failOnPanic(t *testing.T) {
	if r := recover(); r != nil {
		t.Errorf("panic: %v\n%s", r, debug.Stack())
	}
}

// corpus21 returns the corpus directory and its manifest, generating the corpus with LanceDB
// unless corpus21Env points at one. A missing node or LanceDB fails the test: an interop test
// that silently does not run proves nothing.
func corpus21(t *testing.T) (string, *corpus21Manifest) {
	t.Helper()
	dir := os.Getenv(corpus21Env)
	if dir == "" {
		dir = t.TempDir()
		generateCorpus21(t, dir)
	}
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatalf("corpus manifest: %v", err)
	}
	var man corpus21Manifest
	if err := json.Unmarshal(b, &man); err != nil {
		t.Fatalf("corpus manifest: %v", err)
	}
	if len(man.Tables) == 0 {
		t.Fatal("corpus manifest lists no tables")
	}
	return dir, &man
}

func generateCorpus21(t *testing.T, dir string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("the LanceDB corpus needs node (Node.js 20+) on PATH: %v", err)
	}
	root, err := findModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	interop := filepath.Join(root, "tests", "interop")
	if _, err := os.Stat(filepath.Join(interop, "node_modules", "@lancedb", "lancedb")); err != nil {
		t.Fatalf("LanceDB not installed: run `npm ci --prefix tests/interop` (%v)", err)
	}
	args := []string{filepath.Join(interop, "corpus21.mjs"), "gen", dir}
	// The race-detector run is there for concurrent code: the quick corpus exercises the same
	// read paths, the full one costs minutes more under the detector.
	if testing.Short() || raceEnabled() {
		args = append(args, "--quick")
	}
	// Bounded so a wedged LanceDB fails the test instead of hanging it; generation takes
	// well under a minute on an idle machine.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("generate corpus (node %s): %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	t.Logf("corpus generated in %v: %s", time.Since(start).Round(time.Millisecond), strings.TrimSpace(stdout.String()))
}

// raceEnabled reports whether the test binary was built with -race.
func raceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// findModuleRoot walks up from the working directory (the package directory) to go.mod.
func findModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find module root: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("find module root: no go.mod above the working directory")
		}
		dir = parent
	}
}

// readLines reads a gzipped file of lines.
func readLines(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defer zr.Close()
	var lines []string
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 0, 1<<20), 256<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines, sc.Err()
}

// corpus21Read scans the whole table and compares schema and rows with what LanceDB read.
func corpus21Read(t *testing.T, path string, tc corpus21Table, expected []string) {
	ctx := t.Context()
	ds, err := lance.Open(ctx, path)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	if v := ds.DataStorageVersion(); v != tc.StorageVersion {
		t.Errorf("data storage version %q, LanceDB wrote %q", v, tc.StorageVersion)
	}
	if n := ds.CountRows(); n != int64(tc.Rows) {
		t.Errorf("CountRows %d, LanceDB wrote %d rows", n, tc.Rows)
	}
	sc, err := ds.Scan(ctx, lance.ScanOptions{Columns: tc.Project})
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	defer sc.Release()
	checkColumns(t, sc.Schema(), tc.Columns)
	var got []string
	for sc.Next() {
		b := sc.RecordBatch()
		checkColumns(t, b.Schema(), tc.Columns)
		rows, err := corpusRows(b)
		if err != nil {
			t.Fatalf("encode rows: %v", err)
		}
		got = append(got, rows...)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("scan: %v", err)
	}
	compareRows(t, "scan", got, expected, nil)
}

// projection picks every second compared column, last first (nil for a one-column table).
func projection(tc corpus21Table) []string {
	if len(tc.Columns) < 2 {
		return nil
	}
	var cols []string
	for i := len(tc.Columns) - 1; i >= 0; i -= 2 {
		name, _, _ := strings.Cut(tc.Columns[i], ": ")
		cols = append(cols, name)
	}
	return cols
}

// corpus21Project scans a subset of the columns in another order; the expected rows are
// LanceDB's rows with their members picked and reordered as text.
func corpus21Project(t *testing.T, path string, tc corpus21Table, cols, expected []string) {
	ctx := t.Context()
	ds, err := lance.Open(ctx, path)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	batches, err := ds.Collect(ctx, lance.ScanOptions{Columns: cols})
	if err != nil {
		t.Fatalf("scan %v: %v", cols, err)
	}
	defer func() {
		for _, b := range batches {
			b.Release()
		}
	}()
	var got []string
	for _, b := range batches {
		rows, err := corpusRows(b)
		if err != nil {
			t.Fatalf("encode rows: %v", err)
		}
		got = append(got, rows...)
	}
	want := make([]string, len(expected))
	for i, line := range expected {
		keys, vals := splitObject(line)
		if keys == nil {
			t.Fatalf("expected row %d is not a JSON object", i)
		}
		var b strings.Builder
		b.WriteByte('{')
		for j, c := range cols {
			k := slices.Index(keys, c)
			if k < 0 {
				t.Fatalf("expected row %d has no column %q", i, c)
			}
			if j > 0 {
				b.WriteByte(',')
			}
			key, _ := json.Marshal(c)
			b.Write(key)
			b.WriteByte(':')
			b.WriteString(vals[k])
		}
		b.WriteByte('}')
		want[i] = b.String()
	}
	compareRows(t, fmt.Sprintf("scan of %v", cols), got, want, nil)
}

// corpus21Take reads a scattered set of rows by row address, in shuffled order.
func corpus21Take(t *testing.T, path string, tc corpus21Table, expected []string) {
	ctx := t.Context()
	ds, err := lance.Open(ctx, path)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	positions := takePositions(tc)
	// Row address of position p: fragments in manifest order, no deletions in the corpus.
	type span struct{ id, start, rows uint64 }
	var spans []span
	var next uint64
	for _, f := range ds.Fragments() {
		if f.GetDeletionFile() != nil {
			t.Fatalf("fragment %d has a deletion file; the corpus has no deletions", f.GetId())
		}
		spans = append(spans, span{f.GetId(), next, f.GetPhysicalRows()})
		next += f.GetPhysicalRows()
	}
	if next != uint64(tc.Rows) {
		t.Fatalf("fragments hold %d rows, LanceDB wrote %d", next, tc.Rows)
	}
	addrs := make([]uint64, len(positions))
	for i, p := range positions {
		for _, s := range spans {
			if uint64(p) >= s.start && uint64(p) < s.start+s.rows {
				addrs[i] = s.id<<32 | (uint64(p) - s.start)
				break
			}
		}
	}
	rec, err := ds.TakeRowAddrs(ctx, addrs, tc.Project)
	if err != nil {
		t.Fatalf("take %d rows: %v", len(addrs), err)
	}
	defer rec.Release()
	checkColumns(t, rec.Schema(), tc.Columns)
	got, err := corpusRows(rec)
	if err != nil {
		t.Fatalf("encode rows: %v", err)
	}
	want := make([]string, len(positions))
	for i, p := range positions {
		want[i] = expected[p]
	}
	compareRows(t, "take", got, want, positions)
}

// takePositions picks row positions: both ends, the middle, batch boundaries, mini-block chunk
// sizes and their neighbours, and pseudo-random rows (seeded by the table name), shuffled.
func takePositions(tc corpus21Table) []int {
	n := tc.Rows
	cand := []int{0, 1, n - 1, n - 2, n / 2, n / 3}
	for _, b := range tc.Boundaries {
		cand = append(cand, b-1, b, b+1)
	}
	for _, c := range []int{1024, 2048, 4096, 8192} {
		for k := c; k < n && k <= 4*c; k += c {
			cand = append(cand, k-1, k)
		}
	}
	var seed uint64
	for _, c := range tc.Name {
		seed = seed*31 + uint64(c)
	}
	r := rand.New(rand.NewPCG(seed, uint64(n)))
	for range 24 {
		if n > 0 {
			cand = append(cand, r.IntN(n))
		}
	}
	seen := map[int]bool{}
	var out []int
	for _, p := range cand {
		if p >= 0 && p < n && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	r.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

func checkColumns(t *testing.T, s *arrow.Schema, want []string) {
	t.Helper()
	got := make([]string, s.NumFields())
	for i, f := range s.Fields() {
		got[i] = fieldString(f)
	}
	if !slices.Equal(got, want) {
		t.Errorf("columns differ from LanceDB's:\n got  %q\n want %q", got, want)
	}
}

// compareRows reports the first few differing rows (naming the first differing column) and
// how many rows differ in all.
func compareRows(t *testing.T, what string, got, want []string, positions []int) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s returned %d rows, LanceDB read %d", what, len(got), len(want))
	}
	bad, shown := 0, 0
	for i := range min(len(got), len(want)) {
		if got[i] == want[i] {
			continue
		}
		bad++
		if shown < 3 {
			shown++
			row := i
			if positions != nil {
				row = positions[i]
			}
			col, g, w := firstDiff(got[i], want[i])
			t.Errorf("%s row %d column %s:\n got  %s\n want %s", what, row, col, clip(g), clip(w))
		}
	}
	if bad > 0 {
		t.Errorf("%s: %d of %d rows differ from LanceDB's", what, bad, min(len(got), len(want)))
	}
}

func clip(s string) string {
	if len(s) > 300 {
		return s[:300] + fmt.Sprintf("... (%d bytes)", len(s))
	}
	return s
}

// firstDiff splits two canonical rows into their top-level members and returns the first
// member that differs (the whole rows when they cannot be split alike).
func firstDiff(got, want string) (col, g, w string) {
	gk, gv := splitObject(got)
	wk, wv := splitObject(want)
	if gk == nil || wk == nil || !slices.Equal(gk, wk) {
		return "(row)", got, want
	}
	for i := range gk {
		if gv[i] != wv[i] {
			return gk[i], gv[i], wv[i]
		}
	}
	return "(row)", got, want
}

// splitObject splits a JSON object's text into keys and raw values (nil if malformed).
func splitObject(s string) (keys, vals []string) {
	if len(s) < 2 || s[0] != '{' || s[len(s)-1] != '}' {
		return nil, nil
	}
	body := s[1 : len(s)-1]
	depth, inStr, start := 0, false, 0
	var members []string
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case inStr:
			if c == '\\' {
				i++
			} else if c == '"' {
				inStr = false
			}
		case c == '"':
			inStr = true
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
		case c == ',' && depth == 0:
			members = append(members, body[start:i])
			start = i + 1
		}
	}
	if body != "" {
		members = append(members, body[start:])
	}
	for _, m := range members {
		var k string
		dec := json.NewDecoder(strings.NewReader(m))
		if err := dec.Decode(&k); err != nil {
			return nil, nil
		}
		rest := strings.TrimPrefix(m[dec.InputOffset():], ":")
		keys = append(keys, k)
		vals = append(vals, rest)
	}
	return keys, vals
}

// ---------------------------------------------------------------------------------------------
// The canonical row encoding: internal/arrowjson's, extended (identically to corpus21.mjs) to
// the types it does not cover: float16 is a number; date64, time64 and duration are decimal
// strings; time32 is a number; decimal128/256 is the unscaled integer as a decimal string;
// fixed_size_binary is base64; large_list is an array; a map is the array of its entry structs;
// the null type is null.

func corpusRows(rec arrow.RecordBatch) ([]string, error) {
	keys := make([][]byte, rec.NumCols())
	for c, f := range rec.Schema().Fields() {
		k, _ := json.Marshal(f.Name)
		keys[c] = append(k, ':')
	}
	out := make([]string, 0, rec.NumRows())
	var buf []byte
	for i := range int(rec.NumRows()) {
		buf = append(buf[:0], '{')
		for c, col := range rec.Columns() {
			if c > 0 {
				buf = append(buf, ',')
			}
			buf = append(buf, keys[c]...)
			var err error
			if buf, err = corpusValue(buf, col, i); err != nil {
				return nil, fmt.Errorf("row %d column %q: %w", i, rec.ColumnName(c), err)
			}
		}
		out = append(out, string(append(buf, '}')))
	}
	return out, nil
}

func corpusValue(dst []byte, arr arrow.Array, i int) ([]byte, error) {
	// arrow-go's Null arrays have no validity bitmap, so IsNull says false for them.
	if arr.IsNull(i) || arr.DataType().ID() == arrow.NULL {
		return append(dst, "null"...), nil
	}
	switch a := arr.(type) {
	case *array.Map: // its list of entry structs
		s, e := a.ValueOffsets(i)
		return corpusList(dst, a.ListValues(), s, e)
	case *array.List:
		s, e := a.ValueOffsets(i)
		return corpusList(dst, a.ListValues(), s, e)
	case *array.LargeList:
		s, e := a.ValueOffsets(i)
		return corpusList(dst, a.ListValues(), s, e)
	case *array.FixedSizeList:
		s, e := a.ValueOffsets(i)
		return corpusList(dst, a.ListValues(), s, e)
	case *array.Struct:
		st := a.DataType().(*arrow.StructType)
		dst = append(dst, '{')
		for k, f := range st.Fields() {
			if k > 0 {
				dst = append(dst, ',')
			}
			name, _ := json.Marshal(f.Name)
			dst = append(append(dst, name...), ':')
			var err error
			if dst, err = corpusValue(dst, a.Field(k), i); err != nil {
				return nil, fmt.Errorf("%s: %w", f.Name, err)
			}
		}
		return append(dst, '}'), nil
	case *array.Dictionary:
		j := a.GetValueIndex(i)
		if j < 0 || j >= a.Dictionary().Len() {
			return nil, fmt.Errorf("dictionary index %d out of range [0, %d)", j, a.Dictionary().Len())
		}
		return corpusValue(dst, a.Dictionary(), j)
	case *array.Float16:
		return corpusFloat(dst, halfToFloat(a.Value(i).Uint16()))
	case *array.Date64:
		return appendQuoted(dst, int64(a.Value(i))), nil
	case *array.Time32:
		return strconv.AppendInt(dst, int64(a.Value(i)), 10), nil
	case *array.Time64:
		return appendQuoted(dst, int64(a.Value(i))), nil
	case *array.Duration:
		return appendQuoted(dst, int64(a.Value(i))), nil
	case *array.Decimal128:
		dst = append(dst, '"')
		dst = a.Value(i).BigInt().Append(dst, 10)
		return append(dst, '"'), nil
	case *array.Decimal256:
		dst = append(dst, '"')
		dst = a.Value(i).BigInt().Append(dst, 10)
		return append(dst, '"'), nil
	case *array.FixedSizeBinary:
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, a.Value(i))
		return append(dst, '"'), nil
	}
	return arrowjson.AppendValue(dst, arr, i)
}

func corpusList(dst []byte, child arrow.Array, start, end int64) ([]byte, error) {
	if start < 0 || start > end || end > int64(child.Len()) {
		return nil, fmt.Errorf("list offsets [%d, %d) outside child of length %d", start, end, child.Len())
	}
	dst = append(dst, '[')
	for j := start; j < end; j++ {
		if j > start {
			dst = append(dst, ',')
		}
		var err error
		if dst, err = corpusValue(dst, child, int(j)); err != nil {
			return nil, err
		}
	}
	return append(dst, ']'), nil
}

// corpusFloat prints f as arrowjson prints floats (ECMAScript Number::toString, -0 kept, NaN
// and infinities as strings). encoding/json formats finite floats the ECMAScript way.
func corpusFloat(dst []byte, f float64) ([]byte, error) {
	switch {
	case math.IsNaN(f):
		return append(dst, `"NaN"`...), nil
	case math.IsInf(f, 1):
		return append(dst, `"Infinity"`...), nil
	case math.IsInf(f, -1):
		return append(dst, `"-Infinity"`...), nil
	case f == 0 && math.Signbit(f):
		return append(dst, "-0"...), nil
	}
	b, err := json.Marshal(f)
	if err != nil {
		return nil, err
	}
	return append(dst, b...), nil
}

// halfToFloat converts IEEE 754 binary16 bits exactly (arrow-go's float16.Num.Float32 gets
// subnormals wrong: 0x0001 comes out as 1.1e-41 instead of 2^-24).
func halfToFloat(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp := int(h>>10) & 0x1f
	frac := float64(h & 0x3ff)
	switch exp {
	case 0:
		return sign * math.Ldexp(frac, -24)
	case 0x1f:
		if frac != 0 {
			return math.NaN()
		}
		return math.Inf(int(sign))
	}
	return sign * math.Ldexp(1024+frac, exp-25)
}

func appendQuoted(dst []byte, v int64) []byte {
	dst = append(dst, '"')
	dst = strconv.AppendInt(dst, v, 10)
	return append(dst, '"')
}

// fieldString and typeString are the canonical type notation of corpus21.mjs.
func fieldString(f arrow.Field) string {
	s := f.Name + ": " + typeString(f.Type)
	if !f.Nullable {
		s += " not null"
	}
	return s
}

func typeString(dt arrow.DataType) string {
	switch t := dt.(type) {
	case *arrow.Int8Type, *arrow.Int16Type, *arrow.Int32Type, *arrow.Int64Type,
		*arrow.Uint8Type, *arrow.Uint16Type, *arrow.Uint32Type, *arrow.Uint64Type,
		*arrow.Float16Type, *arrow.Float32Type, *arrow.Float64Type, *arrow.Date32Type, *arrow.Date64Type:
		return dt.String()
	case *arrow.BooleanType:
		return "bool"
	case *arrow.StringType:
		return "utf8"
	case *arrow.LargeStringType:
		return "large_utf8"
	case *arrow.BinaryType:
		return "binary"
	case *arrow.LargeBinaryType:
		return "large_binary"
	case *arrow.FixedSizeBinaryType:
		return fmt.Sprintf("fixed_size_binary[%d]", t.ByteWidth)
	case *arrow.Time32Type:
		return "time32[" + unitName(t.Unit) + "]"
	case *arrow.Time64Type:
		return "time64[" + unitName(t.Unit) + "]"
	case *arrow.TimestampType:
		if t.TimeZone != "" {
			return "timestamp[" + unitName(t.Unit) + ", tz=" + t.TimeZone + "]"
		}
		return "timestamp[" + unitName(t.Unit) + "]"
	case *arrow.DurationType:
		return "duration[" + unitName(t.Unit) + "]"
	case *arrow.Decimal128Type:
		return fmt.Sprintf("decimal128(%d, %d)", t.Precision, t.Scale)
	case *arrow.Decimal256Type:
		return fmt.Sprintf("decimal256(%d, %d)", t.Precision, t.Scale)
	case *arrow.ListType:
		return "list<" + fieldString(t.ElemField()) + ">"
	case *arrow.LargeListType:
		return "large_list<" + fieldString(t.ElemField()) + ">"
	case *arrow.FixedSizeListType:
		return fmt.Sprintf("fixed_size_list[%d]<%s>", t.Len(), fieldString(t.ElemField()))
	case *arrow.StructType:
		parts := make([]string, t.NumFields())
		for i, f := range t.Fields() {
			parts[i] = fieldString(f)
		}
		return "struct<" + strings.Join(parts, ", ") + ">"
	case *arrow.DictionaryType:
		return "dictionary<" + typeString(t.IndexType) + ", " + typeString(t.ValueType) + ">"
	case *arrow.MapType:
		if t.KeysSorted {
			return "map<" + fieldString(t.ElemField()) + ", keys_sorted>"
		}
		return "map<" + fieldString(t.ElemField()) + ">"
	case *arrow.NullType:
		return "null"
	}
	return "unknown(" + dt.String() + ")"
}

func unitName(u arrow.TimeUnit) string {
	return [...]string{"s", "ms", "us", "ns"}[u]
}

// ---------------------------------------------------------------------------------------------
// Corpus coverage: which page layouts and compressive encodings the data files really use. This
// parses the file footer and column metadata itself (Lance file format §3.1) so it does not
// depend on the reader under test.

// corpus21Coverage checks the case's claims: the named encodings occur in its data files, a
// multi-page case has at least two pages in every compared column of each fragment's first
// data file, and fragment count, data file versions, stable row ids flag and index section are
// what LanceDB made. It reads the manifest and the data files itself (Lance format §2, §3.1),
// so it holds whatever state package lance is in.
func corpus21Coverage(t *testing.T, path string, tc corpus21Table) {
	mf, err := latestManifest(path)
	if err != nil {
		t.Fatalf("manifest: %v", err)
	}
	if v := mf.GetDataFormat().GetVersion(); v != tc.StorageVersion {
		t.Errorf("manifest data format %q, want %q", v, tc.StorageVersion)
	}
	if len(mf.GetFragments()) != tc.Fragments {
		t.Errorf("%d fragments, LanceDB reported %d", len(mf.GetFragments()), tc.Fragments)
	}
	const stableRowIDs = 2 // reader feature flag
	if stable := mf.GetReaderFeatureFlags()&stableRowIDs != 0; stable != tc.StableRowIDs {
		t.Errorf("stable row ids flag %v, want %v", stable, tc.StableRowIDs)
	}
	if hasIndex := mf.IndexSection != nil; hasIndex != (len(tc.Indices) > 0) {
		t.Errorf("manifest has an index section: %v; LanceDB lists indices %v", hasIndex, tc.Indices)
	}
	// the top-level field of every field id
	parent := map[int32]int32{}
	name := map[int32]string{}
	for _, f := range mf.GetFields() {
		parent[f.GetId()], name[f.GetId()] = f.GetParentId(), f.GetName()
	}
	owner := func(id int32) string {
		for range len(parent) {
			p, ok := parent[id]
			if !ok || p < 0 {
				break
			}
			id = p
		}
		return name[id]
	}
	seen := map[string]bool{}
	var layouts []string
	for _, frag := range mf.GetFragments() {
		for k, df := range frag.GetFiles() {
			desc, err := describeDataFile(filepath.Join(path, "data", df.GetPath()))
			if err != nil {
				t.Fatalf("data file %s: %v", df.GetPath(), err)
			}
			if v := fmt.Sprintf("%d.%d", df.GetFileMajorVersion(), df.GetFileMinorVersion()); v != tc.StorageVersion {
				t.Errorf("data file %s is version %s in the manifest, want %s", df.GetPath(), v, tc.StorageVersion)
			}
			if desc.version != tc.StorageVersion {
				t.Errorf("data file %s footer says %s, want %s", df.GetPath(), desc.version, tc.StorageVersion)
			}
			for n := range desc.names {
				seen[n] = true
			}
			layouts = append(layouts, desc.layouts...)
			if k != 0 || tc.Pages < 2 {
				continue
			}
			for c, pages := range desc.pages {
				col := fmt.Sprintf("(column %d)", c)
				for j, ci := range df.GetColumnIndices() {
					if int(ci) == c && j < len(df.GetFields()) {
						col = owner(df.GetFields()[j])
					}
				}
				compared := tc.Project == nil || slices.Contains(tc.Project, col)
				if pages < 2 && compared && !slices.Contains(tc.SinglePage, col) {
					t.Errorf("multi-page case: column %d (%s) of %s has %d page(s)", c, col, df.GetPath(), pages)
				}
			}
		}
	}
	for _, want := range tc.Encodings {
		if !seen[want] {
			t.Errorf("case claims encoding %q, the data files use only %v", want, sortedKeys(seen))
		}
	}
	slices.Sort(layouts)
	t.Logf("%s: %v", tc.About, slices.Compact(layouts))
}

// latestManifest decodes the newest manifest of the dataset at path: the highest version
// among _versions/*.manifest (V1 names are the version, V2 names u64 max minus it), framed
// as u32 length + protobuf at the position the 16-byte footer gives.
func latestManifest(path string) (*tablepb.Manifest, error) {
	entries, err := os.ReadDir(filepath.Join(path, "_versions"))
	if err != nil {
		return nil, err
	}
	var best string
	var bestVersion uint64
	for _, e := range entries {
		base, ok := strings.CutSuffix(e.Name(), ".manifest")
		if !ok || strings.HasPrefix(base, "d") {
			continue
		}
		v, err := strconv.ParseUint(base, 10, 64)
		if err != nil {
			continue
		}
		if len(e.Name()) == 29 { // V2 naming
			v = math.MaxUint64 - v
		}
		if best == "" || v > bestVersion {
			best, bestVersion = e.Name(), v
		}
	}
	if best == "" {
		return nil, errors.New("no manifest in _versions")
	}
	b, err := os.ReadFile(filepath.Join(path, "_versions", best))
	if err != nil {
		return nil, err
	}
	if len(b) < 20 || string(b[len(b)-4:]) != "LANC" {
		return nil, fmt.Errorf("%s: no manifest footer", best)
	}
	pos := binary.LittleEndian.Uint64(b[len(b)-16:])
	if pos > uint64(len(b)-16-4) {
		return nil, fmt.Errorf("%s: manifest position %d outside the file", best, pos)
	}
	n := uint64(binary.LittleEndian.Uint32(b[pos:]))
	if n > uint64(len(b)-16)-pos-4 {
		return nil, fmt.Errorf("%s: manifest length %d outside the file", best, n)
	}
	var mf tablepb.Manifest
	if err := proto.Unmarshal(b[pos+4:pos+4+n], &mf); err != nil {
		return nil, fmt.Errorf("%s: %w", best, err)
	}
	return &mf, nil
}

func sortedKeys(m map[string]bool) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

type fileDesc struct {
	version string
	pages   []int           // pages per column
	names   map[string]bool // message fields (layouts, encodings, dictionary, ...) and compression schemes used
	layouts []string        // one compact rendering per distinct page encoding
}

func describeDataFile(path string) (*fileDesc, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	const footer = 40
	if len(b) < footer || string(b[len(b)-4:]) != "LANC" {
		return nil, errors.New("no Lance footer")
	}
	ft := b[len(b)-footer:]
	cmoStart := binary.LittleEndian.Uint64(ft[8:])
	ncols := uint64(binary.LittleEndian.Uint32(ft[28:]))
	d := &fileDesc{
		version: fmt.Sprintf("%d.%d", binary.LittleEndian.Uint16(ft[32:]), binary.LittleEndian.Uint16(ft[34:])),
		names:   map[string]bool{},
	}
	if cmoStart > uint64(len(b)) || ncols > (uint64(len(b))-cmoStart)/16 {
		return nil, errors.New("column metadata offsets outside the file")
	}
	distinct := map[string]bool{}
	for c := range ncols {
		pos := binary.LittleEndian.Uint64(b[cmoStart+c*16:])
		n := binary.LittleEndian.Uint64(b[cmoStart+c*16+8:])
		if pos > uint64(len(b)) || n > uint64(len(b))-pos {
			return nil, fmt.Errorf("column %d metadata outside the file", c)
		}
		var cm file2pb.ColumnMetadata
		if err := proto.Unmarshal(b[pos:pos+n], &cm); err != nil {
			return nil, fmt.Errorf("column %d metadata: %w", c, err)
		}
		d.pages = append(d.pages, len(cm.GetPages()))
		for p, page := range cm.GetPages() {
			var a anypb.Any
			if err := proto.Unmarshal(page.GetEncoding().GetDirect().GetEncoding(), &a); err != nil {
				return nil, fmt.Errorf("column %d page %d encoding: %w", c, p, err)
			}
			var pl encodings21pb.PageLayout
			if err := a.UnmarshalTo(&pl); err != nil {
				return nil, fmt.Errorf("column %d page %d encoding: %w", c, p, err)
			}
			s := renderEncoding(pl.ProtoReflect(), d.names)
			if !distinct[s] {
				distinct[s] = true
				d.layouts = append(d.layouts, s)
			}
		}
	}
	return d, nil
}

// renderEncoding renders an encoding message compactly (nested messages by field name, widths
// inline) and records the name of every message field and enum value it meets in names, and
// compression levels as "level=N".
func renderEncoding(m protoreflect.Message, names map[string]bool) string {
	var parts []string
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.Kind() == protoreflect.MessageKind && fd.IsList():
			for i := range v.List().Len() {
				parts = append(parts, string(fd.Name())+"("+renderEncoding(v.List().Get(i).Message(), names)+")")
			}
		case fd.Kind() == protoreflect.MessageKind && !fd.IsMap():
			names[string(fd.Name())] = true
			parts = append(parts, string(fd.Name())+"("+renderEncoding(v.Message(), names)+")")
		case fd.Kind() == protoreflect.EnumKind && !fd.IsList():
			if ev := fd.Enum().Values().ByNumber(v.Enum()); ev != nil {
				name := strings.ToLower(strings.TrimPrefix(string(ev.Name()), "COMPRESSION_ALGORITHM_"))
				names[name] = true
				parts = append(parts, name)
			}
		case fd.IsList() && (strings.HasPrefix(string(fd.Name()), "bits_per")):
			vals := make([]string, v.List().Len())
			for i := range vals {
				vals[i] = fmt.Sprint(v.List().Get(i).Interface())
			}
			parts = append(parts, fmt.Sprintf("%s=[%s]", fd.Name(), strings.Join(vals, " ")))
		case strings.HasPrefix(string(fd.Name()), "bits_per") || fd.Name() == "uncompressed_bits_per_value" || fd.Name() == "items_per_value":
			parts = append(parts, fmt.Sprintf("%s=%v", fd.Name(), v))
		case fd.Kind() == protoreflect.BoolKind && !fd.IsList() && v.Bool():
			// a set flag (has_large_chunk, has_validity) is recorded by its name
			names[string(fd.Name())] = true
			parts = append(parts, string(fd.Name()))
		case fd.Name() == "level":
			// a compression level (BufferCompression.level) is recorded as "level=N"
			names[fmt.Sprintf("level=%v", v)] = true
			parts = append(parts, fmt.Sprintf("level=%v", v))
		}
		return true
	})
	return strings.Join(parts, ",")
}
