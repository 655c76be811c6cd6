package hostile

import (
	"encoding/base64"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/rollout/rollouttest"
)

// genericSchema is the seeded generic store's schema (the store is named like the
// rollout store: kinds have their own names).
const genericSchema = `{"columns":[{"name":"id","type":"string"},{"name":"text","type":"string"},` +
	`{"name":"n","type":"int64","nullable":false},{"name":"v","type":"fixed_size_list","item":"float32","size":3},` +
	`{"name":"img","type":"binary","blob":true},{"name":"meta","type":"json"},{"name":"at","type":"timestamp"},` +
	`{"name":"tags","type":"list","item":"string"}]}`

// seedGeneric gives the generic store base rows, a pending generation and unsealed
// rows, like seed does for the rollout store.
func (s *stack) seedGeneric() {
	s.t.Helper()
	s.must("POST", "/api/v1/generic", tokRW, `{"name":"`+store+`","schema":`+genericSchema+`}`, http.StatusCreated, nil)
	s.must("POST", "/api/v1/generic/"+store+"/rows?flush=true", tokRW,
		`{"rows":[{"id":"seed-1","text":"hello","n":1,"v":[1,2,3],"img":"eHl6","meta":{"a":1},"at":"2024-01-01T00:00:00Z","tags":["x"]},`+
			`{"id":"seed-2","n":2}]}`, http.StatusCreated, nil)
	s.must("POST", "/api/v1/generic/"+store+"/merge-wal", tokRW, "", http.StatusOK, nil)
	s.must("POST", "/api/v1/generic/"+store+"/rows?flush=true", tokRW, `{"rows":[{"id":"seed-3","n":3}]}`, http.StatusCreated, nil)
	s.must("POST", "/api/v1/generic/"+store+"/rows", tokRW, `{"rows":[{"id":"seed-4","n":4}]}`, http.StatusCreated, nil)
}

