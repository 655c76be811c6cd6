package datagen

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/lancectx/lancectx/api"
)

func ptr[T any](v T) *T { return &v }

// ev is a valid event of type typ at (item, seq); fields carry what typ requires.
func ev(id, item string, seq int64, typ string) api.DatagenEvent {
	e := api.DatagenEvent{EventID: id, ItemID: item, RootItemID: item, ItemSeq: seq, CheckpointID: "c-" + item,
		EventType: typ, RunID: "run-1", WriterEpoch: "w1", SchemaVersion: 1}
	switch typ {
	case StepStarted, StepCompleted, FieldSet, FieldAppend, Failed:
		e.StepName, e.StepKind, e.StepIndex = ptr("gen"), ptr("leaf"), ptr(int64(0))
	}
	switch typ {
	case FieldSet, FieldAppend:
		e.FieldName, e.FieldType, e.CodecVersion = ptr("score"), ptr("int"), ptr(int32(1))
		e.Value = &api.DatagenValue{Kind: KindInt, Value: json.RawMessage("1")}
	case Failed:
		e.ErrorType = ptr("Timeout")
	case Terminal:
		e.Status = ptr(StatusCompleted)
	}
	return e
}

func value(kind, raw string) *api.DatagenValue {
	v := &api.DatagenValue{Kind: kind}
	if raw != "" {
		v.Value = json.RawMessage(raw)
	}
	return v
}

func wantInvalid(t *testing.T, err error, substr string) {
	t.Helper()
	var ae *api.Error
	if !errors.As(err, &ae) || ae.Status != 400 || ae.Code != api.CodeInvalidRequest {
		t.Fatalf("error %v (%T), want a 400 INVALID_REQUEST", err, err)
	}
	if !strings.Contains(err.Error(), substr) {
		t.Fatalf("error %q does not say %q", err, substr)
	}
}

