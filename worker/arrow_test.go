package worker

import (
	"bytes"
	"encoding/binary"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/rollout"
)

// clientBatch builds n rows the way a pyarrow client holds them: int64 and float64
// numbers, utf8 strings (role too), nanosecond UTC timestamps, list<int64> and a
// relationships struct whose fields are all nullable. first numbers the ids.
func clientBatch(t testing.TB, first, n int, content func(i int) string) arrow.RecordBatch {
	t.Helper()
	relType := arrow.StructOf(
		arrow.Field{Name: "target_id", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "relation", Type: arrow.BinaryTypes.String, Nullable: true},
		arrow.Field{Name: "weight", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	)
	s := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "rollout_id", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "sequence_order", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "role", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "created_at", Type: &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}, Nullable: true},
		{Name: "content", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "reward", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "input_tokens", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64), Nullable: true},
		{Name: "relationships", Type: arrow.ListOf(relType), Nullable: true},
		{Name: "metadata", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, s)
	defer b.Release()
	ts := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	for i := first; i < first+n; i++ {
		b.Field(0).(*array.StringBuilder).Append(idOf(i))
		b.Field(1).(*array.StringBuilder).Append("traj-" + itoa(i/4))
		b.Field(2).(*array.Int64Builder).Append(int64(i % 4))
		b.Field(3).(*array.StringBuilder).Append([]string{"user", "assistant", "tool"}[i%3])
		b.Field(4).(*array.TimestampBuilder).Append(arrow.Timestamp(ts.Add(time.Duration(i) * time.Second).UnixNano()))
		if i%5 == 0 {
			b.Field(5).AppendNull()
			b.Field(6).AppendNull()
		} else {
			b.Field(5).(*array.StringBuilder).Append(content(i))
			b.Field(6).(*array.Float64Builder).Append(float64(i) / 4)
		}
		lb := b.Field(7).(*array.ListBuilder)
		lb.Append(true)
		for k := 0; k < i%3; k++ {
			lb.ValueBuilder().(*array.Int64Builder).Append(int64(100 + k))
		}
		rb := b.Field(8).(*array.ListBuilder)
		if i%2 == 0 {
			rb.Append(true)
			sb := rb.ValueBuilder().(*array.StructBuilder)
			sb.Append(true)
			sb.FieldBuilder(0).(*array.StringBuilder).Append(idOf(i + 1))
			sb.FieldBuilder(1).(*array.StringBuilder).Append("next")
			sb.FieldBuilder(2).(*array.Float64Builder).Append(0.5)
		} else {
			rb.AppendNull()
		}
		b.Field(9).(*array.StringBuilder).Append(`{"k":` + itoa(i) + `}`)
	}
	return b.NewRecordBatch()
}

func idOf(i int) string { return "a-" + itoa(i) }

func itoa(i int) string { return strconv.Itoa(i) }