// genericCases are hostile requests aimed at the generic store routes: each must be
// refused with its 4xx and the envelope, writing nothing.
func genericCases(limits rollouttest.Limits) []hostileCase {
	const create = "/api/v1/generic"
	rows := "/api/v1/generic/{store}/rows"
	bad400 := func(name, method, path, body string) hostileCase {
		return hostileCase{Name: "generic: " + name, Method: method, Path: path, ContentType: api.ContentTypeJSON, Body: body,
			WantStatus: 400, WantCode: api.CodeInvalidRequest}
	}
	col := func(cols string) string {
		return `{"name":"fresh","schema":{"columns":[{"name":"id","type":"string"}` + cols + `]}}`
	}
	row := func(fields string) string { return `{"rows":[{"id":"h1","n":1` + fields + `}]}` }
	out := []hostileCase{
		// Create: the schema is checked before any I/O.
		{Name: "generic: a schema nested 100000 levels deep is refused", Method: "POST", Path: create, ContentType: api.ContentTypeJSON,
			Body: `{"name":"fresh","schema":@OPEN@@CLOSE@}`, Fills: []fill{{"@OPEN@", "[", 100000}, {"@CLOSE@", "]", 100000}},
			WantStatus: 400, WantCode: api.CodeInvalidRequest},
		bad400("a schema whose columns are an object is refused", "POST", create, `{"name":"fresh","schema":{"columns":{"id":"string"}}}`),
		bad400("a create without a schema is refused", "POST", create, `{"name":"fresh"}`),
		bad400("a schema without id is refused", "POST", create, `{"name":"fresh","schema":{"columns":[{"name":"x","type":"string"}]}}`),
		bad400("a nullable id is refused", "POST", create, `{"name":"fresh","schema":{"columns":[{"name":"id","type":"string","nullable":true}]}}`),
		bad400("an int64 id is refused", "POST", create, `{"name":"fresh","schema":{"columns":[{"name":"id","type":"int64"}]}}`),
		bad400("a large string id is refused", "POST", create, `{"name":"fresh","schema":{"columns":[{"name":"id","type":"string","large":true}]}}`),
		bad400("the reserved column _rowid is refused", "POST", create, col(`,{"name":"_rowid","type":"int64"}`)),
		bad400("a column name carrying SQL is refused", "POST", create, col(`,{"name":"a; DROP TABLE t","type":"int64"}`)),
		bad400("a column name walking out of the table is refused", "POST", create, col(`,{"name":"../x","type":"int64"}`)),
		bad400("a column name with a comma is refused", "POST", create, col(`,{"name":"a,b","type":"int64"}`)),
		bad400("a column declared twice is refused", "POST", create, col(`,{"name":"x","type":"int64"},{"name":"x","type":"int32"}`)),
		bad400("a column declared twice in another case is refused", "POST", create, col(`,{"name":"x","type":"int64"},{"name":"X","type":"int32"}`)),
		bad400("an unknown column type is refused", "POST", create, col(`,{"name":"x","type":"decimal(10,2)"}`)),
		bad400("a column type given as an object is refused", "POST", create, col(`,{"name":"x","type":{"String":{"large":true}}}`)),
		bad400("a fixed_size_list of size 0 is refused", "POST", create, col(`,{"name":"v","type":"fixed_size_list","size":0}`)),
		bad400("a fixed_size_list of a billion values is refused", "POST", create, col(`,{"name":"v","type":"fixed_size_list","size":1000000000}`)),
		bad400("a fixed_size_list of a negative size is refused", "POST", create, col(`,{"name":"v","type":"fixed_size_list","size":-3}`)),
		bad400("a fixed_size_list of int32 is refused", "POST", create, col(`,{"name":"v","type":"fixed_size_list","item":"int32","size":3}`)),
		bad400("a list of lists is refused", "POST", create, col(`,{"name":"l","type":"list","item":"list"}`)),
		bad400("blob on a string column is refused", "POST", create, col(`,{"name":"b","type":"string","blob":true}`)),
		bad400("an unknown key in a column is refused", "POST", create, col(`,{"name":"x","type":"int64","default":0}`)),
		{Name: "generic: 1025 columns are refused", Method: "POST", Path: create, ContentType: api.ContentTypeJSON,
			Body:  `{"name":"fresh","schema":{"columns":[{"name":"id","type":"string"}@COLS@]}}`,
			Fills: []fill{{"@COLS@", `,{"name":"c","type":"int64"}`, 1025}}, WantStatus: 400, WantCode: api.CodeInvalidRequest},
		bad400("storage_options are refused", "POST", create, `{"name":"fresh","schema":{"columns":[{"name":"id","type":"string"}]},"storage_options":{"aws_access_key_id":"x"}}`),
		bad400("seal_on_add as a string is refused", "POST", create, `{"name":"fresh","schema":{"columns":[{"name":"id","type":"string"}]},"seal_on_add":"yes"}`),
		bad400("an unknown key in the create body is refused", "POST", create, `{"name":"fresh","schema":{"columns":[{"name":"id","type":"string"}]},"mode":"overwrite"}`),
		bad400("creating a store named _stats is refused", "POST", create, `{"name":"_stats","schema":{"columns":[{"name":"id","type":"string"}]}}`),
		{Name: "generic: re-creating the seeded store with another schema is a 409", Method: "POST", Path: create, ContentType: api.ContentTypeJSON,
			Body: `{"name":"{store}","schema":{"columns":[{"name":"id","type":"string"}]}}`, WantStatus: 409, WantCode: api.CodeAlreadyExists},
		{Name: "generic: a create sent as text/plain is a 415", Method: "POST", Path: create, ContentType: "text/plain",
			Body: `{"name":"fresh","schema":{"columns":[{"name":"id","type":"string"}]}}`, WantStatus: 415, WantCode: api.CodeUnsupportedMediaType},

		// Append: decoded against the store's schema before the WAL sees anything.
		bad400("an undeclared column is refused", "POST", rows, row(`,"secret":1`)),
		bad400("a row without its non-nullable column is refused", "POST", rows, `{"rows":[{"id":"h1"}]}`),
		bad400("a null id is refused", "POST", rows, `{"rows":[{"id":null,"n":1}]}`),
		bad400("an empty id is refused", "POST", rows, `{"rows":[{"id":"","n":1}]}`),
		bad400("an id with a control character is refused", "POST", rows, `{"rows":[{"id":"a\u0007b","n":1}]}`),
		{Name: "generic: an id of 1000 bytes is refused", Method: "POST", Path: rows, ContentType: api.ContentTypeJSON,
			Body: `{"rows":[{"id":"@ID@","n":1}]}`, Fills: []fill{{"@ID@", "i", 1000}}, WantStatus: 400, WantCode: api.CodeInvalidRequest},
		bad400("an int64 given as a string is refused", "POST", rows, `{"rows":[{"id":"h1","n":"1"}]}`),
		bad400("an int64 past its range is refused", "POST", rows, `{"rows":[{"id":"h1","n":99999999999999999999999}]}`),
		bad400("a fraction for an int64 is refused", "POST", rows, `{"rows":[{"id":"h1","n":1.5}]}`),
		bad400("a vector of the wrong length is refused", "POST", rows, row(`,"v":[1,2]`)),
		bad400("a vector holding a string is refused", "POST", rows, row(`,"v":[1,"2",3]`)),
		bad400("a vector holding a null is refused", "POST", rows, row(`,"v":[1,null,3]`)),
		bad400("a vector value past float32 is refused", "POST", rows, row(`,"v":[1,2,1e40]`)),
		bad400("bad base64 in a blob is refused", "POST", rows, row(`,"img":"not base64!"`)),
		bad400("a byte of 256 is refused", "POST", rows, row(`,"img":[1,256]`)),
		{Name: "generic: a json value nested 10000 levels deep is refused", Method: "POST", Path: rows, ContentType: api.ContentTypeJSON,
			Body: row(`,"meta":@OPEN@@CLOSE@`), Fills: []fill{{"@OPEN@", "[", 10000}, {"@CLOSE@", "]", 10000}},
			WantStatus: 400, WantCode: api.CodeInvalidRequest},
		bad400("a json value with duplicate keys is refused", "POST", rows, row(`,"meta":{"a":1,"a":2}`)),
		bad400("a timestamp that is not RFC 3339 is refused", "POST", rows, row(`,"at":"next tuesday"`)),
		bad400("a timestamp finer than a microsecond is refused", "POST", rows, row(`,"at":"2024-01-01T00:00:00.123456789Z"`)),
		bad400("a list item of the wrong type is refused", "POST", rows, row(`,"tags":[1]`)),
		bad400("an empty rows array is refused", "POST", rows, `{"rows":[]}`),
		bad400("rows given as an object is refused", "POST", rows, `{"rows":{"id":"h1","n":1}}`),
		bad400("the rollout body shape is refused", "POST", rows, `{"records":[{"id":"h1","n":1}]}`),
		bad400("a row that is an array is refused", "POST", rows, `{"rows":[["h1",1]]}`),
		bad400("a column given twice in a row is refused", "POST", rows, row(`,"text":"a","text":"b"`)),
		bad400("a lone surrogate is refused", "POST", rows, row(`,"text":"\ud800"`)),
		bad400("data after the body is refused", "POST", rows, row(``)+`{"rows":[]}`),
		bad400("a truncated body is refused", "POST", rows, `{"rows":[{"id":"h1","n":1`),
		{Name: "generic: invalid UTF-8 in a string is refused", Method: "POST", Path: rows, ContentType: api.ContentTypeJSON,
			BodyBase64: base64.StdEncoding.EncodeToString([]byte("{\"rows\":[{\"id\":\"h1\",\"n\":1,\"text\":\"\xc0\xaf\"}]}")),
			WantStatus: 400, WantCode: api.CodeInvalidRequest},
		{Name: "generic: a body over the limit is a 413", Method: "POST", Path: rows, ContentType: api.ContentTypeJSON,
			Body: row(`,"text":"@BIG@"`), Fills: []fill{{"@BIG@", "x", int(limits.MaxBodyBytes)}}, WantStatus: 413, WantCode: api.CodePayloadTooLarge},
		{Name: "generic: more rows than one append takes is a 413", Method: "POST", Path: rows, ContentType: api.ContentTypeJSON,
			Body: `{"rows":[@ROWS@{"id":"h","n":1}]}`, Fills: []fill{{"@ROWS@", `{"id":"h","n":1},`, limits.MaxRecords}},
			WantStatus: 413, WantCode: api.CodePayloadTooLarge},
		{Name: "generic: an append sent as multipart is a 415", Method: "POST", Path: rows, ContentType: "multipart/form-data; boundary=x",
			Body: "--x\r\nContent-Disposition: form-data; name=\"metadata\"\r\n\r\n" + row(``) + "\r\n--x--\r\n", WantStatus: 415, WantCode: api.CodeUnsupportedMediaType},
		bad400("flush=maybe is refused", "POST", rows+"?flush=maybe", row(``)),

		// Reads.
		bad400("a list filter carrying a second statement is refused", "GET", rows+"?filter=n%20%3D%201%3B%20DROP%20TABLE%20x", ""),
		bad400("a list filter on an unknown column is refused", "GET", rows+"?filter=secret%20%3D%201", ""),
		bad400("a list filter comparing text with a number is refused", "GET", rows+"?filter=text%20%3D%201", ""),
		bad400("the rollout filters object on a generic list is refused", "GET", rows+"?filters=%7B%7D", ""),
		bad400("a list limit of 0 is refused", "GET", rows+"?limit=0", ""),
		bad400("a negative list offset is refused", "GET", rows+"?offset=-1", ""),
		bad400("a get of an unknown column is refused", "GET", rows+"/seed-1?columns=secret", ""),
		bad400("a get of _rowid is refused", "GET", rows+"/seed-1?columns=_rowid", ""),
		bad400("a get with empty columns is refused", "GET", rows+"/seed-1?columns=", ""),
		bad400("a get naming a column twice is refused", "GET", rows+"/seed-1?columns=n,n", ""),
		{Name: "generic: a get of a row the store does not have is a 404", Method: "GET", Path: rows + "/nope", WantStatus: 404, WantCode: api.CodeNotFound},
		bad400("a batch get of no ids is refused", "POST", "/api/v1/generic/{store}/batch-get", `{"ids":[]}`),
		{Name: "generic: a batch get of 1025 ids is refused", Method: "POST", Path: "/api/v1/generic/{store}/batch-get", ContentType: api.ContentTypeJSON,
			Body: `{"ids":[@IDS@"x"]}`, Fills: []fill{{"@IDS@", `"x",`, api.MaxBatchGetIDs}}, WantStatus: 400, WantCode: api.CodeInvalidRequest},
		bad400("a batch get of numbers is refused", "POST", "/api/v1/generic/{store}/batch-get", `{"ids":[1,2]}`),
		bad400("a batch get of an id with a control character is refused", "POST", "/api/v1/generic/{store}/batch-get", `{"ids":["a\u0000"]}`),
		bad400("a batch get of an unknown column is refused", "POST", "/api/v1/generic/{store}/batch-get", `{"ids":["seed-1"],"columns":["secret"]}`),
		bad400("a batch get of empty columns is refused", "POST", "/api/v1/generic/{store}/batch-get", `{"ids":["seed-1"],"columns":[]}`),
		bad400("a batch get with an unknown key is refused", "POST", "/api/v1/generic/{store}/batch-get", `{"ids":["seed-1"],"where":"1=1"}`),
		bad400("merge-wal?flush=2 is refused", "POST", "/api/v1/generic/{store}/merge-wal?flush=2", ""),
		bad400("flush with a query parameter is refused", "POST", "/api/v1/generic/{store}/flush?now=1", ""),
	}
	return out
}

