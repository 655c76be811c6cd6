package oracle

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"google.golang.org/protobuf/proto"

	"github.com/lancectx/lancectx/internal/arrowjson"
	"github.com/lancectx/lancectx/lance/format/tablepb"
)

// allTypesSchema has every type of the schema spec that apache-arrow 18 (JS) supports, i.e. all
// but large_list.
const allTypesSchema = `{"fields":[` +
	`{"name":"id","type":"int64","nullable":false,"metadata":{"lance-schema:unenforced-primary-key":"true"}},` +
	`{"name":"i8","type":"int8","nullable":true},` +
	`{"name":"i16","type":"int16","nullable":true},` +
	`{"name":"i32","type":"int32","nullable":true},` +
	`{"name":"u8","type":"uint8","nullable":true},` +
	`{"name":"u16","type":"uint16","nullable":true},` +
	`{"name":"u32","type":"uint32","nullable":true},` +
	`{"name":"u64","type":"uint64","nullable":true},` +
	`{"name":"f32","type":"float32","nullable":true},` +
	`{"name":"f64","type":"float64","nullable":true},` +
	`{"name":"b","type":"bool","nullable":true},` +
	`{"name":"s","type":"utf8","nullable":true},` +
	`{"name":"ls","type":"large_utf8","nullable":true},` +
	`{"name":"bin","type":"binary","nullable":true},` +
	`{"name":"lbin","type":"large_binary","nullable":true},` +
	`{"name":"d","type":"date32","nullable":true},` +
	`{"name":"ts_s","type":"timestamp[s]","nullable":true},` +
	`{"name":"ts_ms","type":"timestamp[ms]","nullable":true},` +
	`{"name":"ts_us","type":"timestamp[us]","nullable":false},` +
	`{"name":"ts_ns","type":{"timestamp":"ns","tz":"UTC"},"nullable":true},` +
	`{"name":"l","type":{"list":"int32"},"nullable":true},` +
	`{"name":"lf","type":{"list":"float32","item_nullable":false},"nullable":true},` +
	`{"name":"fsl","type":{"fixed_size_list":"float32","size":3},"nullable":true},` +
	`{"name":"rel","type":{"list":{"struct":[{"name":"target_id","type":"utf8","nullable":true},{"name":"weight","type":"float32","nullable":true}]}},"nullable":true},` +
	`{"name":"st","type":{"struct":[{"name":"x","type":"utf8","nullable":false},{"name":"y","type":{"list":"float64"},"nullable":true}]},"nullable":true},` +
	`{"name":"role","type":{"dictionary":"utf8","index":"int8"},"nullable":false}` +
	`],"metadata":{"lance-context:schema_spec":"{\"v\":1}"}}`

// allTypesRows has extreme values, nulls at every level and tricky floats. Null structs (top-level
// or list items) appear only in nullStructRow because Lance 2.0 does not store struct validity.
var allTypesRows = []string{
	`{"id":"9223372036854775807","i8":-128,"i16":32767,"i32":-2147483648,"u8":255,"u16":65535,"u32":4294967295,"u64":"18446744073709551615",` +
		`"f32":0.1,"f64":1e21,"b":true,"s":"héllo\n\"x\" \u0001 🚀","ls":"big","bin":"AQID","lbin":"","d":"2024-02-29",` +
		`"ts_s":"1970-01-01T00:00:01Z","ts_ms":"2024-01-02T03:04:05.123+01:00","ts_us":"2024-01-02T03:04:05.123456Z","ts_ns":"1704164645123456789",` +
		`"l":[1,null,3],"lf":[0.5,1e-7],"fsl":[1.5,"NaN",null],"rel":[{"target_id":"a","weight":0.25},{"target_id":null,"weight":null}],` +
		`"st":{"x":"x","y":[0.5,null]},"role":"assistant"}`,
	`{"id":"-9223372036854775808","f32":"-Infinity","f64":-0,"b":false,"s":"","d":-1,"ts_us":"-1","l":[],"lf":[],"rel":[],"st":{"x":""},"role":"tool"}`,
	`{"id":3,"f32":3.4028234663852886e+38,"f64":5e-324,"ts_us":0,"fsl":null,"st":{"x":"z","y":null},"role":"assistant"}`,
	`{"id":4,"f32":1.401298464324817e-45,"f64":"Infinity","ts_us":1,"bin":"/+8=","st":{"x":"","y":[]},"role":"grade"}`,
}

