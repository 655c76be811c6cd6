package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/datagen"
	"github.com/lancectx/lancectx/internal/arrowjson"
	"github.com/lancectx/lancectx/internal/oracle"
)

// dgEvent builds a datagen event as JSON; extra overrides or adds fields.
func dgEvent(id, item string, seq int64, typ string, extra map[string]any) map[string]any {
	ev := map[string]any{"event_id": id, "item_id": item, "root_item_id": item, "item_seq": seq,
		"checkpoint_id": fmt.Sprintf("c-%s-%d", item, seq), "event_type": typ, "attempt": 0, "run_id": "run-1",
		"writer_epoch": "w1", "schema_version": 1, "event_ts": "2026-01-02T03:04:05.000006Z"}
	switch typ {
	case datagen.StepStarted, datagen.StepCompleted, datagen.FieldSet, datagen.FieldAppend, datagen.Failed:
		ev["step_name"], ev["step_kind"], ev["step_index"] = "gen", "leaf", 0
	}
	switch typ {
	case datagen.FieldSet, datagen.FieldAppend:
		ev["field_name"], ev["field_type"], ev["codec_version"] = "score", "int", 1
		ev["value"] = map[string]any{"kind": "int", "value": seq}
	case datagen.Failed:
		ev["error_type"] = "Timeout"
	case datagen.Terminal:
		ev["status"] = "completed"
	case datagen.ItemCreated:
		ev["status"] = "running"
	}
	for k, v := range extra {
		if v == nil {
			delete(ev, k)
		} else {
			ev[k] = v
		}
	}
	return ev
}

func dgBody(evs ...map[string]any) []byte {
	b, _ := json.Marshal(map[string]any{"events": evs})
	return b
}

func (tw *testWorker) dgAppend(name, query string, evs ...map[string]any) response {
	tw.t.Helper()
	return tw.do("POST", "/api/v1/datagen/"+name+"/events"+query, api.ContentTypeJSON, dgBody(evs...))
}

func (tw *testWorker) dgCreate(name string) {
	tw.t.Helper()
	tw.do("POST", "/api/v1/datagen", api.ContentTypeJSON, []byte(`{"name":"`+name+`"}`)).want(tw.t, http.StatusCreated, nil)
}

func (tw *testWorker) dgEvents(name, item string) []api.DatagenEvent {
	tw.t.Helper()
	var out api.ListDatagenEventsResponse
	tw.do("GET", "/api/v1/datagen/"+name+"/items/"+item+"/events", "", nil).want(tw.t, http.StatusOK, &out)
	return out.Events
}

func (tw *testWorker) dgMerge(name string) {
	tw.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := tw.srv.mergeWAL(ctx, tw.srv.datagens, name, true); err != nil {
		tw.t.Fatal(err)
	}
}

// itemLog is one item's life: created, a checkpoint (an int field, a blob field,
// an appended str, the STEP_COMPLETED), a failure, a retry, the end.
func itemLog(item string) (plain []map[string]any, checkpoint []map[string]any, rest []map[string]any) {
	plain = []map[string]any{dgEvent(item+"-0", item, 0, datagen.ItemCreated, map[string]any{"query_tags": map[string]any{"q": 1}}),
		dgEvent(item+"-1", item, 1, datagen.StepStarted, map[string]any{"step_kind": "sequence", "step_name": "main"})}
	cp := map[string]any{"checkpoint_id": "cp-" + item, "enclosing_step": "main"}
	with := func(m map[string]any) map[string]any {
		for k, v := range cp {
			m[k] = v
		}
		return m
	}
	checkpoint = []map[string]any{
		dgEvent(item+"-2", item, 2, datagen.FieldSet, with(map[string]any{})),
		dgEvent(item+"-3", item, 3, datagen.FieldSet, with(map[string]any{"field_name": "image", "field_type": "bytes",
			"value": map[string]any{"kind": "blob", "bytes": []byte("png:" + item), "size": len("png:" + item), "checksum": "x"}})),
		dgEvent(item+"-4", item, 4, datagen.FieldAppend, with(map[string]any{"field_name": "notes", "field_type": "str",
			"value": map[string]any{"kind": "str", "value": "it's \"quoted\""}})),
		dgEvent(item+"-5", item, 5, datagen.StepCompleted, with(map[string]any{})),
	}
	rest = []map[string]any{
		dgEvent(item+"-6", item, 6, datagen.Failed, map[string]any{"attempt": 1, "error_dump": "boom"}),
		dgEvent(item+"-7", item, 7, datagen.FieldAppend, map[string]any{"field_name": "notes", "field_type": "str", "attempt": 1,
			"value": map[string]any{"kind": "str", "value": "second"}}),
		dgEvent(item+"-8", item, 8, datagen.Terminal, map[string]any{"attempt": 1}),
	}
	return plain, checkpoint, rest
}