// genericOK are the generic routes served with the right token (auth_test.go's
// okRequests), in an order that keeps each valid.
func genericOK() []okRequest {
	return []okRequest{
		{method: "POST", path: "/api/v1/generic", body: `{"name":"authz","schema":{"columns":[{"name":"id","type":"string"},{"name":"b","type":"binary","blob":true}]}}`, status: 201, worker: true},
		{method: "GET", path: "/api/v1/generic", status: 200, worker: true},
		{method: "GET", path: "/api/v1/generic/authz", status: 200, worker: true},
		{method: "POST", path: "/api/v1/generic/authz/rows?flush=true", body: `{"rows":[{"id":"a1","b":"eHl6"}]}`, status: 201, worker: true},
		{method: "GET", path: "/api/v1/generic/authz/rows", status: 200, worker: true},
		{method: "GET", path: "/api/v1/generic/authz/rows/a1", status: 200, worker: true},
		{method: "POST", path: "/api/v1/generic/authz/batch-get", body: `{"ids":["a1"]}`, status: 200, worker: true},
		{method: "POST", path: "/api/v1/generic/authz/flush", status: 204, worker: true},
		{method: "POST", path: "/api/v1/generic/authz/merge-wal", status: 200, worker: true},
		{method: "DELETE", path: "/api/v1/generic/authz", status: 204, worker: true},
	}
}