const nullStructRow = `{"id":5,"ts_us":2,"rel":[null,{"target_id":"b"}],"st":null,"role":"tool"}`

func tablePath(t *testing.T, name string) string {
	return filepath.Join(t.TempDir(), name+".lance")
}

func goBatch(t *testing.T, schemaSpec string, rows []string) arrow.RecordBatch {
	t.Helper()
	s, err := arrowjson.ParseSchema([]byte(schemaSpec))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := arrowjson.ReadAll(strings.NewReader(strings.Join(rows, "\n")), s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rec.Release)
	return rec
}

func diffRows(t *testing.T, got, want []string) {
	t.Helper()
	if slices.Equal(got, want) {
		return
	}
	t.Errorf("got %d rows, want %d", len(got), len(want))
	for i := range max(len(got), len(want)) {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			t.Errorf("row %d:\n got: %s\nwant: %s", i, g, w)
		}
	}
}

// The oracle's canonical text of a table equals arrowjson's text of the Go batch decoded from the
// same rows, for every type and both storage versions: the two implementations parse and print
// rows identically.
func TestCanonicalEncodingMatchesLanceDB(t *testing.T) {
	t.Parallel()
	o := New(t)
	for _, sv := range []string{"2.0", "2.1"} {
		t.Run(sv, func(t *testing.T) {
			t.Parallel()
			rows := allTypesRows
			if sv == "2.1" {
				rows = append(slices.Clone(rows), nullStructRow)
			}
			rec := goBatch(t, allTypesSchema, rows)
			want, err := arrowjson.Rows(rec)
			if err != nil {
				t.Fatal(err)
			}
			path := tablePath(t, "all")
			if sv == "2.0" {
				// Canonical rows in: checks the oracle reads what Go writes.
				_, err = o.CreateBatch(path, rec, CreateOptions{StorageVersion: sv})
			} else {
				// The raw rows in (RFC 3339 times, dates, integers as numbers): checks the oracle
				// parses input exactly as arrowjson.ReadJSONL does.
				_, err = o.Create(path, []byte(allTypesSchema), rows, CreateOptions{StorageVersion: sv})
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := o.Read(path, ReadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			diffRows(t, got, want)
		})
	}
}

// Random bit patterns cover subnormals, huge exponents and every digit count, proving that Go's
// float text equals JavaScript's for float64 and widened float32 (and float16: the same rounding of
// input text, ties included, and the same text of every value); random 64-bit integers check that
// no side rounds them through a double.
func TestRandomNumbersMatchLanceDB(t *testing.T) {
	t.Parallel()
	o := New(t)
	r := rand.New(rand.NewPCG(1, 2))
	const spec = `{"fields":[{"name":"f64","type":"float64"},{"name":"f32","type":"float32"},{"name":"f16","type":"float16"},{"name":"i64","type":"int64"},{"name":"u64","type":"uint64"},{"name":"bin","type":"binary"}]}`
	var rows []string
	for range 1000 {
		f64 := math.Float64frombits(r.Uint64())
		f32 := float64(math.Float32frombits(r.Uint32()))
		raw := binary.LittleEndian.AppendUint64(nil, r.Uint64())[:r.IntN(9)]
		rows = append(rows, fmt.Sprintf(`{"f64":%s,"f32":%s,"f16":%s,"i64":"%d","u64":"%d","bin":"%s"}`,
			floatJSON(f64), floatJSON(f32), floatJSON(randomHalfInput(r)), int64(r.Uint64()), r.Uint64(), base64.StdEncoding.EncodeToString(raw)))
	}
	rec := goBatch(t, spec, rows)
	want, err := arrowjson.Rows(rec)
	if err != nil {
		t.Fatal(err)
	}
	path := tablePath(t, "numbers")
	if _, err := o.CreateBatch(path, rec, CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := o.Read(path, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	diffRows(t, got, want)
	// The same rows as text: the oracle parses (and rounds) them itself.
	path = tablePath(t, "numbers_text")
	if _, err := o.Create(path, []byte(spec), rows, CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, err = o.Read(path, ReadOptions{}); err != nil {
		t.Fatal(err)
	}
	diffRows(t, got, want)
}

// randomHalfInput is a number to store in a float16 column, all of them needing care: a
// float16 value (subnormals included), the midpoint between two (a tie), or a value close
// to either; both sides must round it to the same float16.
func randomHalfInput(r *rand.Rand) float64 {
	half := func(h uint16) float64 { // exact value of binary16 bits h (finite)
		exp, frac := int(h>>10)&0x1f, float64(h&0x3ff)
		v := math.Ldexp(frac, -24)
		if exp > 0 {
			v = math.Ldexp(1024+frac, exp-25)
		}
		if h&0x8000 != 0 {
			v = -v
		}
		return v
	}
	h := uint16(r.Uint32()) &^ 0x7c00
	h |= uint16(r.IntN(31)) << 10 // any exponent but the infinities'
	lo, hi := half(h), half(h+1)
	if h&0x7fff == 0x7bff {
		hi = math.Copysign(65536, lo) // the value beyond the largest float16
	}
	switch r.IntN(4) {
	case 0:
		return lo
	case 1:
		return (lo + hi) / 2
	case 2:
		return math.Nextafter((lo+hi)/2, lo)
	}
	return math.Nextafter((lo+hi)/2, hi)
}

// floatJSON writes any float as JSON input (Go's own shortest form, which arrowjson accepts).
func floatJSON(f float64) string {
	switch {
	case math.IsNaN(f):
		return `"NaN"`
	case math.IsInf(f, 1):
		return `"Infinity"`
	case math.IsInf(f, -1):
		return `"-Infinity"`
	}
	return fmt.Sprint(f)
}

// LanceDB reports the schema the oracle created in FormatSchema form, byte for byte (types, field
// and schema metadata, nullability).
func TestSchemaMatchesLanceDB(t *testing.T) {
	t.Parallel()
	o := New(t)
	path := tablePath(t, "schema")
	if _, err := o.Create(path, []byte(allTypesSchema), nil, CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := o.Schema(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != allTypesSchema {
		t.Fatalf("schema from LanceDB:\n%s\nwant:\n%s", got, allTypesSchema)
	}
	if n, err := o.Count(path, "", 0); err != nil || n != 0 {
		t.Fatalf("empty table: count %d, %v", n, err)
	}
}

// Facts about LanceDB 0.31 that a Go reader/writer must match, pinned so a change is noticed.
func TestLanceDBSchemaQuirks(t *testing.T) {
	t.Parallel()
	o := New(t)
	const spec = `{"fields":[{"name":"v","type":{"fixed_size_list":"float32","size":2,"item_nullable":false}},{"name":"st","type":{"struct":[{"name":"a","type":"int8"}]}},{"name":"ls","type":{"list":{"struct":[{"name":"a","type":"int8"}]}}}]}`
	for _, sv := range []string{"2.0", "2.1"} {
		path := tablePath(t, "quirks"+sv)
		if _, err := o.Create(path, []byte(spec), []string{`{"v":[1,2],"st":null,"ls":[null]}`}, CreateOptions{StorageVersion: sv}); err != nil {
			t.Fatal(err)
		}
		// Lance stores fixed-size-list items as nullable whatever the input said.
		got, err := o.Schema(path)
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"fields":[{"name":"v","type":{"fixed_size_list":"float32","size":2},"nullable":true},{"name":"st","type":{"struct":[{"name":"a","type":"int8","nullable":true}]},"nullable":true},{"name":"ls","type":{"list":{"struct":[{"name":"a","type":"int8","nullable":true}]}},"nullable":true}]}`; string(got) != want {
			t.Errorf("%s: schema\n got %s\nwant %s", sv, got, want)
		}
		// Lance 2.0 has no struct validity: a null struct (also as a list item) reads back as a
		// struct of nulls.
		rows, err := o.Read(path, ReadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want := `{"v":[1,2],"st":null,"ls":[null]}`
		if sv == "2.0" {
			want = `{"v":[1,2],"st":{"a":null},"ls":[{"a":null}]}`
		}
		diffRows(t, rows, []string{want})
	}
}

// manifestDataFormat decodes the newest manifest of a table and returns its data_format version.
func manifestDataFormat(t *testing.T, path string) string {
	t.Helper()
	m := newestManifest(t, path)
	if m.GetDataFormat().GetFileFormat() != "lance" {
		t.Fatalf("%s: data_format %v", path, m.GetDataFormat())
	}
	return m.GetDataFormat().GetVersion()
}

// newestManifest decodes the newest manifest of a table.
func newestManifest(t *testing.T, path string) *tablepb.Manifest {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(path, "_versions", "*.manifest"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in %s: %v", path, err)
	}
	slices.Sort(files) // V2 names are inverted: the newest version sorts first
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 16 || string(b[len(b)-4:]) != "LANC" {
		t.Fatalf("%s: not a Lance manifest", files[0])
	}
	pos := binary.LittleEndian.Uint64(b[len(b)-16:])
	if pos+4 > uint64(len(b)-16) {
		t.Fatalf("%s: manifest position %d out of range", files[0], pos)
	}
	n := uint64(binary.LittleEndian.Uint32(b[pos:]))
	if pos+4+n != uint64(len(b)-16) {
		t.Fatalf("%s: manifest length %d does not reach the footer", files[0], n)
	}
	var m tablepb.Manifest
	if err := proto.Unmarshal(b[pos+4:pos+4+n], &m); err != nil {
		t.Fatalf("%s: %v", files[0], err)
	}
	return &m
}

func TestStorageVersion(t *testing.T) {
	t.Parallel()
	o := New(t)
	for _, c := range []struct{ flag, want string }{{"2.0", "2.0"}, {"2.1", "2.1"}, {"", "2.1"}} {
		path := tablePath(t, "sv")
		if _, err := o.Create(path, []byte(`{"fields":[{"name":"a","type":"int32"}]}`), []string{`{"a":1}`}, CreateOptions{StorageVersion: c.flag}); err != nil {
			t.Fatal(err)
		}
		if got := manifestDataFormat(t, path); got != c.want {
			t.Errorf("--storage-version %q: manifest data_format %q, want %q", c.flag, got, c.want)
		}
	}
}

func idRows(from, to int) []string {
	var rows []string
	for i := from; i < to; i++ {
		rows = append(rows, fmt.Sprintf(`{"id":%d,"v":"v%d"}`, i, i))
	}
	return rows
}

func TestOperations(t *testing.T) {
	t.Parallel()
	o := New(t)
	path := tablePath(t, "ops")
	schema := []byte(`{"fields":[{"name":"id","type":"int64","nullable":false},{"name":"v","type":"utf8"}]}`)
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	v, err := o.Create(path, schema, idRows(0, 20), CreateOptions{StorageVersion: "2.0"})
	check(err)
	if v != 1 {
		t.Fatalf("create: version %d, want 1", v)
	}
	v, err = o.Add(path, idRows(20, 25))
	check(err)
	if v != 2 {
		t.Fatalf("add: version %d, want 2", v)
	}
	// Reads: all rows in order (more than LanceDB's vector-search default limit of 10), then
	// projection, filter, limit and offset.
	got, err := o.Read(path, ReadOptions{})
	check(err)
	diffRows(t, got, canonicalIDRows(0, 25))
	got, err = o.Read(path, ReadOptions{Columns: []string{"v", "id"}, Where: "id >= 10", Limit: 2, Offset: 1})
	check(err)
	diffRows(t, got, []string{`{"v":"v11","id":"11"}`, `{"v":"v12","id":"12"}`})

	del, err := o.Delete(path, "id < 5")
	check(err)
	if del.NumDeletedRows != 5 || del.Version != 3 {
		t.Fatalf("delete: %+v", del)
	}
	upd, err := o.Update(path, "id = 7", map[string]string{"v": "'seven'", "id": "id + 100"})
	check(err)
	if upd.RowsUpdated != 1 || upd.Version != 4 {
		t.Fatalf("update: %+v", upd)
	}
	mr, err := o.MergeInsert(path, []string{"id"}, []string{`{"id":8,"v":"eight"}`, `{"id":200}`})
	check(err)
	if mr.NumUpdatedRows != 1 || mr.NumInsertedRows != 1 || mr.Version != 5 {
		t.Fatalf("merge-insert: %+v", mr)
	}
	got, err = o.Read(path, ReadOptions{Where: "id = 107 or id = 8 or id = 200"})
	check(err)
	slices.Sort(got) // update and merge-insert rewrite rows; their position is LanceDB's business
	diffRows(t, got, []string{`{"id":"107","v":"seven"}`, `{"id":"200","v":null}`, `{"id":"8","v":"eight"}`})

	n, err := o.Count(path, "", 0)
	check(err)
	if n != 21 {
		t.Fatalf("count: %d, want 21", n)
	}
	n, err = o.Count(path, "id >= 20", 2)
	check(err)
	if n != 5 {
		t.Fatalf("count at version 2: %d, want 5", n)
	}

	// Versions and tags.
	latest, err := o.Version(path)
	check(err)
	if latest != 5 {
		t.Fatalf("version: %d, want 5", latest)
	}
	vs, err := o.Versions(path)
	check(err)
	if len(vs) != 5 || vs[0].Version != 1 || vs[4].Version != 5 || vs[4].Metadata["total_rows"] != "21" {
		t.Fatalf("versions: %+v", vs)
	}
	if age := time.Since(vs[0].Timestamp); age < 0 || age > time.Hour {
		t.Fatalf("version 1 timestamp %v is not recent", vs[0].Timestamp)
	}
	check(o.TagCreate(path, "v1", 1))
	tags, err := o.Tags(path)
	check(err)
	if len(tags) != 1 || tags["v1"] != 1 {
		t.Fatalf("tags: %v", tags)
	}
	got, err = o.Read(path, ReadOptions{Tag: "v1"})
	check(err)
	diffRows(t, got, canonicalIDRows(0, 20))
	got, err = o.Read(path, ReadOptions{Version: 2, Limit: 1})
	check(err)
	diffRows(t, got, canonicalIDRows(0, 1))

	// Optimize compacts the fragments; pruning then refuses while a tag holds an old version.
	st, err := o.Optimize(path, OptimizeOptions{})
	check(err)
	if st.Compaction.FragmentsRemoved == 0 || st.Compaction.FragmentsAdded != 1 {
		t.Fatalf("optimize: %+v", st)
	}
	_, err = o.Optimize(path, OptimizeOptions{CleanupOlderThan: new(time.Duration), DeleteUnverified: true})
	if err == nil || !strings.Contains(err.Error(), "tagged version") {
		t.Fatalf("optimize with a tagged old version: %v", err)
	}
	n, err = o.Count(path, "", 0)
	check(err)
	if n != 21 {
		t.Fatalf("count after optimize: %d, want 21", n)
	}
}

func canonicalIDRows(from, to int) []string {
	var rows []string
	for i := from; i < to; i++ {
		rows = append(rows, fmt.Sprintf(`{"id":"%d","v":"v%d"}`, i, i))
	}
	return rows
}

func TestErrors(t *testing.T) {
	t.Parallel()
	o := New(t)
	schema := []byte(`{"fields":[{"name":"id","type":"int64","nullable":false}]}`)

	var oe *Error
	_, err := o.Count(tablePath(t, "missing"), "", 0)
	if !errors.As(err, &oe) || oe.ExitCode != 1 || !strings.Contains(oe.Stderr, "was not found") {
		t.Fatalf("count of a missing table: %v", err)
	}

	_, err = o.Create(tablePath(t, "bad"), schema, []string{`{"id":1}`, `{"id":"x"}`}, CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), `line 2: column "id": expected int64, got string "x"`) {
		t.Fatalf("bad row: %v", err)
	}

	_, err = o.Create(tablePath(t, "ll"), []byte(`{"fields":[{"name":"l","type":{"large_list":"int8"}}]}`), nil, CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "large_list is not supported by the oracle") {
		t.Fatalf("large_list: %v", err)
	}

	path := tablePath(t, "dup")
	if _, err := o.Create(path, schema, nil, CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Create(path, schema, nil, CreateOptions{}); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("create over an existing table: %v", err)
	}
	if _, err := o.Create(path, schema, []string{`{"id":1}`}, CreateOptions{Overwrite: true}); err != nil {
		t.Fatalf("overwrite: %v", err)
	}

	_, err = o.Run(nil, "read", path, "--bogus")
	if !errors.As(err, &oe) || oe.ExitCode != 2 || !strings.Contains(oe.Stderr, "unknown flag --bogus") {
		t.Fatalf("bad flag: %v", err)
	}
	_, err = o.Run(nil, "read", filepath.Dir(path))
	if !errors.As(err, &oe) || oe.ExitCode != 2 || !strings.Contains(oe.Stderr, "NAME.lance") {
		t.Fatalf("path without .lance: %v", err)
	}

	res, err := o.Run(nil, "count", path, "--time")
	if err != nil {
		t.Fatal(err)
	}
	if res.Elapsed <= 0 || strings.TrimSpace(string(res.Stdout)) != "1" {
		t.Fatalf("--time: elapsed %v, stdout %q, stderr %q", res.Elapsed, res.Stdout, res.Stderr)
	}
}

func TestTimeout(t *testing.T) {
	t.Parallel()
	o := New(t)
	o.Timeout = time.Millisecond
	_, err := o.Version(tablePath(t, "slow"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want a deadline error", err)
	}
}

// fatalTB records Fatalf instead of failing, so New's install check can be tested.
type fatalTB struct {
	testing.TB
	msg string
}

type fatalCalled struct{}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(fatalCalled{})
}

func TestNewFailsWhenNotInstalled(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	tb := &fatalTB{TB: t}
	func() {
		defer func() {
			if r := recover(); r != nil && r != (fatalCalled{}) {
				panic(r)
			}
		}()
		New(tb)
	}()
	if !strings.Contains(tb.msg, "LanceDB oracle not installed: run `npm ci --prefix tests/interop`") {
		t.Fatalf("New without node_modules: %q", tb.msg)
	}
}

// TestIndexCommands: create-index, indices, query, search and queries, and stable row ids.
func TestIndexCommands(t *testing.T) {
	t.Parallel()
	o := New(t)
	path := tablePath(t, "ix")
	schema := []byte(`{"fields":[{"name":"id","type":"int64","nullable":false},{"name":"num","type":"int64"},` +
		`{"name":"text","type":"utf8"},{"name":"vec","type":{"fixed_size_list":"float32","size":4}}]}`)
	var rows []string
	for i := 0; i < 300; i++ {
		rows = append(rows, fmt.Sprintf(`{"id":%d,"num":%d,"text":"row w%d","vec":[%d,%d,%d,%d]}`, i, i%50, i, i, i%7, i%11, i%13))
	}
	if _, err := o.Create(path, schema, rows, CreateOptions{StorageVersion: "2.0", StableRowIDs: true}); err != nil {
		t.Fatal(err)
	}
	if m := newestManifest(t, path); m.GetReaderFeatureFlags()&2 == 0 || m.GetNextRowId() != 300 {
		t.Fatalf("stable row ids: flags %d next_row_id %d", m.GetReaderFeatureFlags(), m.GetNextRowId())
	}
	for _, ix := range []IndexOptions{{Column: "num", Type: IndexBTree}, {Column: "text", Type: IndexFTS},
		{Column: "vec", Type: IndexIVFPQ, NumPartitions: 2, NumSubVectors: 1, DistanceType: "l2", Name: "v"}} {
		if _, err := o.CreateIndex(path, ix); err != nil {
			t.Fatal(err)
		}
	}
	stats, err := o.Indices(path)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, st := range stats {
		got = append(got, fmt.Sprintf("%s:%s:%v:%d:%d:%v", st.Name, st.IndexType, st.Columns, st.IndexedRows, st.UnindexedRows, len(st.UUID) == 36))
	}
	want := []string{"num_idx:BTree:[num]:300:0:true", "text_idx:FTS:[text]:300:0:true", "v:IvfPq:[vec]:300:0:true"}
	if !slices.Equal(got, want) {
		t.Fatalf("indices %v, want %v", got, want)
	}
	specs := []QuerySpec{
		{Where: "num = 7", Columns: []string{"id"}, Limit: 3},
		{Where: "num = 7", Explain: true},
		{Vector: []float32{17, 3, 6, 4}, Columns: []string{"id"}, Limit: 2, BypassIndex: true},
		{Vector: []float32{17, 3, 6, 4}, Column: "vec", Columns: []string{"id"}, Limit: 2, NProbes: 2, RefineFactor: 200},
		{FTS: "w42", Columns: []string{"id"}},
		{Where: "id < 2", Columns: []string{"id"}, WithRowID: true},
	}
	batch, err := o.Queries(path, specs)
	if err != nil {
		t.Fatal(err)
	}
	for i, q := range specs {
		one, err := o.Query(path, q)
		if err != nil {
			t.Fatalf("query %+v: %v", q, err)
		}
		if !slices.Equal(one.Rows, batch[i].Rows) || (q.Explain && one.Plan != batch[i].Plan) {
			t.Fatalf("query %+v: alone %+v, in a batch %+v", q, one, batch[i])
		}
	}
	diffRows(t, batch[0].Rows, []string{`{"id":"7"}`, `{"id":"57"}`, `{"id":"107"}`})
	if !strings.Contains(batch[1].Plan, "ScalarIndexQuery") {
		t.Fatalf("plan without the btree: %s", batch[1].Plan)
	}
	if len(batch[2].Rows) != 2 || !strings.HasPrefix(batch[2].Rows[0], `{"id":"17","_distance":0`) || batch[3].Rows[0] != batch[2].Rows[0] {
		t.Fatalf("vector search: flat %v, indexed %v", batch[2].Rows, batch[3].Rows)
	}
	if len(batch[4].Rows) != 1 || !strings.HasPrefix(batch[4].Rows[0], `{"id":"42","_score":`) {
		t.Fatalf("full text search: %v", batch[4].Rows)
	}
	diffRows(t, batch[5].Rows, []string{`{"id":"0","_rowid":"0"}`, `{"id":"1","_rowid":"1"}`})
	list, err := o.Queries(path, []QuerySpec{{ListIndices: true}})
	if err != nil || len(list[0].Indices) != 3 || list[0].Indices[0].UUID != stats[0].UUID {
		t.Fatalf("listIndices in a batch: %+v %v", list, err)
	}

	var oe *Error
	if _, err := o.CreateIndex(path, IndexOptions{Column: "num", Type: "HASH"}); !errors.As(err, &oe) || oe.ExitCode != 2 {
		t.Fatalf("unknown index type: %v", err)
	}
	if _, err := o.Queries(path, []QuerySpec{{Vector: []float32{1}, FTS: "x"}}); !errors.As(err, &oe) || oe.ExitCode != 2 {
		t.Fatalf("vector and full text at once: %v", err)
	}
	if _, err := o.Query(path, QuerySpec{ListIndices: true}); err == nil {
		t.Fatal("Query with ListIndices: no error")
	}
}