// arrowStream writes the batches as one Arrow IPC stream.
func arrowStream(t testing.TB, recs []arrow.RecordBatch, opts ...ipc.Option) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := ipc.NewWriter(&buf, append([]ipc.Option{ipc.WithSchema(recs[0].Schema())}, opts...)...)
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestArrowAppend sends a two-batch Arrow IPC stream of client-typed columns: the
// rows are acked like a JSON append, listed by the API with the JSON route's defaults
// and coercions applied, and, after a merge, read by LanceDB with the same values.
func TestArrowAppend(t *testing.T) {
	tw := newTestWorker(t, "", nil)
	tw.createStore("col")
	content := func(i int) string { return "content " + itoa(i) }
	b1, b2 := clientBatch(t, 0, 7, content), clientBatch(t, 7, 5, content)
	defer b1.Release()
	defer b2.Release()
	body := arrowStream(t, []arrow.RecordBatch{b1, b2})
	var resp api.AppendResponse
	tw.do("POST", "/api/v1/rollouts/col/records", api.ContentTypeArrowStream, body).want(t, http.StatusCreated, &resp)
	if resp.Count != 12 || !resp.Durable || resp.Visible || len(resp.IDs) != 12 || resp.IDs[0] != idOf(0) || resp.IDs[11] != idOf(11) {
		t.Fatalf("response %+v", resp)
	}
	// A JSON append into the same store, then a flushed Arrow one (a retry of a-3
	// with new content: the newer row wins).
	tw.appendJSON("col", false, rec("j-1", "traj-j"))
	retry := clientBatch(t, 3, 1, func(int) string { return "retried" })
	defer retry.Release()
	tw.do("POST", "/api/v1/rollouts/col/records?flush=true", api.ContentTypeArrowStream+"; charset=binary",
		arrowStream(t, []arrow.RecordBatch{retry})).want(t, http.StatusCreated, &resp)
	if !resp.Visible || resp.Count != 1 {
		t.Fatalf("flushed response %+v", resp)
	}
	check := func(listed []rollout.Record) {
		t.Helper()
		if len(listed) != 13 {
			t.Fatalf("listed %d records, want 13", len(listed))
		}
		byID := map[string]rollout.Record{}
		for _, r := range listed {
			byID[r.ID] = r
		}
		for i := 0; i < 12; i++ {
			r, ok := byID[idOf(i)]
			if !ok {
				t.Fatalf("%s is not listed", idOf(i))
			}
			wantContent := content(i)
			if i == 3 {
				wantContent = "retried"
			}
			if i%5 == 0 {
				if r.Content != nil || r.Reward != nil {
					t.Fatalf("%s: content %v reward %v, want nulls", r.ID, r.Content, r.Reward)
				}
			} else if r.Content == nil || *r.Content != wantContent || r.Reward == nil || *r.Reward != float32(i)/4 {
				t.Fatalf("%s: content %v reward %v", r.ID, r.Content, r.Reward)
			}
			if r.ProblemID != r.RolloutID || r.RolloutID != "traj-"+itoa(i/4) || r.SequenceOrder != int32(i%4) ||
				r.Role != []string{"user", "assistant", "tool"}[i%3] || r.ContentType != rollout.DefaultContentType {
				t.Fatalf("%s: %+v", r.ID, r)
			}
			if want := time.Date(2025, 3, 1, 12, 0, i, 0, time.UTC); !r.CreatedAt.Equal(want) {
				t.Fatalf("%s: created_at %s, want %s", r.ID, r.CreatedAt, want)
			}
			if len(r.InputTokens) != i%3 || (i%3 > 0 && r.InputTokens[0] != 100) {
				t.Fatalf("%s: input_tokens %v", r.ID, r.InputTokens)
			}
			if (i%2 == 0) != (len(r.Relationships) == 1) || (i%2 == 0 && (r.Relationships[0].TargetID != idOf(i+1) ||
				r.Relationships[0].Weight == nil || *r.Relationships[0].Weight != 0.5)) {
				t.Fatalf("%s: relationships %+v", r.ID, r.Relationships)
			}
		}
	}
	check(tw.listAll("col", "", 100))
	tw.do("POST", "/api/v1/internal/merge-wal/col?flush=true", "", nil).want(t, http.StatusOK, nil)
	listed := tw.listAll("col", "", 100)
	check(listed)
	checkOracle(t, filepath.Join(tw.dir, "col.rollout.lance"), listed)
}