// TestGenericCorpusSize: the corpus holds at least 40 hand-written hostile requests
// for generic stores, besides the generated families every generic route gets.
func TestGenericCorpusSize(t *testing.T) {
	corpus, err := rollouttest.BadRequests()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range genericCases(corpus.Limits) {
		if c.WantStatus < 400 || c.WantStatus >= 500 {
			t.Fatalf("%s: want %d, not a 4xx", c.Name, c.WantStatus)
		}
		n++
	}
	gen := 0
	for _, c := range generated() {
		if strings.Contains(c.Path, "/api/v1/generic") {
			gen++
		}
	}
	t.Logf("%d hand-written and %d generated hostile requests aim at generic stores", n, gen)
	if n < 40 {
		t.Fatalf("only %d hand-written hostile generic requests; at least 40", n)
	}
	var routes []string
	for _, r := range api.Routes() {
		if strings.HasPrefix(r.Path, "/api/v1/generic") {
			routes = append(routes, r.Method+" "+r.Path)
		}
	}
	for _, r := range genericOK() {
		key := r.method + " " + strings.NewReplacer("/authz", "/{name}", "/rows/a1", "/rows/{id}").Replace(strings.Split(r.path, "?")[0])
		routes = slices.DeleteFunc(routes, func(s string) bool { return s == key })
	}
	if len(routes) != 0 {
		t.Fatalf("generic routes without an authorized request: %v", routes)
	}
}