// TestDatagenEndToEnd writes items over real HTTP (plain, checkpoint and retried
// batches), reads every lens before and after a merge, and checks that LanceDB
// reads the merged base table exactly as the events were written.
func TestDatagenEndToEnd(t *testing.T) {
	tw := newTestWorker(t, "", nil)
	tw.dgCreate("dg")
	var all []map[string]any
	for _, item := range []string{"a", "b"} {
		plain, cp, rest := itemLog(item)
		tw.dgAppend("dg", "", plain...).want(t, http.StatusCreated, nil)
		tw.dgAppend("dg", "?checkpoint=true", cp...).want(t, http.StatusCreated, nil)
		tw.dgAppend("dg", "", rest...).want(t, http.StatusCreated, nil)
		// A retried batch (same event ids, same content) is idempotent.
		var resp api.DatagenAppendResponse
		tw.dgAppend("dg", "?checkpoint=true", cp...).want(t, http.StatusCreated, &resp)
		if resp.Count != len(cp) || !resp.Durable || !resp.Visible {
			t.Fatalf("retry answer %+v", resp)
		}
		all = append(append(append(all, plain...), cp...), rest...)
	}
	// A sub-item of a, still running.
	tw.dgAppend("dg", "", dgEvent("a1-0", "a/x:0", 0, datagen.ItemCreated, map[string]any{"root_item_id": "a", "parent_item_id": "a"})).
		want(t, http.StatusCreated, nil)
	all = append(all, dgEvent("a1-0", "a/x:0", 0, datagen.ItemCreated, map[string]any{"root_item_id": "a", "parent_item_id": "a"}))

	check := func(stage string) {
		t.Helper()
		evs := tw.dgEvents("dg", "a")
		if len(evs) != 9 {
			t.Fatalf("%s: item a has %d events, want 9: %+v", stage, len(evs), evs)
		}
		for i, ev := range evs {
			if ev.ItemSeq != int64(i) || ev.EventID != fmt.Sprintf("a-%d", i) {
				t.Fatalf("%s: event %d is %s at %d", stage, i, ev.EventID, ev.ItemSeq)
			}
		}
		var item api.GetFoldedDatagenItemResponse
		tw.do("GET", "/api/v1/datagen/dg/items/a", "", nil).want(t, http.StatusOK, &item)
		it := item.Item
		if it == nil || it.Status != "completed" || it.LastItemSeq != 8 || it.LastAttempt != 1 || len(it.Trajectory) != 1 ||
			it.Trajectory[0].StepName != "gen" || len(it.Started) != 1 || len(it.Completed) != 1 ||
			string(it.QueryTags) != `{"q":1}` || it.BlobEventIDs["image"] != "a-3" {
			t.Fatalf("%s: folded %+v", stage, it)
		}
		if f := it.Fields["score"]; f.Mode != "set" || string(f.Value.Value) != "2" {
			t.Fatalf("%s: score %+v", stage, f)
		}
		if f := it.Fields["notes"]; f.Mode != "append" || len(f.Values) != 2 || string(f.Values[1].Value) != `"second"` {
			t.Fatalf("%s: notes %+v", stage, f)
		}
		if f := it.Fields["image"]; f.Value.Bytes != nil || *f.Value.Size != 5 {
			t.Fatalf("%s: lazy blob %+v", stage, f.Value)
		}
		tw.do("GET", "/api/v1/datagen/dg/items/a?load_blobs=true", "", nil).want(t, http.StatusOK, &item)
		if f := item.Item.Fields["image"]; string(f.Value.Bytes) != "png:a" {
			t.Fatalf("%s: loaded blob %+v", stage, f.Value)
		}
		var none api.GetFoldedDatagenItemResponse
		r := tw.do("GET", "/api/v1/datagen/dg/items/nope", "", nil)
		r.want(t, http.StatusOK, &none)
		if none.Item != nil || !strings.Contains(string(r.body), `"item":null`) {
			t.Fatalf("%s: missing item: %s", stage, r.body)
		}
		var fs api.ListDatagenFailuresResponse
		tw.do("GET", "/api/v1/datagen/dg/items/a/failures", "", nil).want(t, http.StatusOK, &fs)
		if len(fs.Failures) != 1 || fs.Failures[0].ErrorType != "Timeout" || fs.Failures[0].At.ItemSeq != 6 || *fs.Failures[0].ErrorDump != "boom" {
			t.Fatalf("%s: failures %+v", stage, fs)
		}
		var roots api.ListDatagenEventsResponse
		tw.do("GET", "/api/v1/datagen/dg/roots/a/events", "", nil).want(t, http.StatusOK, &roots)
		if len(roots.Events) != 10 || roots.Events[9].ItemID != "a/x:0" {
			t.Fatalf("%s: root events %d", stage, len(roots.Events))
		}
		var st api.DatagenRootItemStatusesResponse
		tw.do("GET", "/api/v1/datagen/dg/root-status?ids=a,b,zz,a/x:0", "", nil).want(t, http.StatusOK, &st)
		if len(st.Statuses) != 3 || st.Statuses["a"] != "completed" || st.Statuses["a/x:0"] != "running" {
			t.Fatalf("%s: statuses %+v", stage, st)
		}
		var ov api.DatagenRunOverview
		tw.do("GET", "/api/v1/datagen/dg/overview", "", nil).want(t, http.StatusOK, &ov)
		if ov.Items != 2 || ov.Completed != 2 || ov.Running != 0 || ov.Failures != 2 || ov.FailuresByErrorType["Timeout"] != 2 ||
			ov.CompletedSteps["gen"] != 2 || !slices.Equal(ov.FailuresByRun["run-1"].SampleRootItemIDs, []string{"a", "b"}) {
			t.Fatalf("%s: overview %+v", stage, ov)
		}
		r = tw.do("GET", "/api/v1/datagen/dg/blobs/b-3", "", nil)
		if r.status != 200 || string(r.body) != "png:b" || r.header.Get("Content-Type") != "application/octet-stream" {
			t.Fatalf("%s: blob %s", stage, r)
		}
		tw.do("GET", "/api/v1/datagen/dg/blobs/b-2", "", nil).wantError(t, http.StatusNotFound, api.CodeNotFound)
	}
	check("wal")
	tw.dgMerge("dg")
	check("merged")

	// LanceDB reads the merged table: exactly the events written, once each.
	var evs []api.DatagenEvent
	if err := json.Unmarshal(dgBody(all...), &struct {
		Events *[]api.DatagenEvent `json:"events"`
	}{&evs}); err != nil {
		t.Fatal(err)
	}
	for i := range evs {
		if err := datagen.Normalize(i, &evs[i], time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	rec := datagen.ToRecord(evs)
	defer rec.Release()
	want, err := arrowjson.Rows(rec)
	if err != nil {
		t.Fatal(err)
	}
	got, err := oracle.New(t).Read(filepath.Join(tw.dir, "dg.datagen.lance"), oracle.ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(want)
	sort.Strings(got)
	if !slices.Equal(got, want) {
		t.Fatalf("LanceDB reads\n%s\nwritten\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestDatagenValidation: each bad append is a 400 that writes nothing, whether the
// conflict is inside the batch, with an in-WAL event or with a merged one.
func TestDatagenValidation(t *testing.T) {
	tw := newTestWorker(t, "", nil)
	tw.dgCreate("v")
	tw.dgAppend("v", "", dgEvent("m0", "m", 0, datagen.ItemCreated, nil), dgEvent("m1", "m", 1, datagen.FieldSet, nil)).
		want(t, http.StatusCreated, nil)
	tw.dgMerge("v") // m0, m1 in the base
	tw.dgAppend("v", "", dgEvent("w0", "w", 0, datagen.ItemCreated, nil), dgEvent("w1", "w", 1, datagen.FieldSet, nil)).
		want(t, http.StatusCreated, nil) // w0, w1 in a sealed generation
	cpA := func(seq int64, typ string, extra map[string]any) map[string]any {
		m := map[string]any{"checkpoint_id": "cp"}
		for k, v := range extra {
			m[k] = v
		}
		return dgEvent(fmt.Sprintf("n%d", seq), "n", seq, typ, m)
	}
	cases := []struct {
		name, query string
		evs         []map[string]any
		msg         string
	}{
		{"event_id reused with different content in the batch", "", []map[string]any{dgEvent("x", "n", 0, datagen.ItemCreated, nil),
			dgEvent("x", "n", 1, datagen.ItemCreated, nil)}, "reused with different content"},
		{"event_id reused with different content (in the WAL)", "", []map[string]any{dgEvent("w1", "w", 1, datagen.FieldSet,
			map[string]any{"value": map[string]any{"kind": "int", "value": 99}})}, "reused with different content"},
		{"event_id reused with different content (in the base)", "", []map[string]any{dgEvent("m1", "m", 1, datagen.FieldSet,
			map[string]any{"run_id": "other"})}, "reused with different content"},
		{"duplicate item_seq in the batch", "", []map[string]any{dgEvent("y1", "n", 0, datagen.ItemCreated, nil),
			dgEvent("y2", "n", 0, datagen.ItemCreated, nil)}, "conflicting events at item_seq 0"},
		{"duplicate item_seq (in the WAL)", "", []map[string]any{dgEvent("w1bis", "w", 1, datagen.FieldSet, nil)}, `already has event "w1"`},
		{"duplicate item_seq (in the base)", "", []map[string]any{dgEvent("m1bis", "m", 1, datagen.FieldSet, nil)}, `already has event "m1"`},
		{"blob size mismatch", "", []map[string]any{dgEvent("b", "n", 0, datagen.FieldSet, map[string]any{
			"value": map[string]any{"kind": "blob", "bytes": []byte("abc"), "size": 4}})}, "does not match its 3 bytes"},
		{"blob without bytes", "", []map[string]any{dgEvent("b", "n", 0, datagen.FieldSet, map[string]any{
			"value": map[string]any{"kind": "blob", "size": 4}})}, "must carry bytes"},
		{"checkpoint with two STEP_COMPLETED", "?checkpoint=true", []map[string]any{cpA(1, datagen.StepCompleted, nil),
			cpA(2, datagen.StepCompleted, nil)}, "exactly one STEP_COMPLETED"},
		{"checkpoint without STEP_COMPLETED", "?checkpoint=true", []map[string]any{cpA(1, datagen.FieldSet, nil)}, "found none"},
		{"checkpoint with another event type", "?checkpoint=true", []map[string]any{cpA(1, datagen.Failed, nil),
			cpA(2, datagen.StepCompleted, nil)}, "only FIELD_SET"},
		{"checkpoint across checkpoints", "?checkpoint=true", []map[string]any{cpA(1, datagen.FieldSet, map[string]any{"checkpoint_id": "other"}),
			cpA(2, datagen.StepCompleted, nil)}, "same item, checkpoint_id"},
		{"checkpoint across attempts", "?checkpoint=true", []map[string]any{cpA(1, datagen.FieldSet, map[string]any{"attempt": 1}),
			cpA(2, datagen.StepCompleted, nil)}, "same item, checkpoint_id"},
		{"checkpoint field at another step", "?checkpoint=true", []map[string]any{cpA(1, datagen.FieldSet, map[string]any{"step_index": 3}),
			cpA(2, datagen.StepCompleted, nil)}, "not at the step"},
	}
	for _, c := range cases {
		before := listing(t, tw.dir)
		e := tw.dgAppend("v", c.query, c.evs...).wantError(t, http.StatusBadRequest, api.CodeInvalidRequest)
		if !strings.Contains(e.Message, c.msg) {
			t.Errorf("%s: message %q does not say %q", c.name, e.Message, c.msg)
		}
		if d := writtenSince(before, listing(t, tw.dir)); d != "" {
			t.Errorf("%s: wrote %s", c.name, d)
		}
	}
	// The checks did not leave reservations behind: the same events, right, pass.
	tw.dgAppend("v", "?checkpoint=true", cpA(1, datagen.FieldSet, nil), cpA(2, datagen.StepCompleted, nil)).want(t, http.StatusCreated, nil)
	if n := len(tw.dgEvents("v", "n")); n != 2 {
		t.Fatalf("item n has %d events", n)
	}
}

// TestDatagenConcurrentAppends: concurrent appends of distinct items all land,
// visible when acked; of two concurrent appends with one event_id and different
// content exactly one wins, every time.
func TestDatagenConcurrentAppends(t *testing.T) {
	tw := newTestWorker(t, "", nil)
	tw.dgCreate("c")
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			item := fmt.Sprintf("i%d", w)
			for b := range 5 {
				var evs []map[string]any
				for k := range 10 {
					seq := int64(b*10 + k)
					typ := datagen.FieldAppend
					if seq == 0 {
						typ = datagen.ItemCreated
					}
					evs = append(evs, dgEvent(fmt.Sprintf("%s-%d", item, seq), item, seq, typ, nil))
				}
				r := doHTTP(t, tw.url, "POST", "/api/v1/datagen/c/events", api.ContentTypeJSON, dgBody(evs...))
				if r.status != http.StatusCreated {
					t.Errorf("append: %s", r)
					return
				}
				// Read-your-writes: the events are visible when acked.
				var out api.ListDatagenEventsResponse
				doHTTP(t, tw.url, "GET", "/api/v1/datagen/c/items/"+item+"/events", "", nil).want(t, http.StatusOK, &out)
				if len(out.Events) != (b+1)*10 {
					t.Errorf("%s: %d events visible after batch %d", item, len(out.Events), b)
				}
			}
		})
	}
	wg.Wait()
	for round := range 10 {
		id := fmt.Sprintf("race-%d", round)
		codes := make([]int, 2)
		for k := range 2 {
			wg.Go(func() {
				r := doHTTP(t, tw.url, "POST", "/api/v1/datagen/c/events", api.ContentTypeJSON,
					dgBody(dgEvent(id, id, 0, datagen.ItemCreated, map[string]any{"run_id": fmt.Sprint("r", k)})))
				codes[k] = r.status
			})
		}
		wg.Wait()
		slices.Sort(codes)
		if codes[0] != http.StatusCreated || codes[1] != http.StatusBadRequest {
			t.Fatalf("round %d: statuses %v, want one 201 and one 400", round, codes)
		}
	}
}

// TestDatagenRouteTable walks the reference's route table for datagen stores
// (worker.md §5) in order, over real HTTP: every route is in api.Routes() and
// answers its documented status with its documented shape.
func TestDatagenRouteTable(t *testing.T) {
	tw := newTestWorker(t, "", nil)
	blob := dgEvent("e2", "it", 2, datagen.FieldSet, map[string]any{"value": map[string]any{"kind": "blob", "bytes": []byte("hi"), "size": 2}})
	table := []struct {
		method, path, tmpl string
		body               []byte
		status             int
		fields             []string
	}{
		{"POST", "/api/v1/datagen", "", []byte(`{"name":"walk"}`), 201, []string{"name", "uri", "version"}},
		{"GET", "/api/v1/datagen", "", nil, 200, []string{"stores"}},
		{"GET", "/api/v1/datagen/walk", "/api/v1/datagen/{name}", nil, 200, []string{"name", "uri", "version"}},
		{"POST", "/api/v1/datagen/walk/events", "/api/v1/datagen/{name}/events",
			dgBody(dgEvent("e0", "it", 0, datagen.ItemCreated, nil), dgEvent("e1", "it", 1, datagen.Failed, nil)), 201, []string{"version", "count"}},
		{"POST", "/api/v1/datagen/walk/events?checkpoint=true", "/api/v1/datagen/{name}/events",
			dgBody(blob, dgEvent("e3", "it", 3, datagen.StepCompleted, map[string]any{"checkpoint_id": "c-it-2"})), 201, []string{"version", "count"}},
		{"GET", "/api/v1/datagen/walk/items/it?load_blobs=true", "/api/v1/datagen/{name}/items/{item_id}", nil, 200, []string{"item"}},
		{"GET", "/api/v1/datagen/walk/items/it/failures", "/api/v1/datagen/{name}/items/{item_id}/failures", nil, 200, []string{"failures"}},
		{"GET", "/api/v1/datagen/walk/items/it/events", "/api/v1/datagen/{name}/items/{item_id}/events", nil, 200, []string{"events"}},
		{"GET", "/api/v1/datagen/walk/overview", "/api/v1/datagen/{name}/overview", nil, 200,
			[]string{"items", "running", "completed", "filtered", "failures", "failures_by_error_type", "failures_by_run", "completed_steps"}},
		{"GET", "/api/v1/datagen/walk/root-status?ids=it,x", "/api/v1/datagen/{name}/root-status", nil, 200, []string{"statuses"}},
		{"GET", "/api/v1/datagen/walk/roots/it/events", "/api/v1/datagen/{name}/roots/{root_item_id}/events", nil, 200, []string{"events"}},
		{"GET", "/api/v1/datagen/walk/blobs/e2", "/api/v1/datagen/{name}/blobs/{event_id}", nil, 200, nil},
		{"DELETE", "/api/v1/datagen/walk", "/api/v1/datagen/{name}", nil, 204, nil},
	}
	served := map[string]bool{}
	for _, r := range api.Routes() {
		served[r.Method+" "+r.Path] = true
	}
	walked := map[string]bool{}
	for _, step := range table {
		ct := ""
		if step.body != nil {
			ct = api.ContentTypeJSON
		}
		r := tw.do(step.method, step.path, ct, step.body)
		if r.status != step.status {
			t.Fatalf("%s %s: %s, want %d", step.method, step.path, r, step.status)
		}
		if step.fields != nil {
			var doc map[string]json.RawMessage
			if err := json.Unmarshal(r.body, &doc); err != nil {
				t.Fatalf("%s %s: %v: %s", step.method, step.path, err, r.body)
			}
			for _, f := range step.fields {
				if _, ok := doc[f]; !ok {
					t.Fatalf("%s %s: the answer has no %q: %s", step.method, step.path, f, r.body)
				}
			}
		}
		tmpl := step.tmpl
		if tmpl == "" {
			tmpl = step.path
		}
		if !served[step.method+" "+tmpl] {
			t.Fatalf("%s %s is not in api.Routes()", step.method, tmpl)
		}
		walked[step.method+" "+tmpl] = true
	}
	for k := range served {
		if strings.Contains(k, "/api/v1/datagen") && !walked[k] {
			t.Fatalf("api.Routes() has %s, which the walk does not cover", k)
		}
	}
	tw.do("GET", "/api/v1/datagen/walk", "", nil).wantError(t, http.StatusNotFound, api.CodeNotFound)
}

// TestDatagenSeqCheckAcrossMerges: the (item_id, item_seq) check of an item the base
// table holds reads only the base fragments added since the handle last looked at the
// item; an event merged into the base in between (by a merge after the item was
// checked) must still be found, whichever path the check takes.
func TestDatagenSeqCheckAcrossMerges(t *testing.T) {
	tw := newTestWorker(t, "", nil)
	tw.dgCreate("s")
	tw.dgAppend("s", "", dgEvent("k0", "k", 0, datagen.ItemCreated, nil), dgEvent("k1", "k", 1, datagen.FieldSet, nil)).
		want(t, http.StatusCreated, nil)
	tw.dgMerge("s") // k0, k1 in the base
	tw.dgAppend("s", "", dgEvent("k2", "k", 2, datagen.FieldSet, nil), dgEvent("k3", "k", 3, datagen.FieldSet, nil)).
		want(t, http.StatusCreated, nil) // checked against the base: the item's highest item_seq there is 1
	tw.dgMerge("s") // k2, k3 in a new base fragment
	cases := []struct {
		ev   map[string]any
		want string
	}{
		{dgEvent("k3bis", "k", 3, datagen.FieldSet, nil), `already has event "k3"`}, // above what the handle knew: new fragments only
		{dgEvent("k1bis", "k", 1, datagen.FieldSet, nil), `already has event "k1"`}, // at or below it: the whole base
		{dgEvent("k2bis", "k", 2, datagen.FieldSet, nil), `already has event "k2"`},
	}
	for _, c := range cases {
		before := listing(t, tw.dir)
		e := tw.dgAppend("s", "", c.ev).wantError(t, http.StatusBadRequest, api.CodeInvalidRequest)
		if !strings.Contains(e.Message, c.want) {
			t.Errorf("%s: message %q does not say %q", c.ev["event_id"], e.Message, c.want)
		}
		if d := writtenSince(before, listing(t, tw.dir)); d != "" {
			t.Errorf("%s: wrote %s", c.ev["event_id"], d)
		}
	}
	tw.dgAppend("s", "", dgEvent("k4", "k", 4, datagen.FieldSet, nil)).want(t, http.StatusCreated, nil)
	if n := len(tw.dgEvents("s", "k")); n != 5 {
		t.Fatalf("item k has %d events, want 5", n)
	}
}
