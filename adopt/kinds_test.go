package adopt

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/lancectx/lancectx/internal/oracle"
	"github.com/lancectx/lancectx/lance"
	"github.com/lancectx/lancectx/objstore"
	"github.com/lancectx/lancectx/storekind"
	"github.com/lancectx/lancectx/wal"
)

// kindsSpec is kinds.json of lancecontext-kinds-fixture.mjs.
type kindsSpec struct {
	Generic map[string]map[string]map[string]any `json:"generic"`
	Datagen map[string]map[string]struct {
		ItemID    string `json:"item_id"`
		ItemSeq   int64  `json:"item_seq"`
		EventType string `json:"event_type"`
	} `json:"datagen"`
	NotAdopted []string `json:"not_adopted"`
}

// buildKindsFixture is a lance-context data directory of every kind: the rollout
// fixture plus lancecontext-kinds-fixture.mjs's generic and datagen stores, each with
// pending MemWAL generations, and two stores lancectx cannot serve.
func buildKindsFixture(t *testing.T) (string, kindsSpec) {
	t.Helper()
	dir, _ := buildFixture(t, "--stores", "1", "--generations", "2", "--rows", "6")
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("the fixture needs node on PATH: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	script := filepath.Join(moduleRoot(t), "tests", "interop", "lancecontext-kinds-fixture.mjs")
	if out, err := exec.CommandContext(ctx, node, script, dir).CombinedOutput(); err != nil {
		t.Fatalf("build the kinds fixture: %v\n%s", err, out)
	}
	buf, err := os.ReadFile(filepath.Join(dir, "kinds.json"))
	if err != nil {
		t.Fatal(err)
	}
	var spec kindsSpec
	if err := json.Unmarshal(buf, &spec); err != nil {
		t.Fatal(err)
	}
	return dir, spec
}

// TestAdoptEveryKind adopts a lance-context data directory holding rollout, generic
// and datagen stores: the generic store gets the spec its columns declare (its
// reference-encoded spec replaced, seal_on_add kept), the datagen store is checked
// against the event schema, both have their pending MemWAL generations merged; the
// worker then serves them and every row and event reads back through the API (and
// through LanceDB) exactly once with its newest content, and both take new writes. A
// generic table with a column no generic schema has and a datagen table that is not
// the event schema are reported as not adopted, and not one of their files changes.
func TestAdoptEveryKind(t *testing.T) {
	dir, spec := buildKindsFixture(t)
	o := oracle.New(t)
	untouched := map[string]map[string]int64{}
	for _, k := range spec.NotAdopted {
		kind, name, _ := strings.Cut(k, "/")
		untouched[k] = listFiles(t, filepath.Join(dir, name+"."+kind+".lance"))
	}

	sum, reps := runAdopt(t, dir, nil)
	for _, k := range []string{"rollout/exp-000", "rollout/legacy", "generic/g0", "generic/traces", "datagen/pipeline"} {
		if r := reps[k]; r.Outcome != Adopted {
			t.Errorf("%s: %s (%s), want adopted", k, r.Outcome, r.Message)
		}
	}
	if r := reps["generic/traces"]; r.Pending != 2 || r.MergedGenerations != 2 || r.Source != "registry+directory" ||
		r.RowsAfter != int64(len(spec.Generic["traces"])) {
		t.Errorf("generic/traces: report %+v, want 2 generations merged, %d rows", r, len(spec.Generic["traces"]))
	}
	if r := reps["datagen/pipeline"]; r.MergedGenerations != 2 || r.RowsAfter != int64(len(spec.Datagen["pipeline"])) {
		t.Errorf("datagen/pipeline: report %+v, want 2 generations merged, %d events", r, len(spec.Datagen["pipeline"]))
	}
	wantWhy := map[string]string{"generic/badtypes": `column 1 "role"`, "datagen/d0": "not the datagen event schema"}
	for _, k := range spec.NotAdopted {
		r := reps[k]
		if r.Outcome != NotAdopted || !strings.Contains(r.Message, wantWhy[k]) {
			t.Errorf("%s: %s (%s), want not adopted naming %s", k, r.Outcome, r.Message, wantWhy[k])
		}
		kind, name, _ := strings.Cut(k, "/")
		if d := diffFiles(untouched[k], listFiles(t, filepath.Join(dir, name+"."+kind+".lance"))); d != "" {
			t.Errorf("%s: adoption wrote to a store it did not adopt: %s", k, d)
		}
		if _, err := storekind.Generic.Registry(openDir(t, dir)).Get(t.Context(), name); kind == KindGeneric && err == nil {
			t.Errorf("%s was registered", k)
		}
	}
	if sum.Failed != 0 || sum.NotAdopted != len(spec.NotAdopted) {
		t.Errorf("summary %+v", sum)
	}

	// LanceDB reads the adopted tables: every row once, its newest copy.
	st := openDir(t, dir)
	for name, rows := range spec.Generic {
		want := map[string]string{}
		for id, r := range rows {
			want[id] = r["note"].(string)
		}
		got, err := o.Read(filepath.Join(dir, name+".generic.lance"), oracle.ReadOptions{Columns: []string{"id", "note"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := sameRows(renameColumn(got, "note", "content"), want); err != nil {
			t.Errorf("LanceDB read of %s: %v", name, err)
		}
	}
	for name, events := range spec.Datagen {
		want := map[string]string{}
		for id, e := range events {
			want[id] = e.EventType
		}
		got, err := o.Read(filepath.Join(dir, name+".datagen.lance"), oracle.ReadOptions{Columns: []string{"event_id", "event_type"}})
		if err != nil {
			t.Fatal(err)
		}
		if err := sameRows(renameColumn(renameColumn(got, "event_id", "id"), "event_type", "content"), want); err != nil {
			t.Errorf("LanceDB read of %s: %v", name, err)
		}
	}
	for _, k := range []storekind.Kind{storekind.Generic, storekind.Datagen} {
		for _, name := range map[string][]string{KindGeneric: {"traces", "g0"}, KindDatagen: {"pipeline"}}[k.Name] {
			if _, err := os.Stat(filepath.Join(dir, k.DatasetDir(name), "_mem_wal")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s %s: _mem_wal not retired (%v)", k.Name, name, err)
			}
			e, err := k.Registry(st).Get(t.Context(), name)
			if err != nil {
				t.Fatalf("%s %s: %v", k.Name, name, err)
			}
			ds, err := lance.OpenStore(t.Context(), objstore.Prefixed(st, k.DatasetDir(name)))
			if err != nil {
				t.Fatal(err)
			}
			if e.Adopted == nil || wal.Incarnation(ds) != e.Incarnation {
				t.Errorf("%s %s: registry entry %+v, table incarnation %q", k.Name, name, e, wal.Incarnation(ds))
			}
		}
	}

	w := startWorker(t, dir)
	checkGenericServed(t, w, spec.Generic["traces"])
	checkDatagenServed(t, w, spec.Datagen["pipeline"])
	if status, body := w.do(t, "GET", "/api/v1/generic/g0/rows/b", ""); status != http.StatusOK || !strings.Contains(string(body), `"value":"2"`) {
		t.Errorf("g0 row b: %d %s", status, body)
	}
	for _, k := range spec.NotAdopted {
		kind, name, _ := strings.Cut(k, "/")
		if status, body := w.do(t, "GET", "/api/v1/"+kind+"/"+name, ""); status != http.StatusNotFound {
			t.Errorf("%s is served: %d %s", k, status, body)
		}
	}

	// A second run changes nothing.
	w.stop()
	before := listFiles(t, dir)
	sum2, _ := runAdopt(t, dir, nil)
	if sum2.AlreadyRegistered != sum.Adopted || sum2.NotAdopted != len(spec.NotAdopted) || sum2.Failed != 0 {
		t.Errorf("second run summary %+v", sum2)
	}
	if d := diffFiles(before, listFiles(t, dir)); d != "" {
		t.Errorf("the second run wrote: %s", d)
	}
}

// renameColumn renames a key of JSON rows (sameRows compares "id" and "content").
func renameColumn(rows []string, from, to string) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		var m map[string]any
		if err := json.Unmarshal([]byte(r), &m); err != nil {
			out[i] = r
			continue
		}
		m[to] = m[from]
		delete(m, from)
		b, _ := json.Marshal(m)
		out[i] = string(b)
	}
	return out
}

// checkGenericServed reads the adopted traces store through the API: the describe
// shows the derived spec and the reference's seal_on_add, the list returns every row
// once with every non-blob column as written, the blob column comes when named, and
// an append is readable at once (seal_on_add).
func checkGenericServed(t *testing.T, w *testWorker, want map[string]map[string]any) {
	t.Helper()
	status, body := w.do(t, "GET", "/api/v1/generic/traces", "")
	var info struct {
		SealOnAdd bool `json:"seal_on_add"`
		Schema    struct {
			Columns []struct {
				Name, Type string
				Blob       bool
			}
		}
	}
	if status != http.StatusOK || json.Unmarshal(body, &info) != nil || !info.SealOnAdd || len(info.Schema.Columns) != 13 ||
		!info.Schema.Columns[10].Blob || info.Schema.Columns[12].Type != "fixed_size_list" {
		t.Fatalf("describe traces: %d %s", status, body)
	}
	status, body = w.do(t, "GET", "/api/v1/generic/traces/rows?limit=1000", "")
	var list struct {
		Rows []map[string]any `json:"rows"`
	}
	if status != http.StatusOK || json.Unmarshal(body, &list) != nil {
		t.Fatalf("list traces: %d %s", status, body)
	}
	seen := map[string]bool{}
	for _, r := range list.Rows {
		id, _ := r["id"].(string)
		if seen[id] {
			t.Errorf("row %s listed twice", id)
		}
		seen[id] = true
		exp, ok := want[id]
		if !ok {
			t.Errorf("unexpected row %v", r)
			continue
		}
		if _, has := r["payload"]; has {
			t.Errorf("row %s: the blob column is listed without being asked for", id)
		}
		for col, v := range exp {
			if col == "payload" {
				continue
			}
			if !sameValue(col, v, r[col]) {
				t.Errorf("row %s column %s: %v, want %v", id, col, r[col], v)
			}
		}
		for col, v := range r {
			if _, ok := exp[col]; !ok && v != nil {
				t.Errorf("row %s column %s: %v, want null", id, col, v)
			}
		}
	}
	if len(seen) != len(want) {
		t.Errorf("listed %d rows, want %d", len(seen), len(want))
	}
	ids := make([]string, 0, len(want))
	for id := range want {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		status, body := w.do(t, "GET", "/api/v1/generic/traces/rows/"+id+"?columns=payload", "")
		var r map[string]any
		if status != http.StatusOK || json.Unmarshal(body, &r) != nil || r["payload"] != want[id]["payload"] {
			t.Errorf("row %s with its blob: %d %s, want payload %v", id, status, body, want[id]["payload"])
		}
	}
	status, body = w.do(t, "POST", "/api/v1/generic/traces/rows", `{"rows":[{"id":"new","session":"s9","emb":[1,2,3]}]}`)
	if status != http.StatusCreated {
		t.Fatalf("append to the adopted generic store: %d %s", status, body)
	}
	if status, body := w.do(t, "GET", "/api/v1/generic/traces/rows/new", ""); status != http.StatusOK || !strings.Contains(string(body), `"s9"`) {
		t.Errorf("the appended row (seal_on_add): %d %s", status, body)
	}
}

// sameValue compares a value of the fixture with the API's (timestamps as instants,
// numbers as float64).
func sameValue(col string, want, got any) bool {
	if col == "ts" {
		ws, _ := want.(string)
		gs, _ := got.(string)
		wt, err1 := time.Parse(time.RFC3339Nano, ws)
		gt, err2 := time.Parse(time.RFC3339Nano, gs)
		return err1 == nil && err2 == nil && wt.Equal(gt)
	}
	return reflect.DeepEqual(want, got)
}

// checkDatagenServed reads the adopted pipeline store through the API: each item's
// events once, in item_seq order, and the folded item; then appends an event and
// reads it back (every datagen append is visible when acked).
func checkDatagenServed(t *testing.T, w *testWorker, want map[string]struct {
	ItemID    string `json:"item_id"`
	ItemSeq   int64  `json:"item_seq"`
	EventType string `json:"event_type"`
}) {
	t.Helper()
	lastSeq := map[string]int64{}
	for _, e := range want {
		lastSeq[e.ItemID] = max(lastSeq[e.ItemID], e.ItemSeq)
	}
	seen := map[string]bool{}
	for item, last := range lastSeq {
		status, body := w.do(t, "GET", "/api/v1/datagen/pipeline/items/"+item+"/events", "")
		var out struct {
			Events []struct {
				EventID   string `json:"event_id"`
				ItemID    string `json:"item_id"`
				ItemSeq   int64  `json:"item_seq"`
				EventType string `json:"event_type"`
			} `json:"events"`
		}
		if status != http.StatusOK || json.Unmarshal(body, &out) != nil {
			t.Fatalf("events of %s: %d %s", item, status, body)
		}
		for i, e := range out.Events {
			exp, ok := want[e.EventID]
			switch {
			case seen[e.EventID]:
				t.Errorf("event %s read twice", e.EventID)
			case !ok || exp.ItemID != e.ItemID || exp.ItemSeq != e.ItemSeq || exp.EventType != e.EventType:
				t.Errorf("event %+v, want %+v", e, exp)
			case i > 0 && out.Events[i-1].ItemSeq >= e.ItemSeq:
				t.Errorf("events of %s out of item_seq order at %d", item, i)
			}
			seen[e.EventID] = true
		}
		status, body = w.do(t, "GET", "/api/v1/datagen/pipeline/items/"+item, "")
		var folded struct {
			Item struct {
				LastItemSeq int64 `json:"last_item_seq"`
			} `json:"item"`
		}
		if status != http.StatusOK || json.Unmarshal(body, &folded) != nil || folded.Item.LastItemSeq != last {
			t.Errorf("folded %s: %d %s, want last_item_seq %d", item, status, body, last)
		}
	}
	if len(seen) != len(want) {
		t.Errorf("read %d events, want %d", len(seen), len(want))
	}
	item := "i0"
	ev := fmt.Sprintf(`{"events":[{"event_id":"after-adoption","item_id":%q,"root_item_id":%q,"item_seq":%d,"checkpoint_id":"c-new",`+
		`"event_type":"STEP_STARTED","step_name":"late","step_kind":"leaf","step_index":99,"attempt":0,"run_id":"run-2","writer_epoch":"2","schema_version":1}]}`,
		item, item, lastSeq[item]+1)
	if status, body := w.do(t, "POST", "/api/v1/datagen/pipeline/events", ev); status != http.StatusCreated {
		t.Fatalf("append to the adopted datagen store: %d %s", status, body)
	}
	if status, body := w.do(t, "GET", "/api/v1/datagen/pipeline/items/"+item+"/events", ""); status != http.StatusOK ||
		!strings.Contains(string(body), `"after-adoption"`) {
		t.Errorf("the appended event: %d %s", status, body)
	}
}
