package datagen

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/lancectx/lancectx/api"
)

// with edits a copy of e.
func with(e api.DatagenEvent, edit func(*api.DatagenEvent)) api.DatagenEvent { edit(&e); return e }

func setField(id string, seq int64, name string, v *api.DatagenValue) api.DatagenEvent {
	return with(ev(id, "i", seq, FieldSet), func(e *api.DatagenEvent) { e.FieldName, e.Value = ptr(name), v })
}

func appendField(id string, seq int64, name string, v *api.DatagenValue) api.DatagenEvent {
	return with(ev(id, "i", seq, FieldAppend), func(e *api.DatagenEvent) { e.FieldName, e.Value = ptr(name), v })
}

func blob(b string) *api.DatagenValue {
	return &api.DatagenValue{Kind: KindBlob, Bytes: []byte(b), Size: ptr(int64(len(b)))}
}

func TestFold(t *testing.T) {
	created := ev("e0", "i", 0, ItemCreated)
	for _, c := range []struct {
		name  string
		evs   []api.DatagenEvent
		blobs bool
		err   bool // ErrInconsistent
		check func(t *testing.T, it *api.FoldedDatagenItem)
	}{
		{name: "no events: never started", check: func(t *testing.T, it *api.FoldedDatagenItem) {
			if it != nil {
				t.Fatalf("%+v", it)
			}
		}},
		{name: "no ITEM_CREATED first: never started", evs: []api.DatagenEvent{ev("e1", "i", 1, StepStarted), ev("e2", "i", 2, ItemCreated)},
			check: func(t *testing.T, it *api.FoldedDatagenItem) {
				if it != nil {
					t.Fatalf("%+v", it)
				}
			}},
		{name: "created only: running, empty fields and trajectory", evs: []api.DatagenEvent{
			with(created, func(e *api.DatagenEvent) {
				e.ParentItemID, e.RootItemID, e.QueryTags = ptr("p"), "r", json.RawMessage(`{"q":1}`)
			})},
			check: func(t *testing.T, it *api.FoldedDatagenItem) {
				if it.Status != StatusRunning || it.ItemID != "i" || it.RootItemID != "r" || *it.ParentItemID != "p" ||
					len(it.Fields) != 0 || it.Trajectory == nil || len(it.Trajectory) != 0 || string(it.QueryTags) != `{"q":1}` {
					t.Fatalf("%+v", it)
				}
			}},
		{name: "a whole life: steps, fields, a retry, the end", evs: []api.DatagenEvent{created,
			ev("e1", "i", 1, StepStarted), setField("e2", 2, "score", value(KindInt, "1")),
			setField("e3", 3, "score", value(KindInt, "2")), appendField("e4", 4, "notes", value(KindStr, `"a"`)),
			ev("e5", "i", 5, StepCompleted), with(ev("e6", "i", 6, Failed), func(e *api.DatagenEvent) { e.Attempt = 2 }),
			appendField("e7", 7, "notes", value(KindStr, `"b"`)), with(ev("e8", "i", 8, Terminal), func(e *api.DatagenEvent) { e.Status = ptr(StatusFiltered) })},
			check: func(t *testing.T, it *api.FoldedDatagenItem) {
				if it.Status != StatusFiltered || it.LastItemSeq != 8 || it.LastAttempt != 2 {
					t.Fatalf("%+v", it)
				}
				if f := it.Fields["score"]; f.Mode != "set" || string(f.Value.Value) != "2" || f.Values != nil {
					t.Fatalf("score %+v", f)
				}
				if f := it.Fields["notes"]; f.Mode != "append" || len(f.Values) != 2 || string(f.Values[0].Value) != `"a"` || string(f.Values[1].Value) != `"b"` {
					t.Fatalf("notes %+v", f)
				}
				if len(it.Trajectory) != 1 || it.Trajectory[0].ItemSeq != 5 || it.Trajectory[0].StepName != "gen" {
					t.Fatalf("trajectory %+v", it.Trajectory)
				}
				if len(it.Started) != 1 || len(it.Completed) != 1 || it.Started[0].StepKind != "leaf" {
					t.Fatalf("started %+v completed %+v", it.Started, it.Completed)
				}
			}},
		{name: "a step started twice is one position; positions sorted", evs: []api.DatagenEvent{created,
			with(ev("e1", "i", 1, StepStarted), func(e *api.DatagenEvent) { e.StepName = ptr("z") }),
			ev("e2", "i", 2, StepStarted), ev("e3", "i", 3, StepStarted),
			ev("e4", "i", 4, StepCompleted), ev("e5", "i", 5, StepCompleted)},
			check: func(t *testing.T, it *api.FoldedDatagenItem) {
				if len(it.Started) != 2 || it.Started[0].StepName != "gen" || it.Started[1].StepName != "z" {
					t.Fatalf("started %+v", it.Started)
				}
				// Every STEP_COMPLETED is a trajectory cursor; completed positions are a set.
				if len(it.Completed) != 1 || len(it.Trajectory) != 2 || it.Trajectory[1].ItemSeq != 5 {
					t.Fatalf("completed %+v trajectory %+v", it.Completed, it.Trajectory)
				}
			}},
		{name: "a TERMINAL then a new ITEM_CREATED runs again", evs: []api.DatagenEvent{created, ev("e1", "i", 1, Terminal),
			with(ev("e2", "i", 2, ItemCreated), func(e *api.DatagenEvent) { e.QueryTags = json.RawMessage(`{"v":2}`) })},
			check: func(t *testing.T, it *api.FoldedDatagenItem) {
				if it.Status != StatusRunning || string(it.QueryTags) != `{"v":2}` {
					t.Fatalf("%+v", it)
				}
			}},
		{name: "blobs are lazy", evs: []api.DatagenEvent{created, setField("e1", 1, "img", blob("png")), appendField("e2", 2, "frames", blob("f1"))},
			check: func(t *testing.T, it *api.FoldedDatagenItem) {
				if v := it.Fields["img"].Value; v.Bytes != nil || *v.Size != 3 || it.BlobEventIDs["img"] != "e1" || it.BlobEventIDs["frames"] != "e2" {
					t.Fatalf("%+v %+v", v, it.BlobEventIDs)
				}
				if v := it.Fields["frames"].Values[0]; v.Bytes != nil || *v.Size != 2 {
					t.Fatalf("%+v", v)
				}
			}},
		{name: "blobs loaded", blobs: true, evs: []api.DatagenEvent{created, setField("e1", 1, "img", blob("png")), setField("e2", 2, "img", blob("jpeg"))},
			check: func(t *testing.T, it *api.FoldedDatagenItem) {
				if v := it.Fields["img"].Value; string(v.Bytes) != "jpeg" || it.BlobEventIDs["img"] != "e2" {
					t.Fatalf("%+v %+v", v, it.BlobEventIDs)
				}
			}},
		{name: "two events at one item_seq", err: true, evs: []api.DatagenEvent{created, ev("e1", "i", 0, StepStarted)}},
		{name: "events of two items", err: true, evs: []api.DatagenEvent{created, ev("x1", "j", 1, StepStarted)}},
		{name: "a set field changing kind", err: true, evs: []api.DatagenEvent{created,
			setField("e1", 1, "f", value(KindInt, "1")), setField("e2", 2, "f", value(KindStr, `"1"`))}},
		{name: "an appended field changing kind", err: true, evs: []api.DatagenEvent{created,
			appendField("e1", 1, "f", value(KindInt, "1")), appendField("e2", 2, "f", value(KindFloat, "1.5"))}},
		{name: "FIELD_SET after FIELD_APPEND", err: true, evs: []api.DatagenEvent{created,
			appendField("e1", 1, "f", value(KindInt, "1")), setField("e2", 2, "f", value(KindInt, "2"))}},
		{name: "FIELD_APPEND after FIELD_SET", err: true, evs: []api.DatagenEvent{created,
			setField("e1", 1, "f", value(KindInt, "1")), appendField("e2", 2, "f", value(KindInt, "2"))}},
		{name: "a field event without a value", err: true, evs: []api.DatagenEvent{created,
			with(ev("e1", "i", 1, FieldSet), func(e *api.DatagenEvent) { e.Value = nil })}},
	} {
		t.Run(c.name, func(t *testing.T) {
			evs := slices.Clone(c.evs)
			slices.Reverse(evs)
			SortEvents(evs) // the fold order is restored whatever order the events came in
			it, err := Fold(evs, c.blobs)
			if c.err {
				if !errors.Is(err, ErrInconsistent) {
					t.Fatalf("fold %+v, %v; want ErrInconsistent", it, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c.check(t, it)
		})
	}
}

func TestFailures(t *testing.T) {
	evs := []api.DatagenEvent{ev("e0", "i", 0, ItemCreated),
		with(ev("e1", "i", 1, Failed), func(e *api.DatagenEvent) { e.ErrorDump, e.Traceback = ptr("boom"), ptr("tb") }),
		ev("e2", "i", 2, StepStarted),
		with(ev("e3", "i", 3, Failed), func(e *api.DatagenEvent) {
			e.ErrorType, e.RunID, e.Attempt, e.StepIndex = ptr("OOM"), "run-2", 1, ptr(int64(4))
		})}
	fs, err := Failures(evs)
	if err != nil {
		t.Fatal(err)
	}
	if len(fs) != 2 || fs[0].ErrorType != "Timeout" || *fs[0].ErrorDump != "boom" || *fs[0].Traceback != "tb" || fs[0].At.ItemSeq != 1 ||
		fs[1].ErrorType != "OOM" || fs[1].RunID != "run-2" || fs[1].Attempt != 1 || fs[1].At.StepIndex != 4 || fs[1].ErrorDump != nil {
		t.Fatalf("%+v", fs)
	}
	if fs, err := Failures(evs[:1]); err != nil || fs == nil || len(fs) != 0 {
		t.Fatalf("no failures: %+v %v", fs, err)
	}
	if _, err := Failures([]api.DatagenEvent{evs[1], with(evs[2], func(e *api.DatagenEvent) { e.ItemSeq = 1 })}); !errors.Is(err, ErrInconsistent) {
		t.Fatalf("conflicting item_seq: %v", err)
	}
}

func TestOverview(t *testing.T) {
	row := func(e api.DatagenEvent) OverviewRow {
		return OverviewRow{ItemID: e.ItemID, RootItemID: e.RootItemID, EventType: e.EventType, RunID: e.RunID, ParentItemID: e.ParentItemID,
			Status: e.Status, ErrorType: e.ErrorType, StepName: e.StepName, ItemSeq: e.ItemSeq}
	}
	fail := func(id, item string, seq int64, run, typ string) api.DatagenEvent {
		return with(ev(id, item, seq, Failed), func(e *api.DatagenEvent) { e.RunID, e.ErrorType = run, ptr(typ) })
	}
	child := func(e api.DatagenEvent) api.DatagenEvent {
		return with(e, func(e *api.DatagenEvent) { e.RootItemID, e.ParentItemID = "a", ptr("a") })
	}
	evs := []api.DatagenEvent{
		// a: completed after a failure; a child of a, running, with a failure of its own.
		ev("a0", "a", 0, ItemCreated), fail("a1", "a", 1, "run-1", "Timeout"), ev("a2", "a", 2, StepCompleted), ev("a3", "a", 3, Terminal),
		child(ev("c0", "a/c", 0, ItemCreated)), child(fail("c1", "a/c", 1, "run-2", "OOM")), child(ev("c2", "a/c", 2, StepCompleted)),
		// b: filtered; d: running; e: never started (no ITEM_CREATED first), its events not counted.
		ev("b0", "b", 0, ItemCreated), with(ev("b1", "b", 1, Terminal), func(e *api.DatagenEvent) { e.Status = ptr(StatusFiltered) }),
		ev("d0", "d", 0, ItemCreated), fail("d1", "d", 1, "run-1", "Timeout"),
		ev("e1", "e", 1, StepCompleted), fail("e2", "e", 2, "run-1", "Timeout"),
		// f: completed, then restarted by a later ITEM_CREATED: running.
		ev("f0", "f", 0, ItemCreated), ev("f1", "f", 1, Terminal), ev("f2", "f", 2, ItemCreated),
	}
	// Any order: the aggregation does not depend on it.
	for _, order := range [][]api.DatagenEvent{evs, reversed(evs)} {
		o := NewOverview()
		for _, e := range order {
			o.Add(row(e))
		}
		got := o.Result()
		if got.Items != 4 || got.Completed != 1 || got.Filtered != 1 || got.Running != 2 { // a, b, d, f: roots only
			t.Fatalf("counts %+v", got)
		}
		if got.Failures != 3 || got.FailuresByErrorType["Timeout"] != 2 || got.FailuresByErrorType["OOM"] != 1 {
			t.Fatalf("failures %+v", got)
		}
		r1, r2 := got.FailuresByRun["run-1"], got.FailuresByRun["run-2"]
		if r1.Failures != 2 || !slices.Equal(r1.SampleRootItemIDs, []string{"a", "d"}) || r2.Failures != 1 ||
			!slices.Equal(r2.SampleRootItemIDs, []string{"a"}) || r2.FailuresByErrorType["OOM"] != 1 {
			t.Fatalf("by run %+v", got.FailuresByRun)
		}
		if got.CompletedSteps["gen"] != 2 || len(got.CompletedSteps) != 1 {
			t.Fatalf("steps %+v", got.CompletedSteps)
		}
	}
	// The sample of root ids is bounded.
	o := NewOverview()
	for i := range 2 * FailureSampleLimit {
		id := string(rune('a' + i))
		o.Add(row(ev(id+"0", id, 0, ItemCreated)))
		o.Add(row(fail(id+"1", id, 1, "run-1", "X")))
	}
	if got := o.Result().FailuresByRun["run-1"]; got.Failures != 2*FailureSampleLimit || len(got.SampleRootItemIDs) != FailureSampleLimit {
		t.Fatalf("sample %+v", got)
	}
	// Status of one item's events.
	for _, c := range []struct {
		evs  []api.DatagenEvent
		want string
	}{
		{nil, ""},
		{evs[11:13], ""},
		{evs[0:4], StatusCompleted},
		{evs[7:9], StatusFiltered},
		{evs[9:11], StatusRunning},
		{reversed(evs[13:16]), StatusRunning},
	} {
		if got := Status(c.evs); got != c.want {
			t.Fatalf("status of %d events: %q, want %q", len(c.evs), got, c.want)
		}
	}
}

func reversed(evs []api.DatagenEvent) []api.DatagenEvent {
	out := slices.Clone(evs)
	slices.Reverse(out)
	return out
}

func TestColumnIDs(t *testing.T) {
	fs := Schema().Fields()
	if len(fs) != numColumns {
		t.Fatalf("%d columns, %d ids", len(fs), numColumns)
	}
	for i, f := range fs {
		if got := columnID(f.Name); got != i {
			t.Errorf("column %q: id %d, position %d", f.Name, got, i)
		}
	}
	if columnID("nope") != -1 {
		t.Error("an unknown column has an id")
	}
}
