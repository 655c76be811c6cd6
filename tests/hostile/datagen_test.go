package hostile

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/rollout/rollouttest"
)

// dgEv is a datagen event as JSON: a valid event of type typ at (item, seq) with
// extra overriding or adding fields (a nil value removes the field).
func dgEv(id, item string, seq int, typ string, extra map[string]any) string {
	ev := map[string]any{"event_id": id, "item_id": item, "root_item_id": item, "item_seq": seq,
		"checkpoint_id": "c-" + item, "event_type": typ, "attempt": 0, "run_id": "run-1",
		"writer_epoch": "w1", "schema_version": 1, "event_ts": "2026-01-02T03:04:05.000006Z"}
	switch typ {
	case "STEP_STARTED", "STEP_COMPLETED", "FIELD_SET", "FIELD_APPEND", "FAILED":
		ev["step_name"], ev["step_kind"], ev["step_index"] = "gen", "leaf", 0
	}
	switch typ {
	case "FIELD_SET", "FIELD_APPEND":
		ev["field_name"], ev["field_type"], ev["codec_version"] = "score", "int", 1
		ev["value"] = map[string]any{"kind": "int", "value": seq}
	case "FAILED":
		ev["error_type"] = "Timeout"
	case "TERMINAL":
		ev["status"] = "completed"
	case "ITEM_CREATED":
		ev["status"] = "running"
	}
	for k, v := range extra {
		if v == nil {
			delete(ev, k)
		} else {
			ev[k] = v
		}
	}
	b, err := json.Marshal(ev)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func dgEvents(evs ...string) string { return `{"events":[` + strings.Join(evs, ",") + `]}` }

// seedDatagen gives the datagen store (named like the rollout store) one item:
// created and started in a plain append, a checkpoint with an int field, a blob
// field and the STEP_COMPLETED.
func (s *stack) seedDatagen() {
	s.t.Helper()
	s.must("POST", "/api/v1/datagen", tokRW, `{"name":"`+store+`"}`, http.StatusCreated, nil)
	s.must("POST", "/api/v1/datagen/"+store+"/events", tokRW, dgEvents(
		dgEv("seed-e0", "seed-1", 0, "ITEM_CREATED", nil),
		dgEv("seed-e1", "seed-1", 1, "STEP_STARTED", nil)), http.StatusCreated, nil)
	s.must("POST", "/api/v1/datagen/"+store+"/events?checkpoint=true", tokRW, dgEvents(
		dgEv("seed-e2", "seed-1", 2, "FIELD_SET", nil),
		dgEv("seed-e3", "seed-1", 3, "FIELD_SET", map[string]any{"field_name": "image", "field_type": "bytes",
			"value": map[string]any{"kind": "blob", "bytes": "eHl6", "size": 3}}),
		dgEv("seed-e4", "seed-1", 4, "STEP_COMPLETED", nil)), http.StatusCreated, nil)
}

// datagenCases are hostile requests aimed at the datagen store routes: each must be
// refused with its 4xx and the envelope, writing nothing.
func datagenCases(limits rollouttest.Limits) []hostileCase {
	const create = "/api/v1/datagen"
	events := "/api/v1/datagen/{store}/events"
	bad400 := func(name, method, path, body string) hostileCase {
		return hostileCase{Name: "datagen: " + name, Method: method, Path: path, ContentType: api.ContentTypeJSON, Body: body,
			WantStatus: 400, WantCode: api.CodeInvalidRequest}
	}
	// one is a single fresh event (item h1 at seq 0, which the store lacks) with extra.
	one := func(typ string, extra map[string]any) string { return dgEvents(dgEv("h-0", "h1", 0, typ, extra)) }
	field := func(value any) string { return one("FIELD_SET", map[string]any{"value": value}) }
	cp := func(evs ...string) hostileCase {
		return hostileCase{Method: "POST", Path: events + "?checkpoint=true", ContentType: api.ContentTypeJSON, Body: dgEvents(evs...),
			WantStatus: 400, WantCode: api.CodeInvalidRequest}
	}
	named := func(name string, c hostileCase) hostileCase { c.Name = "datagen: " + name; return c }
	return []hostileCase{
		// Create.
		bad400("a create without a name is refused", "POST", create, `{}`),
		bad400("a create whose name is a number is refused", "POST", create, `{"name":7}`),
		bad400("a store name walking out of the data directory is refused", "POST", create, `{"name":"../x"}`),
		bad400("a store name with a NUL is refused", "POST", create, `{"name":"a\u0000b"}`),
		bad400("creating a datagen store named _stats is refused", "POST", create, `{"name":"_stats"}`),
		bad400("datagen storage_options are refused", "POST", create, `{"name":"fresh","storage_options":{"aws_access_key_id":"x"}}`),
		bad400("a datagen create with a schema is refused", "POST", create, `{"name":"fresh","schema":{"columns":[]}}`),
		bad400("a datagen create with data after the body is refused", "POST", create, `{"name":"fresh"}{"name":"other"}`),
		{Name: "datagen: a create sent as text/plain is a 415", Method: "POST", Path: create, ContentType: "text/plain",
			Body: `{"name":"fresh"}`, WantStatus: 415, WantCode: api.CodeUnsupportedMediaType},

		// Append: the body's shape.
		bad400("an empty events array is refused", "POST", events, `{"events":[]}`),
		bad400("events given as an object is refused", "POST", events, `{"events":`+dgEv("h-0", "h1", 0, "ITEM_CREATED", nil)+`}`),
		bad400("the generic body shape is refused", "POST", events, `{"rows":[`+dgEv("h-0", "h1", 0, "ITEM_CREATED", nil)+`]}`),
		bad400("an event that is an array is refused", "POST", events, `{"events":[["h-0","h1"]]}`),
		bad400("an unknown field in an event is refused", "POST", events, one("ITEM_CREATED", map[string]any{"secret": 1})),
		bad400("an unknown field in a value is refused", "POST", events, field(map[string]any{"kind": "int", "value": 1, "unit": "px"})),
		bad400("a field given twice in an event is refused", "POST", events,
			`{"events":[`+strings.Replace(dgEv("h-0", "h1", 0, "ITEM_CREATED", nil), `{`, `{"event_id":"h-x",`, 1)+`]}`),
		bad400("data after the events body is refused", "POST", events, one("ITEM_CREATED", nil)+`{"events":[]}`),
		bad400("a truncated events body is refused", "POST", events, `{"events":[{"event_id":"h-0"`),
		bad400("an empty body is refused", "POST", events, ``),
		{Name: "datagen: invalid UTF-8 in an event is refused", Method: "POST", Path: events, ContentType: api.ContentTypeJSON,
			BodyBase64: base64.StdEncoding.EncodeToString([]byte(strings.Replace(one("ITEM_CREATED", nil), `"run-1"`, "\"r\xc0\xaf\"", 1))),
			WantStatus: 400, WantCode: api.CodeInvalidRequest},
		{Name: "datagen: a body over the limit is a 413", Method: "POST", Path: events, ContentType: api.ContentTypeJSON,
			Body: one("FAILED", map[string]any{"error_dump": "@BIG@"}), Fills: []fill{{"@BIG@", "x", int(limits.MaxBodyBytes)}},
			WantStatus: 413, WantCode: api.CodePayloadTooLarge},
		{Name: "datagen: more events than one append takes is a 413", Method: "POST", Path: events, ContentType: api.ContentTypeJSON,
			Body:  `{"events":[@EVS@` + dgEv("h-0", "h1", 0, "ITEM_CREATED", nil) + `]}`,
			Fills: []fill{{"@EVS@", dgEv("h-0", "h1", 0, "ITEM_CREATED", nil) + ",", limits.MaxRecords}}, WantStatus: 413, WantCode: api.CodePayloadTooLarge},
		{Name: "datagen: an append sent as multipart is a 415", Method: "POST", Path: events, ContentType: "multipart/form-data; boundary=x",
			Body:       "--x\r\nContent-Disposition: form-data; name=\"metadata\"\r\n\r\n" + one("ITEM_CREATED", nil) + "\r\n--x--\r\n",
			WantStatus: 415, WantCode: api.CodeUnsupportedMediaType},

		// Append: identifiers and value kinds of the event's columns.
		bad400("an event without event_id is refused", "POST", events, one("ITEM_CREATED", map[string]any{"event_id": nil})),
		bad400("an empty item_id is refused", "POST", events, one("ITEM_CREATED", map[string]any{"item_id": ""})),
		bad400("an item_id with a control character is refused", "POST", events, one("ITEM_CREATED", map[string]any{"item_id": "a\u0007b"})),
		bad400("a run_id of 1000 bytes is refused", "POST", events, one("ITEM_CREATED", map[string]any{"run_id": strings.Repeat("r", 1000)})),
		bad400("a parent_item_id with a NUL is refused", "POST", events, one("ITEM_CREATED", map[string]any{"parent_item_id": "p\u0000"})),
		bad400("an unknown event_type is refused", "POST", events, one("ITEM_DELETED", nil)),
		bad400("an event_type given as a number is refused", "POST", events, one("ITEM_CREATED", map[string]any{"event_type": 1})),
		bad400("a negative item_seq is refused", "POST", events, one("ITEM_CREATED", map[string]any{"item_seq": -1})),
		bad400("an item_seq given as a string is refused", "POST", events, one("ITEM_CREATED", map[string]any{"item_seq": "0"})),
		bad400("a fractional item_seq is refused", "POST", events, one("ITEM_CREATED", map[string]any{"item_seq": 1.5})),
		bad400("a negative attempt is refused", "POST", events, one("ITEM_CREATED", map[string]any{"attempt": -1})),
		bad400("an attempt past int32 is refused", "POST", events, one("ITEM_CREATED", map[string]any{"attempt": 3000000000})),
		bad400("schema_version 0 is refused", "POST", events, one("ITEM_CREATED", map[string]any{"schema_version": 0})),
		bad400("an unknown step_kind is refused", "POST", events, one("STEP_STARTED", map[string]any{"step_kind": "fork"})),
		bad400("an unknown status is refused", "POST", events, one("ITEM_CREATED", map[string]any{"status": "paused"})),
		bad400("a STEP_STARTED without step_index is refused", "POST", events, one("STEP_STARTED", map[string]any{"step_index": nil})),
		bad400("a STEP_COMPLETED without step_name is refused", "POST", events, one("STEP_COMPLETED", map[string]any{"step_name": nil})),
		bad400("a FIELD_SET without field_name is refused", "POST", events, one("FIELD_SET", map[string]any{"field_name": nil})),
		bad400("a FIELD_APPEND without codec_version is refused", "POST", events, one("FIELD_APPEND", map[string]any{"codec_version": nil})),
		bad400("a FIELD_SET without a value is refused", "POST", events, one("FIELD_SET", map[string]any{"value": nil})),
		bad400("a FAILED without error_type is refused", "POST", events, one("FAILED", map[string]any{"error_type": nil})),
		bad400("a TERMINAL with status running is refused", "POST", events, one("TERMINAL", map[string]any{"status": "running"})),
		bad400("an event_ts that is not RFC 3339 is refused", "POST", events, one("ITEM_CREATED", map[string]any{"event_ts": "next tuesday"})),
		bad400("an int value given as a string is refused", "POST", events, field(map[string]any{"kind": "int", "value": "1"})),
		bad400("an int value past int64 is refused", "POST", events, `{"events":[`+
			strings.Replace(dgEv("h-0", "h1", 0, "FIELD_SET", nil), `"value":0`, `"value":99999999999999999999999`, 1)+`]}`),
		bad400("a fractional int value is refused", "POST", events, field(map[string]any{"kind": "int", "value": 1.5})),
		bad400("a float value past float64 is refused", "POST", events, `{"events":[`+
			strings.Replace(dgEv("h-0", "h1", 0, "FIELD_SET", map[string]any{"value": map[string]any{"kind": "float", "value": 1}}), `"value":1`, `"value":1e400`, 1)+`]}`),
		bad400("a float value given as a string is refused", "POST", events, field(map[string]any{"kind": "float", "value": "NaN"})),
		bad400("a bool value given as 1 is refused", "POST", events, field(map[string]any{"kind": "bool", "value": 1})),
		bad400("a str value given as a number is refused", "POST", events, field(map[string]any{"kind": "str", "value": 5})),
		bad400("a json value without a value is refused", "POST", events, field(map[string]any{"kind": "json"})),
		bad400("an unknown value kind is refused", "POST", events, field(map[string]any{"kind": "decimal", "value": 1})),
		bad400("an int value carrying bytes is refused", "POST", events, field(map[string]any{"kind": "int", "value": 1, "bytes": "eHl6"})),
		bad400("a blob whose size does not match its bytes is refused", "POST", events, field(map[string]any{"kind": "blob", "bytes": "eHl6", "size": 4})),
		bad400("a blob without size is refused", "POST", events, field(map[string]any{"kind": "blob", "bytes": "eHl6"})),
		bad400("a blob without bytes is refused", "POST", events, field(map[string]any{"kind": "blob", "size": 0})),
		bad400("a blob carrying value instead of bytes is refused", "POST", events, field(map[string]any{"kind": "blob", "value": "xyz", "size": 3})),
		bad400("a blob with bad base64 is refused", "POST", events, field(map[string]any{"kind": "blob", "bytes": "not base64!", "size": 3})),

		// Append: identity rules, within the batch and against the store.
		bad400("an event_id reused with different content in one batch is refused", "POST", events, dgEvents(
			dgEv("h-0", "h1", 0, "ITEM_CREATED", nil), dgEv("h-0", "h1", 1, "STEP_STARTED", nil))),
		bad400("an event_id of the store reused with different content is refused", "POST", events,
			dgEvents(dgEv("seed-e0", "seed-1", 0, "ITEM_CREATED", map[string]any{"run_id": "run-2"}))),
		bad400("an event_id of the store reused at another item_seq is refused", "POST", events,
			dgEvents(dgEv("seed-e4", "seed-1", 9, "STEP_COMPLETED", nil))),
		bad400("two event ids at one (item_id, item_seq) in one batch are refused", "POST", events, dgEvents(
			dgEv("h-0", "h1", 0, "ITEM_CREATED", nil), dgEv("h-1", "h1", 0, "ITEM_CREATED", nil))),
		bad400("a new event_id at an (item_id, item_seq) the store has is refused", "POST", events,
			dgEvents(dgEv("h-0", "seed-1", 2, "FIELD_SET", nil))),
		bad400("a fresh event in a batch with a store conflict is refused, the whole batch", "POST", events, dgEvents(
			dgEv("h-0", "h1", 0, "ITEM_CREATED", nil), dgEv("h-1", "seed-1", 0, "ITEM_CREATED", nil))),

		// Append: checkpoint batches.
		named("a checkpoint without STEP_COMPLETED is refused", cp(dgEv("h-0", "h1", 0, "FIELD_SET", nil))),
		named("a checkpoint with two different STEP_COMPLETED is refused", cp(dgEv("h-0", "h1", 0, "STEP_COMPLETED", nil),
			dgEv("h-1", "h1", 1, "STEP_COMPLETED", nil))),
		named("a checkpoint holding an ITEM_CREATED is refused", cp(dgEv("h-0", "h1", 0, "ITEM_CREATED", nil),
			dgEv("h-1", "h1", 1, "STEP_COMPLETED", nil))),
		named("a checkpoint holding a FAILED is refused", cp(dgEv("h-0", "h1", 0, "FAILED", nil),
			dgEv("h-1", "h1", 1, "STEP_COMPLETED", nil))),
		named("a checkpoint spanning two items is refused", cp(dgEv("h-0", "h1", 0, "FIELD_SET", nil),
			dgEv("h-1", "h2", 1, "STEP_COMPLETED", map[string]any{"checkpoint_id": "c-h1"}))),
		named("a checkpoint spanning two attempts is refused", cp(dgEv("h-0", "h1", 0, "FIELD_SET", map[string]any{"attempt": 1}),
			dgEv("h-1", "h1", 1, "STEP_COMPLETED", nil))),
		named("a checkpoint spanning two checkpoint ids is refused", cp(dgEv("h-0", "h1", 0, "FIELD_SET", map[string]any{"checkpoint_id": "other"}),
			dgEv("h-1", "h1", 1, "STEP_COMPLETED", nil))),
		named("a checkpoint field event at another step is refused", cp(dgEv("h-0", "h1", 0, "FIELD_SET", map[string]any{"step_index": 1}),
			dgEv("h-1", "h1", 1, "STEP_COMPLETED", nil))),
		bad400("checkpoint=maybe is refused", "POST", events+"?checkpoint=maybe", one("ITEM_CREATED", nil)),
		bad400("an append with flush=true is refused", "POST", events+"?flush=true", one("ITEM_CREATED", nil)),

		// Reads.
		bad400("load_blobs=2 is refused", "GET", "/api/v1/datagen/{store}/items/seed-1?load_blobs=2", ""),
		bad400("an item id of 1024 bytes is refused", "GET", "/api/v1/datagen/{store}/items/"+strings.Repeat("%C3%A9", 512), ""),
		bad400("an item id with a C1 control character is refused", "GET", "/api/v1/datagen/{store}/items/a%C2%85b/events", ""),
		bad400("a root id with invalid UTF-8 is refused", "GET", "/api/v1/datagen/{store}/roots/%C0%AE%C0%AE/events", ""),
		bad400("root-status ids with a control character is refused", "GET", "/api/v1/datagen/{store}/root-status?ids=a,b%07c", ""),
		bad400("root-status ids given twice is refused", "GET", "/api/v1/datagen/{store}/root-status?ids=a&ids=b", ""),
		{Name: "datagen: root-status of 1025 ids is refused", Method: "GET", Path: "/api/v1/datagen/{store}/root-status?ids=@IDS@x",
			Fills: []fill{{"@IDS@", "x,", maxRootStatusIDs}}, WantStatus: 400, WantCode: api.CodeInvalidRequest},
		bad400("overview with a run filter is refused", "GET", "/api/v1/datagen/{store}/overview?run_id=run-1", ""),
		bad400("an event dump with a limit is refused", "GET", "/api/v1/datagen/{store}/items/seed-1/events?limit=1", ""),
		{Name: "datagen: the blob of an event without one is a 404", Method: "GET", Path: "/api/v1/datagen/{store}/blobs/seed-e2",
			WantStatus: 404, WantCode: api.CodeNotFound},
		{Name: "datagen: the blob of an unknown event is a 404", Method: "GET", Path: "/api/v1/datagen/{store}/blobs/nope",
			WantStatus: 404, WantCode: api.CodeNotFound},
		{Name: "datagen: the generic rows route on a datagen store is a 404", Method: "GET", Path: "/api/v1/datagen/{store}/rows",
			WantStatus: 404, WantCode: api.CodeNotFound},
		{Name: "datagen: a flush route is a 404", Method: "POST", Path: "/api/v1/datagen/{store}/flush",
			WantStatus: 404, WantCode: api.CodeNotFound},
		{Name: "datagen: the datagen store read as a generic store is a 404", Method: "GET", Path: "/api/v1/generic/{store}/events",
			WantStatus: 404, WantCode: api.CodeNotFound},
	}
}

// maxRootStatusIDs is the worker's limit on root-status ids.
const maxRootStatusIDs = 1024

// datagenOK are the datagen routes served with the right token (auth_test.go's
// okRequests), in an order that keeps each valid.
func datagenOK() []okRequest {
	evs := dgEvents(dgEv("a1-0", "a1", 0, "ITEM_CREATED", nil),
		dgEv("a1-1", "a1", 1, "FIELD_SET", map[string]any{"value": map[string]any{"kind": "blob", "bytes": "eHl6", "size": 3}}))
	return []okRequest{
		{method: "POST", path: "/api/v1/datagen", body: `{"name":"authz"}`, status: 201, worker: true},
		{method: "GET", path: "/api/v1/datagen", status: 200, worker: true},
		{method: "GET", path: "/api/v1/datagen/authz", status: 200, worker: true},
		{method: "POST", path: "/api/v1/datagen/authz/events", body: evs, status: 201, worker: true},
		{method: "GET", path: "/api/v1/datagen/authz/items/a1", status: 200, worker: true},
		{method: "GET", path: "/api/v1/datagen/authz/items/a1/failures", status: 200, worker: true},
		{method: "GET", path: "/api/v1/datagen/authz/items/a1/events", status: 200, worker: true},
		{method: "GET", path: "/api/v1/datagen/authz/overview", status: 200, worker: true},
		{method: "GET", path: "/api/v1/datagen/authz/root-status?ids=a1", status: 200, worker: true},
		{method: "GET", path: "/api/v1/datagen/authz/roots/a1/events", status: 200, worker: true},
		{method: "GET", path: "/api/v1/datagen/authz/blobs/a1-1", status: 200, worker: true},
		{method: "DELETE", path: "/api/v1/datagen/authz", status: 204, worker: true},
	}
}

// TestDatagenCorpusSize: the corpus holds at least 40 hand-written hostile requests
// for datagen stores, besides the generated families every datagen route gets, and
// every datagen route has an authorized request in the auth tests.
func TestDatagenCorpusSize(t *testing.T) {
	corpus, err := rollouttest.BadRequests()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range datagenCases(corpus.Limits) {
		if c.WantStatus < 400 || c.WantStatus >= 500 {
			t.Fatalf("%s: want %d, not a 4xx", c.Name, c.WantStatus)
		}
		n++
	}
	gen := 0
	for _, c := range generated() {
		if strings.Contains(c.Path, "/api/v1/datagen") {
			gen++
		}
	}
	t.Logf("%d hand-written and %d generated hostile requests aim at datagen stores", n, gen)
	if n < 40 {
		t.Fatalf("only %d hand-written hostile datagen requests; at least 40", n)
	}
	var routes []string
	for _, r := range api.Routes() {
		if strings.HasPrefix(r.Path, "/api/v1/datagen") {
			routes = append(routes, r.Method+" "+r.Path)
		}
	}
	if len(routes) == 0 {
		t.Fatal("api.Routes lists no datagen route")
	}
	for _, r := range datagenOK() {
		key := r.method + " " + strings.NewReplacer("/authz", "/{name}", "/items/a1", "/items/{item_id}",
			"/roots/a1", "/roots/{root_item_id}", "/blobs/a1-1", "/blobs/{event_id}").Replace(strings.Split(r.path, "?")[0])
		routes = slices.DeleteFunc(routes, func(s string) bool { return s == key })
	}
	if len(routes) != 0 {
		t.Fatalf("datagen routes without an authorized request: %v", routes)
	}
	covered := map[string]bool{}
	for _, r := range routesFor("/api/v1/datagen") {
		covered[r.method+" "+r.pattern] = true
	}
	for _, r := range api.Routes() {
		if strings.HasPrefix(r.Path, "/api/v1/datagen") && !covered[r.Method+" "+r.Path] {
			t.Errorf("%s %s is missing from the generated route families", r.Method, r.Path)
		}
	}
}

func routesFor(prefix string) []route {
	var out []route
	for _, r := range routes() {
		if strings.HasPrefix(r.pattern, prefix) {
			out = append(out, r)
		}
	}
	return out
}