// TestArrowAppendBadBodies sends hostile and wrong Arrow bodies: each gets its 4xx
// with the JSON error envelope and the data directory is unchanged.
func TestArrowAppendBadBodies(t *testing.T) {
	const limit = 2 << 20
	tw := newTestWorker(t, "", func(c *Config) { c.MaxBodyBytes = limit; c.MaxRecords = 100 })
	tw.createStore("bad")
	tw.appendJSON("bad", true, rec("seed", "r"))
	tw.appendJSON("bad", false, rec("seed-2", "r"))
	before := listing(t, tw.dir)

	good := clientBatch(t, 0, 3, func(i int) string { return "c" })
	defer good.Release()
	goodBody := arrowStream(t, []arrow.RecordBatch{good})

	// batch builds a one-column-changed copy of good.
	withColumn := func(name string, f arrow.Field, col arrow.Array) []byte {
		defer col.Release()
		s := good.Schema()
		fields := append([]arrow.Field(nil), s.Fields()...)
		cols := append([]arrow.Array(nil), good.Columns()...)
		idx := s.FieldIndices(name)
		if len(idx) == 0 {
			fields, cols = append(fields, f), append(cols, col)
		} else {
			fields[idx[0]], cols[idx[0]] = f, col
		}
		r := array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, good.NumRows())
		defer r.Release()
		return arrowStream(t, []arrow.RecordBatch{r})
	}
	without := func(name string) []byte {
		s := good.Schema()
		var fields []arrow.Field
		var cols []arrow.Array
		for i, f := range s.Fields() {
			if f.Name != name {
				fields, cols = append(fields, f), append(cols, good.Column(i))
			}
		}
		r := array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, good.NumRows())
		defer r.Release()
		return arrowStream(t, []arrow.RecordBatch{r})
	}
	strs := func(vals ...string) arrow.Array {
		b := array.NewStringBuilder(memory.DefaultAllocator)
		defer b.Release()
		for _, v := range vals {
			if v == "<null>" {
				b.AppendNull()
			} else {
				b.Append(v)
			}
		}
		return b.NewArray()
	}
	str := arrow.Field{Type: arrow.BinaryTypes.String, Nullable: true}
	named := func(f arrow.Field, n string) arrow.Field { f.Name = n; return f }
	ints := func(vals ...int64) arrow.Array {
		b := array.NewInt64Builder(memory.DefaultAllocator)
		defer b.Release()
		b.AppendValues(vals, nil)
		return b.NewArray()
	}
	floats := func(vals ...float64) arrow.Array {
		b := array.NewFloat64Builder(memory.DefaultAllocator)
		defer b.Release()
		b.AppendValues(vals, nil)
		return b.NewArray()
	}
	// A role dictionary whose second index points past its one value.
	badDict := func() arrow.Array {
		dict := strs("user")
		defer dict.Release()
		dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8, ValueType: arrow.BinaryTypes.String}
		d := array.NewDataWithDictionary(dt, 3, []*memory.Buffer{nil, memory.NewBufferBytes([]byte{0, 5, 0})}, 0, 0, dict.Data().(*array.Data))
		defer d.Release()
		return array.MakeFromData(d)
	}()
	// A compressed stream whose buffers each declare 1 TiB uncompressed: every LZ4
	// frame (magic 04 22 4d 18) follows its buffer's 8-byte uncompressed length.
	bomb := bytes.Clone(arrowStream(t, []arrow.RecordBatch{good}, ipc.WithLZ4()))
	frames := 0
	for i := 8; i+4 <= len(bomb); i++ {
		if bytes.Equal(bomb[i:i+4], []byte{0x04, 0x22, 0x4d, 0x18}) {
			binary.LittleEndian.PutUint64(bomb[i-8:], 1<<40)
			frames++
		}
	}
	if frames == 0 {
		t.Fatal("no LZ4 frame in the compressed stream")
	}
	var many []arrow.RecordBatch
	for i := 0; i < 35; i++ {
		many = append(many, good)
	}
	tooMany := arrowStream(t, many)

	for name, c := range map[string]struct {
		body   []byte
		status int
		msg    string
	}{
		"empty body":                           {nil, 400, "empty"},
		"garbage":                              {[]byte("not arrow at all, just text"), 400, "Arrow IPC"},
		"truncated stream":                     {goodBody[:len(goodBody)*2/3], 400, "Arrow IPC"},
		"schema only":                          {goodBody[:200], 400, ""},
		"stream without rows":                  {arrowStream(t, []arrow.RecordBatch{good.NewSlice(0, 0)}), 400, "no rows"},
		"missing id column":                    {without("id"), 400, `"id": required`},
		"missing rollout_id column":            {without("rollout_id"), 400, `"rollout_id": required`},
		"unknown column":                       {withColumn("colour", named(str, "colour"), strs("a", "b", "c")), 400, "not a rollout column"},
		"id of the wrong type":                 {withColumn("id", named(arrow.Field{Type: arrow.PrimitiveTypes.Int64, Nullable: true}, "id"), ints(1, 2, 3)), 400, "want utf8"},
		"null id":                              {withColumn("id", named(str, "id"), strs("x", "<null>", "z")), 400, "records[1].id"},
		"empty id":                             {withColumn("id", named(str, "id"), strs("x", "", "z")), 400, "records[1].id: must not be empty"},
		"control character in id":              {withColumn("id", named(str, "id"), strs("x", "y\x01", "z")), 400, "records[1].id: control character"},
		"null role":                            {withColumn("role", named(str, "role"), strs("user", "<null>", "tool")), 400, "records[1].role"},
		"sequence_order overflow":              {withColumn("sequence_order", named(arrow.Field{Type: arrow.PrimitiveTypes.Int64, Nullable: true}, "sequence_order"), ints(1, math.MaxInt32+1, 3)), 400, "does not fit int32"},
		"reward NaN":                           {withColumn("reward", named(arrow.Field{Type: arrow.PrimitiveTypes.Float64, Nullable: true}, "reward"), floats(1, math.NaN(), 2)), 400, "records[1].reward: must be a finite number"},
		"metadata not JSON":                    {withColumn("metadata", named(str, "metadata"), strs("{}", "{nope", "1")), 400, "records[1].metadata: invalid JSON"},
		"dictionary index past its dictionary": {withColumn("role", named(arrow.Field{Type: badDict.DataType(), Nullable: true}, "role"), badDict), 400, "outside the dictionary"},
		"decompression bomb":                   {bomb, 413, "decompresses"},
		"body over the limit":                  {bytes.Repeat(goodBody, limit/len(goodBody)+1), 413, "limit"},
		"more rows than MaxRecords":            {tooMany, 413, "at most 100"},
	} {
		t.Run(name, func(t *testing.T) {
			code := "INVALID_REQUEST"
			if c.status == http.StatusRequestEntityTooLarge {
				code = "PAYLOAD_TOO_LARGE"
			}
			e := tw.do("POST", "/api/v1/rollouts/bad/records", api.ContentTypeArrowStream, c.body).wantError(t, c.status, code)
			if !strings.Contains(e.Message, c.msg) {
				t.Fatalf("message %q does not contain %q", e.Message, c.msg)
			}
		})
	}
	// Created or changed objects only: the seeds' seal deletes the WAL entries it
	// covers in the background, and may still be doing so.
	if diff := writtenSince(before, listing(t, tw.dir)); diff != "" {
		t.Fatalf("refused Arrow bodies wrote to the data directory:\n%s", diff)
	}
	if got := tw.listAll("bad", "", 100); len(got) != 2 {
		t.Fatalf("listed %d records after the refused bodies, want the 2 seeds", len(got))
	}
}

// TestPythonArrowFixture keeps clients/python/tests/append.arrows, the Arrow body the
// Python client's test sends, equal to what clientBatch writes (LANCECTX_WRITE_FIXTURE=1
// rewrites it) and decodable by the route.
func TestPythonArrowFixture(t *testing.T) {
	b := clientBatch(t, 0, 3, func(i int) string { return "fixture " + itoa(i) })
	defer b.Release()
	want := arrowStream(t, []arrow.RecordBatch{b})
	path := filepath.Join("..", "clients", "python", "tests", "append.arrows")
	if os.Getenv("LANCECTX_WRITE_FIXTURE") != "" {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is not what clientBatch writes; regenerate it with LANCECTX_WRITE_FIXTURE=1", path)
	}
	recs, err := rollout.ParseAppendArrow(got, rollout.DecodeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		r.Release()
	}
}
