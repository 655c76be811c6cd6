package hostile

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/lancectx/lancectx/api"
)

// okRequest is a request that a route serves with the right token.
type okRequest struct {
	method, path, body string
	status             int
	internal           bool
	// worker and master say which standalone server serves the route.
	worker, master bool
}

// okRequests covers every route of the worker and the master, in an order that keeps
// each request valid (the store deleted last).
func okRequests() []okRequest {
	return []okRequest{
		{method: "POST", path: "/api/v1/rollouts", body: `{"name":"authz"}`, status: 201, worker: true},
		{method: "GET", path: "/api/v1/rollouts", status: 200, worker: true},
		{method: "GET", path: "/api/v1/rollouts/authz", status: 200, worker: true},
		{method: "POST", path: "/api/v1/rollouts/authz/records?flush=true", body: `{"records":[{"id":"a1","rollout_id":"r","binary_payload":"eHl6"}]}`, status: 201, worker: true},
		{method: "GET", path: "/api/v1/rollouts/authz/records", status: 200, worker: true},
		{method: "GET", path: "/api/v1/rollouts/authz/records/a1", status: 200, worker: true},
		{method: "GET", path: "/api/v1/rollouts/authz/records/a1/blob", status: 200, worker: true},
		{method: "GET", path: "/api/v1/rollouts/authz/arrow", status: 200, worker: true},
		{method: "POST", path: "/api/v1/internal/merge-wal/authz", status: 200, internal: true, worker: true},
		{method: "GET", path: "/api/v1/openapi.json", status: 200, worker: true},
		{method: "GET", path: "/api/v1/experiments", status: 200, master: true},
		{method: "GET", path: "/api/v1/experiments/authz", status: 200, master: true},
		{method: "POST", path: "/api/v1/experiments/authz/rescan", status: 200, master: true},
		{method: "POST", path: "/api/v1/experiments/authz/optimize", status: 202, master: true},
		{method: "GET", path: "/api/v1/tasks", status: 200, master: true},
		{method: "POST", path: "/api/v1/tasks", body: `{"kind":"stats_maintenance"}`, status: 202, master: true},
		{method: "GET", path: "/api/v1/tasks/{task}", status: 200, master: true},
		{method: "GET", path: "/api/v1/cluster", status: 200, master: true},
		{method: "DELETE", path: "/api/v1/rollouts/authz", status: 204, worker: true},
	}
}

// allOKRequests are okRequests and the generic, datagen and context stores'
// (genericOK, datagenOK, contextOK).
func allOKRequests() []okRequest {
	return append(append(append(okRequests(), genericOK()...), datagenOK()...), contextOK()...)
}

func send(t *testing.T, base, method, path, authz, body string) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", api.ContentTypeJSON)
	}
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

// syncBuffer collects log output from concurrent handlers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestEveryRouteUnderAuth runs every route of the worker and the master, as `lancectx
// serve` serves them and as `lancectx worker` and `lancectx master` do alone: no token
// and a wrong token are 401s with a Bearer challenge, a token without the scope (a read
// token on a write, a write-only token on a read) and the wrong kind of token (public
// on an internal route, internal on a public one) are 403s, the right token is served.
// The debug log of all of it holds no token.
func TestEveryRouteUnderAuth(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	st := newStack(t, stackOptions{log: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	st.seed()
	servers := []struct {
		name           string
		base           string
		worker, master bool
	}{
		{"serve", st.url, true, true},
		{"worker", st.serveAlone(st.worker.Handler()), true, false},
		{"master", st.serveAlone(st.master.Handler()), false, true},
	}
	for _, srv := range servers {
		t.Run(srv.name, func(t *testing.T) {
			name := "authz-" + srv.name
			if !srv.worker {
				st.must("POST", "/api/v1/rollouts", tokRW, `{"name":"`+name+`"}`, http.StatusCreated, nil)
			}
			for _, r := range allOKRequests() {
				if !(r.worker && srv.worker || r.master && srv.master) {
					continue
				}
				path := strings.ReplaceAll(strings.ReplaceAll(r.path, "{task}", st.taskID), "authz", name)
				reqBody := strings.ReplaceAll(r.body, "authz", name)
				good, lacking, otherKind := tokRW, tokRead, tokInternal
				switch {
				case r.internal:
					good, lacking, otherKind = tokInternal, tokRW, tokRW
				case r.method == "GET" || strings.HasSuffix(r.path, "/batch-get") ||
					strings.HasSuffix(r.path, "/search") || strings.HasSuffix(r.path, "/retrieve"):
					lacking = tokWrite
				}
				for _, c := range []struct {
					label, authz string
					status       int
				}{
					{"no token", "", 401},
					{"a wrong token", "Bearer " + tokWrong, 401},
					{"a token without the scope", "Bearer " + lacking, 403},
					{"the other kind of token", "Bearer " + otherKind, 403},
					{"the right token", "Bearer " + good, r.status},
				} {
					status, h, body := send(t, srv.base, r.method, path, c.authz, reqBody)
					if status != c.status {
						t.Fatalf("%s %s with %s: %d, want %d: %s", r.method, path, c.label, status, c.status, body)
					}
					if status == 401 && !strings.HasPrefix(h.Get("WWW-Authenticate"), "Bearer") {
						t.Fatalf("%s %s with %s: 401 without a Bearer challenge", r.method, path, c.label)
					}
					if status == 401 || status == 403 {
						code := map[int]string{401: api.CodeUnauthorized, 403: api.CodeForbidden}[status]
						if !bytes.Contains(body, []byte(`"code":"`+code+`"`)) || h.Get("Content-Type") != api.ContentTypeJSON {
							t.Fatalf("%s %s with %s: not the envelope: %s", r.method, path, c.label, body)
						}
					}
				}
			}
			// The probes are open.
			for _, p := range []string{"/api/v1/health", "/metrics"} {
				if status, _, body := send(t, srv.base, "GET", p, "", ""); status != 200 {
					t.Fatalf("GET %s without a token: %d %s", p, status, body)
				}
			}
		})
	}
	out := logs.String()
	if !strings.Contains(out, `"msg":"auth: request refused"`) || !strings.Contains(out, `"msg":"http request"`) {
		t.Fatalf("the debug log lacks the refusals or the access log:\n%s", truncate(out, 2000))
	}
	for _, tok := range []string{tokRW, tokRead, tokWrite, tokInternal, tokWrong, "Bearer"} {
		if strings.Contains(out, tok) {
			t.Fatalf("the log holds %q", tok)
		}
	}
}
