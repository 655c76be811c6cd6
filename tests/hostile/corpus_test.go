package hostile

import (
	"bufio"
	"bytes"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/rollout/rollouttest"
)

//go:embed testdata/corpus.json
var corpusJSON []byte

// corpusFile is testdata/corpus.json.
type corpusFile struct {
	Description string        `json:"description"`
	Cases       []hostileCase `json:"cases"`
}

// hostileCase is one request of the corpus and the answer it must get.
type hostileCase struct {
	// Name is a sentence saying what is refused; unique in the corpus.
	Name   string `json:"name"`
	Method string `json:"method"`
	// Path is the request target as sent (percent-encoded, query included); {store}
	// is the seeded store, {task} the seeded task's id.
	Path string `json:"path"`
	// Auth is the credential: "rw" (the read-write token; the default on public
	// routes), "read", "write", "internal" (the default on /api/v1/internal/*),
	// "none", "wrong", or "header:<value>" for a literal Authorization header.
	Auth        string            `json:"auth,omitempty"`
	ContentType string            `json:"content_type,omitempty"`
	Headers     map[string]string `json:"headers,omitempty"`
	// Body is the body as text; BodyBase64 holds bytes that are not UTF-8.
	Body       string `json:"body,omitempty"`
	BodyBase64 string `json:"body_base64,omitempty"`
	// Fills replace markers in the path, the body and the raw request with repeated
	// text, so that huge and deeply nested input need not be stored.
	Fills []fill `json:"fills,omitempty"`
	// Chunked sends the body without a Content-Length.
	Chunked bool `json:"chunked,omitempty"`
	// Raw, when set, is the whole request as written on the connection (CRLFs
	// included; {auth} is the Authorization header line of Auth), for what an HTTP
	// client cannot send.
	Raw string `json:"raw,omitempty"`

	WantStatus int    `json:"want_status"`
	WantCode   string `json:"want_code,omitempty"`
	// NoEnvelope: net/http itself refuses the request before any handler (a plain
	// text answer).
	NoEnvelope bool `json:"no_envelope,omitempty"`
	// WantCount, for an inert case (a request that is well-formed and must be answered
	// as data, such as a filter value full of SQL), is the size the answer must have.
	WantCount *count `json:"want_count,omitempty"`
}

type fill struct {
	Marker string `json:"marker"`
	Text   string `json:"text"`
	Count  int    `json:"count"`
}

// count checks an answer's size: the length of an array field or a number field.
type count struct {
	Field string `json:"field"`
	N     int    `json:"n"`
}

func (c *hostileCase) expand(s string, st *stack) string {
	s = strings.ReplaceAll(s, "{store}", store)
	s = strings.ReplaceAll(s, "{task}", st.taskID)
	for _, f := range c.Fills {
		s = strings.ReplaceAll(s, f.Marker, strings.Repeat(f.Text, f.Count))
	}
	return s
}

func (c *hostileCase) token() (string, bool) {
	a := c.Auth
	if a == "" {
		a = "rw"
		if strings.HasPrefix(c.Path, "/api/v1/internal/") {
			a = "internal"
		}
	}
	switch a {
	case "rw":
		return "Bearer " + tokRW, true
	case "read":
		return "Bearer " + tokRead, true
	case "write":
		return "Bearer " + tokWrite, true
	case "internal":
		return "Bearer " + tokInternal, true
	case "wrong":
		return "Bearer " + tokWrong, true
	case "none":
		return "", false
	}
	if v, ok := strings.CutPrefix(a, "header:"); ok {
		return v, true
	}
	panic("corpus: unknown auth " + a)
}

func (c *hostileCase) body(st *stack) ([]byte, error) {
	if c.BodyBase64 != "" {
		b, err := base64.StdEncoding.DecodeString(c.BodyBase64)
		if err != nil {
			return nil, err
		}
		return []byte(c.expand(string(b), st)), nil
	}
	if c.Body == "" {
		return nil, nil
	}
	return []byte(c.expand(c.Body, st)), nil
}