func TestNormalize(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.FixedZone("x", 3600))
	for _, c := range []struct {
		name string
		ev   api.DatagenEvent
		edit func(*api.DatagenEvent)
		err  string // "" when the event is valid
	}{
		{"item created", ev("e", "i", 0, ItemCreated), nil, ""},
		{"step started", ev("e", "i", 0, StepStarted), nil, ""},
		{"step completed", ev("e", "i", 0, StepCompleted), nil, ""},
		{"field set", ev("e", "i", 0, FieldSet), nil, ""},
		{"field append", ev("e", "i", 0, FieldAppend), nil, ""},
		{"failed", ev("e", "i", 0, Failed), nil, ""},
		{"terminal completed", ev("e", "i", 0, Terminal), nil, ""},
		{"terminal filtered", ev("e", "i", 0, Terminal), func(e *api.DatagenEvent) { e.Status = ptr(StatusFiltered) }, ""},
		{"every step kind", ev("e", "i", 0, StepStarted), func(e *api.DatagenEvent) { e.StepKind = ptr("map_reduce") }, ""},
		{"a parent item", ev("e", "i", 0, ItemCreated), func(e *api.DatagenEvent) { e.ParentItemID = ptr("p") }, ""},

		{"empty event_id", ev("", "i", 0, ItemCreated), nil, "events[3].event_id"},
		{"item_id with a control character", ev("e", "a\x07", 0, ItemCreated), nil, "events[3].item_id"},
		{"empty root_item_id", ev("e", "i", 0, ItemCreated), func(e *api.DatagenEvent) { e.RootItemID = "" }, "root_item_id"},
		{"empty checkpoint_id", ev("e", "i", 0, ItemCreated), func(e *api.DatagenEvent) { e.CheckpointID = "" }, "checkpoint_id"},
		{"empty run_id", ev("e", "i", 0, ItemCreated), func(e *api.DatagenEvent) { e.RunID = "" }, "run_id"},
		{"writer_epoch of 600 bytes", ev("e", "i", 0, ItemCreated), func(e *api.DatagenEvent) { e.WriterEpoch = strings.Repeat("w", 600) }, "writer_epoch"},
		{"parent_item_id with a NUL", ev("e", "i", 0, ItemCreated), func(e *api.DatagenEvent) { e.ParentItemID = ptr("p\x00") }, "parent_item_id"},
		{"unknown event type", ev("e", "i", 0, "ITEM_DELETED"), nil, "event_type"},
		{"lower-case event type", ev("e", "i", 0, "item_created"), nil, "event_type"},
		{"negative item_seq", ev("e", "i", -1, ItemCreated), nil, "item_seq must be non-negative"},
		{"negative attempt", ev("e", "i", 0, ItemCreated), func(e *api.DatagenEvent) { e.Attempt = -1 }, "attempt must be non-negative"},
		{"schema_version 0", ev("e", "i", 0, ItemCreated), func(e *api.DatagenEvent) { e.SchemaVersion = 0 }, "schema_version must be positive"},
		{"unknown step kind", ev("e", "i", 0, StepStarted), func(e *api.DatagenEvent) { e.StepKind = ptr("fork") }, "step_kind"},
		{"unknown status", ev("e", "i", 0, ItemCreated), func(e *api.DatagenEvent) { e.Status = ptr("paused") }, "status"},
		{"step started without step_name", ev("e", "i", 0, StepStarted), func(e *api.DatagenEvent) { e.StepName = nil }, "require step_name"},
		{"step completed with an empty step_name", ev("e", "i", 0, StepCompleted), func(e *api.DatagenEvent) { e.StepName = ptr("") }, "require step_name"},
		{"step completed without step_kind", ev("e", "i", 0, StepCompleted), func(e *api.DatagenEvent) { e.StepKind = nil }, "require step_kind"},
		{"failed without step_index", ev("e", "i", 0, Failed), func(e *api.DatagenEvent) { e.StepIndex = nil }, "require step_index"},
		{"failed without error_type", ev("e", "i", 0, Failed), func(e *api.DatagenEvent) { e.ErrorType = nil }, "FAILED requires error_type"},
		{"field set without field_name", ev("e", "i", 0, FieldSet), func(e *api.DatagenEvent) { e.FieldName = nil }, "require field_name"},
		{"field append without field_type", ev("e", "i", 0, FieldAppend), func(e *api.DatagenEvent) { e.FieldType = ptr("") }, "require field_type"},
		{"field set without codec_version", ev("e", "i", 0, FieldSet), func(e *api.DatagenEvent) { e.CodecVersion = nil }, "require codec_version"},
		{"field set without a value", ev("e", "i", 0, FieldSet), func(e *api.DatagenEvent) { e.Value = nil }, "require a value"},
		{"field set without a step", ev("e", "i", 0, FieldSet), func(e *api.DatagenEvent) { e.StepName = nil }, "field events require step_name"},
		{"terminal without status", ev("e", "i", 0, Terminal), func(e *api.DatagenEvent) { e.Status = nil }, "TERMINAL requires status"},
		{"terminal failed", ev("e", "i", 0, Terminal), func(e *api.DatagenEvent) { e.Status = ptr(StatusFailed) }, "TERMINAL requires status"},
		{"int as a string", ev("e", "i", 0, FieldSet), func(e *api.DatagenEvent) { e.Value = value(KindInt, `"1"`) }, "kind int"},
		{"int past int64", ev("e", "i", 0, FieldSet), func(e *api.DatagenEvent) { e.Value = value(KindInt, "9223372036854775808") }, "kind int"},
		{"int with a fraction", ev("e", "i", 0, FieldSet), func(e *api.DatagenEvent) { e.Value = value(KindInt, "1.0") }, "kind int"},
		{"int without a value", ev("e", "i", 0, FieldSet), func(e *api.DatagenEvent) { e.Value = value(KindInt, "") }, "kind int"},
		{"float past float64", ev("e", "i", 0, FieldSet), func(e *api.DatagenEvent) { e.Value = value(KindFloat, "1e400") }, "kind float"},
		{"float as a string", ev("e", "i", 0, FieldSet), func(e *api.DatagenEvent) { e.Value = value(KindFloat, `"1.5"`) }, "kind float"},
		{"bool as 0", ev("e", "i", 0, FieldSet), func(e *api.DatagenEvent) { e.Value = value(KindBool, "0") }, "kind bool"},
		{"str as a number", ev("e", "i", 0, FieldSet), func(e *api.DatagenEvent) { e.Value = value(KindStr, "5") }, "kind str"},
		{"json without a value", ev("e", "i", 0, FieldSet), func(e *api.DatagenEvent) { e.Value = value(KindJSON, "") }, "kind json needs a value"},
		{"unknown kind", ev("e", "i", 0, FieldSet), func(e *api.DatagenEvent) { e.Value = value("decimal", "1") }, "kind \"decimal\""},
		{"int with bytes", ev("e", "i", 0, FieldSet), func(e *api.DatagenEvent) { e.Value.Bytes = []byte("x") }, "belong to kind blob only"},
		{"str with a size", ev("e", "i", 0, FieldSet), func(e *api.DatagenEvent) { e.Value = value(KindStr, `"x"`); e.Value.Size = ptr(int64(1)) }, "belong to kind blob only"},
		{"blob size mismatch", ev("e", "i", 0, FieldSet), func(e *api.DatagenEvent) {
			e.Value = &api.DatagenValue{Kind: KindBlob, Bytes: []byte("abc"), Size: ptr(int64(4))}
		}, "blob size 4 does not match its 3 bytes"},
		{"blob without size", ev("e", "i", 0, FieldSet), func(e *api.DatagenEvent) { e.Value = &api.DatagenValue{Kind: KindBlob, Bytes: []byte("abc")} }, "must carry size"},
		{"blob without bytes", ev("e", "i", 0, FieldSet), func(e *api.DatagenEvent) { e.Value = &api.DatagenValue{Kind: KindBlob, Size: ptr(int64(0))} }, "must carry bytes"},
		{"blob with a value", ev("e", "i", 0, FieldSet), func(e *api.DatagenEvent) {
			e.Value = &api.DatagenValue{Kind: KindBlob, Value: json.RawMessage(`"abc"`), Bytes: []byte("abc"), Size: ptr(int64(3))}
		}, "carries bytes, not value"},
		{"an empty blob", ev("e", "i", 0, FieldSet), func(e *api.DatagenEvent) {
			e.Value = &api.DatagenValue{Kind: KindBlob, Bytes: []byte{}, Size: ptr(int64(0))}
		}, ""},
		{"a blob with a null value", ev("e", "i", 0, FieldSet), func(e *api.DatagenEvent) {
			e.Value = &api.DatagenValue{Kind: KindBlob, Value: json.RawMessage("null"), Bytes: []byte("a"), Size: ptr(int64(1)), Checksum: ptr("x")}
		}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := c.ev
			if c.edit != nil {
				c.edit(&e)
			}
			err := Normalize(3, &e, now)
			if c.err == "" {
				if err != nil {
					t.Fatalf("valid event refused: %v", err)
				}
				return
			}
			wantInvalid(t, err, c.err)
		})
	}
}