// answer is what came back.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// send performs the request: through an HTTP client, or written raw on a connection.
func (c *hostileCase) send(t *testing.T, st *stack) answer {
	t.Helper()
	authz, hasAuth := c.token()
	if c.Raw != "" {
		line := ""
		if hasAuth {
			line = "Authorization: " + authz + "\r\n"
		}
		raw := strings.ReplaceAll(c.expand(c.Raw, st), "{auth}", line)
		return sendRaw(t, st, []byte(raw))
	}
	b, err := c.body(st)
	if err != nil {
		t.Fatal(err)
	}
	var rd io.Reader
	if b != nil {
		rd = bytes.NewReader(b)
		if c.Chunked {
			rd = io.MultiReader(rd) // hides the length: sent chunked
		}
	}
	req, err := http.NewRequestWithContext(t.Context(), c.Method, st.url+c.expand(c.Path, st), rd)
	if err != nil {
		t.Fatal(err)
	}
	if hasAuth {
		req.Header.Set("Authorization", authz)
	}
	if c.ContentType != "" {
		req.Header.Set("Content-Type", c.expand(c.ContentType, st))
	}
	for k, v := range c.Headers {
		req.Header.Set(k, c.expand(v, st))
	}
	client := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse // a redirect is an answer, not something to follow
	}}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", c.Method, truncate(c.Path, 120), err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, body}
}

func sendRaw(t *testing.T, st *stack, raw []byte) answer {
	t.Helper()
	conn, err := net.Dial("tcp", st.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	// The server may answer and close before reading everything (a header over its
	// limit): a failed write is not the test's concern, the answer is.
	go func() { _, _ = conn.Write(raw) }()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("raw request: no HTTP answer: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, body}
}

// check asserts the answer: the status, no 5xx, the envelope (or the inert count).
func (c *hostileCase) check(t *testing.T, a answer) {
	t.Helper()
	if a.status >= 500 {
		t.Fatalf("%d: a hostile request must never cause a 5xx: %s", a.status, truncate(string(a.body), 300))
	}
	if a.status != c.WantStatus {
		t.Fatalf("status %d, want %d: %s", a.status, c.WantStatus, truncate(string(a.body), 300))
	}
	if c.WantCount != nil {
		var doc map[string]json.RawMessage
		if err := json.Unmarshal(a.body, &doc); err != nil {
			t.Fatalf("inert answer is not JSON: %v: %s", err, truncate(string(a.body), 300))
		}
		raw, ok := doc[c.WantCount.Field]
		if !ok {
			t.Fatalf("inert answer has no %q: %s", c.WantCount.Field, truncate(string(a.body), 300))
		}
		var n int
		var arr []json.RawMessage
		if err := json.Unmarshal(raw, &arr); err == nil {
			n = len(arr)
		} else if err := json.Unmarshal(raw, &n); err != nil {
			t.Fatalf("%s is neither an array nor a number: %s", c.WantCount.Field, raw)
		}
		if n != c.WantCount.N {
			t.Fatalf("%s = %d, want %d: %s", c.WantCount.Field, n, c.WantCount.N, truncate(string(a.body), 300))
		}
		return
	}
	if c.NoEnvelope || c.Method == http.MethodHead || strings.HasPrefix(c.Raw, "HEAD ") {
		return
	}
	if ct := a.header.Get("Content-Type"); ct != api.ContentTypeJSON {
		t.Fatalf("Content-Type %q, want %s: %s", ct, api.ContentTypeJSON, truncate(string(a.body), 300))
	}
	var env api.ErrorResponse
	dec := json.NewDecoder(bytes.NewReader(a.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&env); err != nil || env.Error.Message == "" {
		t.Fatalf("not the error envelope (%v): %s", err, truncate(string(a.body), 300))
	}
	if c.WantCode != "" && env.Error.Code != c.WantCode {
		t.Fatalf("code %s, want %s: %s", env.Error.Code, c.WantCode, env.Error.Message)
	}
	if a.status == http.StatusUnauthorized && !strings.HasPrefix(a.header.Get("WWW-Authenticate"), "Bearer") {
		t.Fatalf("401 without a Bearer challenge")
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// loadCorpus gathers every case: the file, the rollout package's bad append requests
// (run with the rw token against the seeded store) and the generated families.
func loadCorpus(t *testing.T) []hostileCase {
	t.Helper()
	var f corpusFile
	dec := json.NewDecoder(bytes.NewReader(corpusJSON))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		t.Fatalf("testdata/corpus.json: %v", err)
	}
	cases := f.Cases
	rc, err := rollouttest.BadRequests()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rc.Cases {
		b, err := c.BodyBytes()
		if err != nil {
			t.Fatal(err)
		}
		hc := hostileCase{Name: "rollouttest: " + c.Name, Method: c.Method, Path: c.Path, ContentType: c.ContentType,
			WantStatus: c.WantStatus, WantCode: c.WantCode}
		if c.HasBody() {
			hc.BodyBase64 = base64.StdEncoding.EncodeToString(b)
		}
		cases = append(cases, hc)
	}
	cases = append(cases, genericCases(rc.Limits)...)
	cases = append(cases, datagenCases(rc.Limits)...)
	cases = append(cases, contextCases(rc.Limits)...)
	cases = append(cases, generated()...)
	seen := map[string]bool{}
	for _, c := range cases {
		if seen[c.Name] {
			t.Fatalf("case name %q is used twice", c.Name)
		}
		seen[c.Name] = true
	}
	return cases
}

// route is one route of the stack, with a target that reaches it for the seeded
// store (and task), and what an otherwise fine request with that method answers.
type route struct {
	method, pattern, target string
	// name and id say where {name} and {id} sit in target, for the hostile-name and
	// hostile-id families.
	hasName, hasID, hasTaskID bool
}

// routes is every route of the worker and the master (as `lancectx serve` serves them).
func routes() []route {
	return []route{
		{"POST", "/api/v1/rollouts", "/api/v1/rollouts", false, false, false},
		{"GET", "/api/v1/rollouts", "/api/v1/rollouts", false, false, false},
		{"GET", "/api/v1/rollouts/{name}", "/api/v1/rollouts/{name}", true, false, false},
		{"DELETE", "/api/v1/rollouts/{name}", "/api/v1/rollouts/{name}", true, false, false},
		{"POST", "/api/v1/rollouts/{name}/records", "/api/v1/rollouts/{name}/records", true, false, false},
		{"GET", "/api/v1/rollouts/{name}/records", "/api/v1/rollouts/{name}/records", true, false, false},
		{"GET", "/api/v1/rollouts/{name}/records/{id}", "/api/v1/rollouts/{name}/records/{id}", true, true, false},
		{"GET", "/api/v1/rollouts/{name}/records/{id}/blob", "/api/v1/rollouts/{name}/records/{id}/blob", true, true, false},
		{"GET", "/api/v1/rollouts/{name}/arrow", "/api/v1/rollouts/{name}/arrow", true, false, false},
		{"POST", "/api/v1/internal/merge-wal/{name}", "/api/v1/internal/merge-wal/{name}", true, false, false},
		{"POST", "/api/v1/generic", "/api/v1/generic", false, false, false},
		{"GET", "/api/v1/generic", "/api/v1/generic", false, false, false},
		{"GET", "/api/v1/generic/{name}", "/api/v1/generic/{name}", true, false, false},
		{"DELETE", "/api/v1/generic/{name}", "/api/v1/generic/{name}", true, false, false},
		{"POST", "/api/v1/generic/{name}/rows", "/api/v1/generic/{name}/rows", true, false, false},
		{"GET", "/api/v1/generic/{name}/rows", "/api/v1/generic/{name}/rows", true, false, false},
		{"GET", "/api/v1/generic/{name}/rows/{id}", "/api/v1/generic/{name}/rows/{id}", true, true, false},
		{"POST", "/api/v1/generic/{name}/batch-get", "/api/v1/generic/{name}/batch-get", true, false, false},
		{"POST", "/api/v1/generic/{name}/flush", "/api/v1/generic/{name}/flush", true, false, false},
		{"POST", "/api/v1/generic/{name}/merge-wal", "/api/v1/generic/{name}/merge-wal", true, false, false},
		// Datagen ids sit in the targets as the seeded item and blob event: an item
		// the store lacks is {"item": null} and an empty list, not a 4xx.
		{"POST", "/api/v1/datagen", "/api/v1/datagen", false, false, false},
		{"GET", "/api/v1/datagen", "/api/v1/datagen", false, false, false},
		{"GET", "/api/v1/datagen/{name}", "/api/v1/datagen/{name}", true, false, false},
		{"DELETE", "/api/v1/datagen/{name}", "/api/v1/datagen/{name}", true, false, false},
		{"POST", "/api/v1/datagen/{name}/events", "/api/v1/datagen/{name}/events", true, false, false},
		{"GET", "/api/v1/datagen/{name}/items/{item_id}", "/api/v1/datagen/{name}/items/seed-1", true, false, false},
		{"GET", "/api/v1/datagen/{name}/items/{item_id}/failures", "/api/v1/datagen/{name}/items/seed-1/failures", true, false, false},
		{"GET", "/api/v1/datagen/{name}/items/{item_id}/events", "/api/v1/datagen/{name}/items/seed-1/events", true, false, false},
		{"GET", "/api/v1/datagen/{name}/overview", "/api/v1/datagen/{name}/overview", true, false, false},
		{"GET", "/api/v1/datagen/{name}/root-status", "/api/v1/datagen/{name}/root-status", true, false, false},
		{"GET", "/api/v1/datagen/{name}/roots/{root_item_id}/events", "/api/v1/datagen/{name}/roots/seed-1/events", true, false, false},
		{"GET", "/api/v1/datagen/{name}/blobs/{event_id}", "/api/v1/datagen/{name}/blobs/seed-e3", true, false, false},
		// Context ids sit in the targets as the seeded record where a missing record
		// is not a null answer (payload, delete); queries carry the required parameter.
		{"POST", "/api/v1/contexts", "/api/v1/contexts", false, false, false},
		{"GET", "/api/v1/contexts", "/api/v1/contexts", false, false, false},
		{"GET", "/api/v1/contexts/{name}", "/api/v1/contexts/{name}", true, false, false},
		{"DELETE", "/api/v1/contexts/{name}", "/api/v1/contexts/{name}", true, false, false},
		{"POST", "/api/v1/contexts/{name}/records", "/api/v1/contexts/{name}/records", true, false, false},
		{"PUT", "/api/v1/contexts/{name}/records", "/api/v1/contexts/{name}/records", true, false, false},
		{"PUT", "/api/v1/contexts/{name}/records/batch", "/api/v1/contexts/{name}/records/batch", true, false, false},
		{"PATCH", "/api/v1/contexts/{name}/records", "/api/v1/contexts/{name}/records", true, false, false},
		{"GET", "/api/v1/contexts/{name}/records", "/api/v1/contexts/{name}/records", true, false, false},
		{"DELETE", "/api/v1/contexts/{name}/records", "/api/v1/contexts/{name}/records?external_id=nope", true, false, false},
		{"GET", "/api/v1/contexts/{name}/records/by-external-id", "/api/v1/contexts/{name}/records/by-external-id?external_id=ext-1", true, false, false},
		{"GET", "/api/v1/contexts/{name}/records/related", "/api/v1/contexts/{name}/records/related?target_id=seed-1", true, false, false},
		{"GET", "/api/v1/contexts/{name}/records/{id}", "/api/v1/contexts/{name}/records/{id}", true, true, false},
		{"DELETE", "/api/v1/contexts/{name}/records/{id}", "/api/v1/contexts/{name}/records/nope", true, false, false},
		{"GET", "/api/v1/contexts/{name}/records/{id}/payload", "/api/v1/contexts/{name}/records/seed-1/payload", true, false, false},
		{"POST", "/api/v1/contexts/{name}/search", "/api/v1/contexts/{name}/search", true, false, false},
		{"POST", "/api/v1/contexts/{name}/retrieve", "/api/v1/contexts/{name}/retrieve", true, false, false},
		{"GET", "/api/v1/contexts/{name}/version", "/api/v1/contexts/{name}/version", true, false, false},
		{"POST", "/api/v1/contexts/{name}/checkout", "/api/v1/contexts/{name}/checkout", true, false, false},
		{"POST", "/api/v1/contexts/{name}/compact", "/api/v1/contexts/{name}/compact", true, false, false},
		{"GET", "/api/v1/contexts/{name}/compact/stats", "/api/v1/contexts/{name}/compact/stats", true, false, false},
		{"GET", "/api/v1/health", "/api/v1/health", false, false, false},
		{"GET", "/api/v1/openapi.json", "/api/v1/openapi.json", false, false, false},
		{"GET", "/metrics", "/metrics", false, false, false},
		{"GET", "/api/v1/experiments", "/api/v1/experiments", false, false, false},
		{"GET", "/api/v1/experiments/{name}", "/api/v1/experiments/{name}", true, false, false},
		{"POST", "/api/v1/experiments/{name}/rescan", "/api/v1/experiments/{name}/rescan", true, false, false},
		{"POST", "/api/v1/experiments/{name}/optimize", "/api/v1/experiments/{name}/optimize", true, false, false},
		{"GET", "/api/v1/tasks", "/api/v1/tasks", false, false, false},
		{"POST", "/api/v1/tasks", "/api/v1/tasks", false, false, false},
		{"GET", "/api/v1/tasks/{id}", "/api/v1/tasks/{id}", false, false, true},
		{"GET", "/api/v1/cluster", "/api/v1/cluster", false, false, false},
	}
}

func (r route) fill(name, id string) string {
	p := strings.ReplaceAll(r.target, "{name}", name)
	if r.hasTaskID {
		return strings.ReplaceAll(p, "{id}", id)
	}
	return strings.ReplaceAll(p, "{id}", id)
}

func (r route) internal() bool { return strings.HasPrefix(r.pattern, "/api/v1/internal/") }

// read: the route needs the read scope (GET, and the generic batch get's POST).
func (r route) read() bool {
	return r.method == "GET" || strings.HasSuffix(r.pattern, "/batch-get") ||
		(strings.HasPrefix(r.pattern, "/api/v1/contexts/") && (strings.HasSuffix(r.pattern, "/search") || strings.HasSuffix(r.pattern, "/retrieve")))
}
func (r route) probe() bool { return r.pattern == "/api/v1/health" || r.pattern == "/metrics" }

// generated crosses every route with the hostile families: methods it does not take,
// credentials that must not open it, hostile names and ids.
func generated() []hostileCase {
	var out []hostileCase
	methods := map[string][]string{}
	for _, r := range routes() {
		methods[r.pattern] = append(methods[r.pattern], r.method)
	}
	done := map[string]bool{}
	for _, r := range routes() {
		target := r.fill(store, "seed-1")
		if r.hasTaskID {
			target = r.fill(store, "{task}")
		}
		auth := ""
		if r.internal() {
			auth = "internal"
		}
		// Methods the path does not take: 405 with the envelope (HEAD answers without a body).
		if !done[r.pattern] {
			done[r.pattern] = true
			for _, m := range []string{"TRACE", "OPTIONS", "PUT", "PATCH", "HEAD", "DELETE", "POST", "BREW"} {
				if slices.Contains(methods[r.pattern], m) || (m == "HEAD" && slices.Contains(methods[r.pattern], "GET")) {
					continue
				}
				out = append(out, hostileCase{Name: fmt.Sprintf("%s on %s is not allowed", m, r.pattern), Method: m,
					Path: target, Auth: auth, WantStatus: 405, WantCode: api.CodeInvalidRequest})
			}
		}
		if r.pattern == "/api/v1/health" {
			out = append(out, hostileCase{Name: "GET /api/v1/health with an unknown query parameter is a 400", Method: "GET",
				Path: target + "?verbose=1", WantStatus: 400, WantCode: api.CodeInvalidRequest})
		}
		if r.probe() {
			continue // open: no credential family
		}
		// Credentials.
		what := r.method + " " + r.pattern
		out = append(out,
			hostileCase{Name: what + " without a token is a 401", Method: r.method, Path: target, Auth: "none",
				WantStatus: 401, WantCode: api.CodeUnauthorized},
			hostileCase{Name: what + " with a wrong token is a 401", Method: r.method, Path: target, Auth: "wrong",
				WantStatus: 401, WantCode: api.CodeUnauthorized},
			hostileCase{Name: what + " with Basic credentials is a 401", Method: r.method, Path: target,
				Auth: "header:Basic " + base64.StdEncoding.EncodeToString([]byte("admin:"+tokRW)), WantStatus: 401, WantCode: api.CodeUnauthorized},
			hostileCase{Name: what + " with the token in the query string is a 401", Method: r.method,
				Path: target + "?access_token=" + url.QueryEscape(tokRW), Auth: "none", WantStatus: 401, WantCode: api.CodeUnauthorized},
		)
		switch {
		case r.internal():
			out = append(out,
				hostileCase{Name: what + " with the read-write token is a 403", Method: r.method, Path: target, Auth: "rw",
					WantStatus: 403, WantCode: api.CodeForbidden},
				hostileCase{Name: what + " spelled with an escaped letter and the read-write token is a 403", Method: r.method,
					Path: strings.Replace(target, "internal", "%69nternal", 1), Auth: "rw", WantStatus: 403, WantCode: api.CodeForbidden})
		case r.read():
			out = append(out,
				hostileCase{Name: what + " with the write-only token is a 403", Method: r.method, Path: target, Auth: "write",
					WantStatus: 403, WantCode: api.CodeForbidden},
				hostileCase{Name: what + " with the internal token is a 403", Method: r.method, Path: target, Auth: "internal",
					WantStatus: 403, WantCode: api.CodeForbidden})
		default:
			out = append(out,
				hostileCase{Name: what + " with the read-only token is a 403", Method: r.method, Path: target, Auth: "read",
					WantStatus: 403, WantCode: api.CodeForbidden},
				hostileCase{Name: what + " with the internal token is a 403", Method: r.method, Path: target, Auth: "internal",
					WantStatus: 403, WantCode: api.CodeForbidden})
		}
		// A query parameter the route does not take: refused, never ignored.
		withQuery := target + "?bogus=1"
		if strings.Contains(target, "?") {
			withQuery = target + "&bogus=1"
		}
		out = append(out, hostileCase{Name: what + " with an unknown query parameter is a 400", Method: r.method,
			Path: withQuery, Auth: auth, WantStatus: 400, WantCode: api.CodeInvalidRequest})
		// A dot segment in front of the route: refused, never redirected.
		out = append(out, hostileCase{Name: what + " behind a dot segment is a 400", Method: r.method,
			Path: strings.Replace(target, "/api/v1/", "/api/v1/x/../", 1), Auth: auth, WantStatus: 400, WantCode: api.CodeInvalidRequest})
		if r.hasName {
			for _, n := range []struct{ label, esc string }{
				{"an escaped ..", "%2e%2e"},
				{"an escaped ../../etc", "..%2f..%2fetc"},
				{"an escaped NUL", "demo%00"},
				{"an escaped CRLF", "demo%0d%0aX-Injected:%201"},
				{"fullwidth lookalike letters", "%EF%BD%84%EF%BD%85%EF%BD%8D%EF%BD%8F"},
				{"one-dot-leader lookalikes of ..", "%E2%80%A4%E2%80%A4"},
				{"a trailing space", "demo%20"},
				{"backslashes", "%5C..%5Cdemo"},
				{"the reserved _stats", "_stats"},
				{"300 characters", strings.Repeat("n", 300)},
			} {
				out = append(out, hostileCase{Name: fmt.Sprintf("%s with %s in the name is a 400", what, n.label),
					Method: r.method, Path: r.fill(n.esc, "seed-1"), Auth: auth, WantStatus: 400, WantCode: api.CodeInvalidRequest})
			}
			if r.method != "HEAD" {
				out = append(out, hostileCase{Name: what + " of an unknown store is a 404", Method: r.method,
					Path: r.fill("ghost", "seed-1"), Auth: auth, WantStatus: 404, WantCode: api.CodeNotFound})
			}
		}
		if r.hasID {
			for _, n := range []struct {
				label, esc string
				status     int
			}{
				{"a C1 control character", "a%C2%85b", 400},
				{"a raw DEL", "a%7Fb", 400},
				{"invalid UTF-8", "%C0%AE%C0%AE", 400},
				{"1024 bytes", strings.Repeat("%C3%A9", 512), 400},
				{"an escaped path into the registry (looked up as data)", "..%2F..%2F_registry%2Frollout%2Fdemo.json", 404},
				{"a zero-width space (looked up as data)", "%E2%80%8B", 404},
			} {
				code := api.CodeInvalidRequest
				if n.status == 404 {
					code = api.CodeNotFound
				}
				hc := hostileCase{Name: fmt.Sprintf("%s with %s in the id is a %d", what, n.label, n.status),
					Method: r.method, Path: r.fill(store, n.esc), WantStatus: n.status, WantCode: code}
				if n.status == 404 && !strings.HasSuffix(r.pattern, "/blob") && !strings.HasPrefix(r.pattern, "/api/v1/generic/") {
					// A record the store does not have is {"record": null} (the reference's
					// answer); only the payload route answers 404.
					hc.Name = fmt.Sprintf("%s with %s in the id is a null record", what, n.label)
					hc.WantStatus, hc.WantCode, hc.WantCount = 200, "", &count{Field: "record", N: 0}
				}
				out = append(out, hc)
			}
		}
		if r.hasTaskID {
			for _, n := range []struct {
				label, esc string
				status     int
			}{
				{"an escaped path", "..%2F..%2Fetc%2Fpasswd", 400},
				{"a NUL", "%00", 400},
				{"an upper-case UUID (looked up case-insensitively)", "0190F6A8-0000-7000-8000-000000000000", 404},
				{"braces around the UUID", "%7B0190f6a8-0000-7000-8000-000000000000%7D", 400},
				{"a urn prefix", "urn:uuid:0190f6a8-0000-7000-8000-000000000000", 400},
				{"SQL", "1%27%20OR%20%271%27%3D%271", 400},
				{"an unknown UUID", "0190f6a8-0000-7000-8000-000000000000", 404},
			} {
				code := api.CodeInvalidRequest
				if n.status == 404 {
					code = api.CodeNotFound
				}
				out = append(out, hostileCase{Name: fmt.Sprintf("%s with %s as the task id is a %d", what, n.label, n.status),
					Method: r.method, Path: r.fill(store, n.esc), WantStatus: n.status, WantCode: code})
			}
		}
	}
	return out
}

// TestHostileCorpus replays the corpus against the stack: every request gets its
// expected answer (a 4xx with the envelope, or for inert cases an answer of the
// expected size) and the data directory and etcd are exactly as before it.
func TestHostileCorpus(t *testing.T) {
	t.Parallel()
	cases := loadCorpus(t)
	st := newStack(t, stackOptions{})
	st.seed()
	st.seedGeneric()
	st.seedDatagen()
	st.seedContext()
	// The experiment's stats row, for the master's searches.
	st.must("POST", "/api/v1/experiments/"+store+"/rescan", tokRW, "", http.StatusOK, nil)
	before := st.state()
	refused, inert := 0, 0
	for _, c := range cases {
		if c.WantCount != nil {
			inert++
		} else {
			refused++
		}
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			a := c.send(t, st)
			if testing.Verbose() {
				t.Logf("%d %s", a.status, truncate(string(a.body), 200))
			}
			c.check(t, a)
			if after := st.state(); diffState(before, after) != "" {
				d := diffState(before, after)
				before = after // one culprit, not every case after it
				t.Fatalf("the request changed the state: %s", d)
			}
		})
	}
	t.Logf("%d hostile requests: %d to be refused with a 4xx, %d to be answered as inert data", len(cases), refused, inert)
	if refused < 100 {
		t.Fatalf("the corpus holds only %d refusals; it must hold at least 100", refused)
	}
	// The seeded rows are all still there.
	var page struct {
		Records []struct {
			ID string `json:"id"`
		} `json:"records"`
	}
	st.must("GET", "/api/v1/rollouts/"+store+"/records", tokRead, "", http.StatusOK, &page)
	var ids []string
	for _, r := range page.Records {
		ids = append(ids, r.ID)
	}
	slices.Sort(ids)
	if strings.Join(ids, ",") != "seed-1,seed-2,seed-3,seed-4,seed-blob" {
		t.Fatalf("the store lists %v", ids)
	}
	var rows struct {
		Rows []struct {
			ID string `json:"id"`
		} `json:"rows"`
	}
	st.must("GET", "/api/v1/generic/"+store+"/rows", tokRead, "", http.StatusOK, &rows)
	ids = ids[:0]
	for _, r := range rows.Rows {
		ids = append(ids, r.ID)
	}
	slices.Sort(ids)
	if strings.Join(ids, ",") != "seed-1,seed-2,seed-3,seed-4" {
		t.Fatalf("the generic store lists %v", ids)
	}
	var evs struct {
		Events []struct {
			EventID string `json:"event_id"`
		} `json:"events"`
	}
	st.must("GET", "/api/v1/datagen/"+store+"/roots/seed-1/events", tokRead, "", http.StatusOK, &evs)
	ids = ids[:0]
	for _, e := range evs.Events {
		ids = append(ids, e.EventID)
	}
	if strings.Join(ids, ",") != "seed-e0,seed-e1,seed-e2,seed-e3,seed-e4" {
		t.Fatalf("the datagen store holds %v", ids)
	}
}