// TestNormalizeCanonical: values and query tags are stored in one canonical form,
// event_ts defaults to now, in UTC, cut to microseconds.
func TestNormalizeCanonical(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.FixedZone("x", 3600))
	for _, c := range []struct{ kind, in, want string }{
		{KindInt, " 007 ", "7"},
		{KindInt, "-9223372036854775808", "-9223372036854775808"},
		{KindFloat, "1.50", "1.5"},
		{KindFloat, "1e3", "1000"},
		{KindFloat, "-0", "-0"},
		{KindBool, "true", "true"},
		{KindStr, `"\u0041b"`, `"Ab"`},
		{KindJSON, "{ \"a\" : [1, 2] }", `{"a":[1,2]}`},
		{KindJSON, "null", "null"},
	} {
		e := ev("e", "i", 0, FieldSet)
		e.Value = value(c.kind, c.in)
		if err := Normalize(0, &e, now); err != nil {
			t.Fatalf("%s %s: %v", c.kind, c.in, err)
		}
		if string(e.Value.Value) != c.want {
			t.Fatalf("%s %s normalizes to %s, want %s", c.kind, c.in, e.Value.Value, c.want)
		}
	}
	e := ev("e", "i", 0, ItemCreated)
	e.QueryTags = json.RawMessage("{ \"q\" : 1 }")
	if err := Normalize(0, &e, now); err != nil {
		t.Fatal(err)
	}
	if string(e.QueryTags) != `{"q":1}` {
		t.Fatalf("query_tags %s", e.QueryTags)
	}
	if want := time.Date(2026, 1, 2, 2, 4, 5, 123456000, time.UTC); !e.EventTS.Equal(want) || e.EventTS.Location() != time.UTC {
		t.Fatalf("event_ts defaults to %v, want %v", e.EventTS, want)
	}
	e = ev("e", "i", 0, ItemCreated)
	e.QueryTags = json.RawMessage("null")
	given := time.Date(2020, 5, 6, 7, 8, 9, 999, time.UTC)
	e.EventTS = &given
	if err := Normalize(0, &e, now); err != nil {
		t.Fatal(err)
	}
	if e.QueryTags != nil || !e.EventTS.Equal(given.Truncate(time.Microsecond)) {
		t.Fatalf("null query_tags %s, event_ts %v", e.QueryTags, e.EventTS)
	}
}

// TestContentIgnoresEventTS: a retried event without event_ts is the same event;
// any other field makes it another.
func TestContentIgnoresEventTS(t *testing.T) {
	a, b := ev("e", "i", 0, FieldSet), ev("e", "i", 0, FieldSet)
	t1, t2 := time.Unix(1, 0), time.Unix(2, 0)
	a.EventTS, b.EventTS = &t1, &t2
	if Content(&a) != Content(&b) {
		t.Fatal("event_ts changes the content")
	}
	for name, edit := range map[string]func(*api.DatagenEvent){
		"attempt":   func(e *api.DatagenEvent) { e.Attempt = 1 },
		"value":     func(e *api.DatagenEvent) { e.Value = value(KindInt, "2") },
		"run_id":    func(e *api.DatagenEvent) { e.RunID = "run-2" },
		"step":      func(e *api.DatagenEvent) { e.StepIndex = ptr(int64(1)) },
		"item_seq":  func(e *api.DatagenEvent) { e.ItemSeq = 1 },
		"traceback": func(e *api.DatagenEvent) { e.Traceback = ptr("") },
	} {
		c := a
		edit(&c)
		if Content(&c) == Content(&a) {
			t.Fatalf("%s does not change the content", name)
		}
	}
}

func TestCheckBatch(t *testing.T) {
	at := func(e api.DatagenEvent, edit func(*api.DatagenEvent)) api.DatagenEvent { edit(&e); return e }
	cpField := func(id string, seq int64) api.DatagenEvent { return ev(id, "i", seq, FieldSet) }
	done := func(id string, seq int64) api.DatagenEvent { return ev(id, "i", seq, StepCompleted) }
	for _, c := range []struct {
		name       string
		evs        []api.DatagenEvent
		checkpoint bool
		err        string
		kept       []string // event ids kept, when valid
	}{
		{"distinct events", []api.DatagenEvent{ev("a", "i", 0, ItemCreated), ev("b", "i", 1, StepStarted), ev("c", "j", 0, ItemCreated)}, false, "", []string{"a", "b", "c"}},
		{"a repeated event is kept once", []api.DatagenEvent{ev("a", "i", 0, ItemCreated), ev("b", "i", 1, StepStarted), ev("a", "i", 0, ItemCreated)}, false, "", []string{"a", "b"}},
		{"an event_id with different content", []api.DatagenEvent{ev("a", "i", 0, ItemCreated), ev("a", "i", 1, ItemCreated)}, false,
			"events[1]: event_id \"a\" was reused with different content (events[0])", nil},
		{"two events at one item_seq", []api.DatagenEvent{ev("a", "i", 0, ItemCreated), ev("b", "i", 0, StepStarted)}, false,
			"item \"i\" has conflicting events at item_seq 0", nil},
		{"one item_seq on two items", []api.DatagenEvent{ev("a", "i", 0, ItemCreated), ev("b", "j", 0, ItemCreated)}, false, "", []string{"a", "b"}},

		{"a checkpoint", []api.DatagenEvent{cpField("a", 0), at(ev("b", "i", 1, FieldAppend), func(e *api.DatagenEvent) {}), done("c", 2)}, true, "", []string{"a", "b", "c"}},
		{"a checkpoint of the STEP_COMPLETED alone", []api.DatagenEvent{done("c", 2)}, true, "", []string{"c"}},
		{"a checkpoint with the STEP_COMPLETED first", []api.DatagenEvent{done("c", 0), cpField("a", 1)}, true, "", []string{"c", "a"}},
		{"a checkpoint with its STEP_COMPLETED repeated", []api.DatagenEvent{cpField("a", 0), done("c", 1), done("c", 1)}, true, "", []string{"a", "c"}},
		{"a checkpoint without STEP_COMPLETED", []api.DatagenEvent{cpField("a", 0)}, true, "found none", nil},
		{"a checkpoint with two STEP_COMPLETED", []api.DatagenEvent{done("a", 0), done("b", 1)}, true, "exactly one STEP_COMPLETED allowed", nil},
		{"a checkpoint holding an ITEM_CREATED", []api.DatagenEvent{ev("a", "i", 0, ItemCreated), done("c", 1)}, true, "events[0] is ITEM_CREATED", nil},
		{"a checkpoint holding a STEP_STARTED", []api.DatagenEvent{ev("a", "i", 0, StepStarted), done("c", 1)}, true, "events[0] is STEP_STARTED", nil},
		{"a checkpoint holding a TERMINAL", []api.DatagenEvent{done("c", 0), ev("a", "i", 1, Terminal)}, true, "events[1] is TERMINAL", nil},
		{"a checkpoint of two items", []api.DatagenEvent{cpField("a", 0), at(done("c", 1), func(e *api.DatagenEvent) { e.ItemID = "j" })}, true, "not the same item", nil},
		{"a checkpoint of two checkpoint ids", []api.DatagenEvent{cpField("a", 0), at(done("c", 1), func(e *api.DatagenEvent) { e.CheckpointID = "x" })}, true, "checkpoint_id", nil},
		{"a checkpoint of two runs", []api.DatagenEvent{cpField("a", 0), at(done("c", 1), func(e *api.DatagenEvent) { e.RunID = "x" })}, true, "run_id", nil},
		{"a checkpoint of two writer epochs", []api.DatagenEvent{cpField("a", 0), at(done("c", 1), func(e *api.DatagenEvent) { e.WriterEpoch = "x" })}, true, "writer_epoch", nil},
		{"a checkpoint of two attempts", []api.DatagenEvent{cpField("a", 0), at(done("c", 1), func(e *api.DatagenEvent) { e.Attempt = 1 })}, true, "attempt", nil},
		{"a checkpoint field at another step index", []api.DatagenEvent{at(cpField("a", 0), func(e *api.DatagenEvent) { e.StepIndex = ptr(int64(1)) }), done("c", 1)}, true, "not at the step", nil},
		{"a checkpoint field at another enclosing step", []api.DatagenEvent{at(cpField("a", 0), func(e *api.DatagenEvent) { e.EnclosingStep = ptr("main") }), done("c", 1)}, true, "not at the step", nil},
		{"a checkpoint field at another selector step", []api.DatagenEvent{cpField("a", 0), at(done("c", 1), func(e *api.DatagenEvent) { e.SelectorStep = ptr("s") })}, true, "not at the step", nil},
		{"the same batch without checkpoint", []api.DatagenEvent{ev("a", "i", 0, ItemCreated), done("c", 1)}, false, "", []string{"a", "c"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, err := CheckBatch(c.evs, c.checkpoint)
			if c.err != "" {
				wantInvalid(t, err, c.err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, e := range out {
				ids = append(ids, e.EventID)
			}
			if strings.Join(ids, ",") != strings.Join(c.kept, ",") {
				t.Fatalf("kept %v, want %v", ids, c.kept)
			}
		})
	}
}
