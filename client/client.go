// Package client is a Go client of lancectx's HTTP API: the worker's rollout routes
// (create, append, list, get) and the master's (experiments, tasks, SQL queries).
//
// One Client talks to one base URL; `lancectx serve` answers both planes on one
// listener, and a deployment with separate workers and masters uses one Client for
// each. Errors the server answers come back as *Error with the HTTP status and the
// error envelope's code and message, so callers branch with errors.As.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/rollout"
)

// Client calls one lancectx server.
type Client struct {
	base  *url.URL
	token string
	hc    *http.Client
}

// Option configures a Client.
type Option func(*Client)

// WithToken sends token as a bearer token (servers with --api-tokens-file).
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithHTTPClient uses hc for the requests (its Timeout bounds each call; the default
// client has 60 s).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// New returns a client of the server at baseURL (e.g. http://127.0.0.1:3000).
func New(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil {
		return nil, fmt.Errorf("client: server address %q: %w", baseURL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("client: server address %q: want http://host:port or https://host:port", baseURL)
	}
	c := &Client{base: u, hc: &http.Client{Timeout: 60 * time.Second}}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// Error is an error answer of the server.
type Error struct {
	// Status is the HTTP status.
	Status int
	// Code and Message are the error envelope's ({"error":{"code","message"}}).
	Code, Message string
}

func (e *Error) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("lancectx: HTTP %d: %s", e.Status, e.Message)
	}
	return fmt.Sprintf("lancectx: %s (HTTP %d): %s", e.Code, e.Status, e.Message)
}

// ErrNoRecord: the store has no record of the id (the server answers
// {"record": null}, as the reference does).
var ErrNoRecord = errors.New("client: no such record")

// IsNotFound tells whether err is a 404 answer or ErrNoRecord.
func IsNotFound(err error) bool {
	var e *Error
	return errors.Is(err, ErrNoRecord) || errors.As(err, &e) && e.Status == http.StatusNotFound
}

// do sends a request and decodes a JSON answer into out (nil: discard).
func (c *Client) do(ctx context.Context, method, path string, q url.Values, body any, out any) error {
	u := *c.base
	u.Path = c.base.Path + path
	u.RawQuery = q.Encode()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("client: encode the request: %w", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", api.ContentTypeJSON)
	}
	req.Header.Set("Accept", api.ContentTypeJSON)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("client: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<30))
	if err != nil {
		return fmt.Errorf("client: %s %s: read the answer: %w", method, path, err)
	}
	if resp.StatusCode >= 300 {
		var env api.ErrorResponse
		if json.Unmarshal(data, &env) == nil && env.Error.Message != "" {
			return &Error{Status: resp.StatusCode, Code: env.Error.Code, Message: env.Error.Message}
		}
		msg := strings.TrimSpace(string(data))
		if len(msg) > 200 {
			msg = msg[:200] + "..."
		}
		return &Error{Status: resp.StatusCode, Message: msg}
	}
	if out == nil || len(data) == 0 {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("client: %s %s: decode the answer: %w", method, path, err)
	}
	return nil
}

func storePath(name string) string { return "/api/v1/rollouts/" + url.PathEscape(name) }

// CreateRolloutStore creates a rollout store.
func (c *Client) CreateRolloutStore(ctx context.Context, name string) (api.StoreInfo, error) {
	var out api.StoreInfo
	err := c.do(ctx, http.MethodPost, "/api/v1/rollouts", nil, api.CreateRolloutStoreRequest{Name: name}, &out)
	return out, err
}

// ListRolloutStores lists the rollout stores.
func (c *Client) ListRolloutStores(ctx context.Context) (api.ListStoresResponse, error) {
	var out api.ListStoresResponse
	err := c.do(ctx, http.MethodGet, "/api/v1/rollouts", nil, nil, &out)
	return out, err
}

// Append appends records to a rollout store; with flush the call returns once they
// are sealed (visible to every reader), else once they are durable.
func (c *Client) Append(ctx context.Context, name string, records []rollout.AddRecord, flush bool) (api.AppendResponse, error) {
	var q url.Values
	if flush {
		q = url.Values{"flush": {"true"}}
	}
	var out api.AppendResponse
	err := c.do(ctx, http.MethodPost, storePath(name)+"/records", q, map[string]any{"records": records}, &out)
	return out, err
}

// ListOptions page and filter a listing.
type ListOptions struct {
	// Limit is the page size (0: the server's, every matching row up to its bound).
	Limit int
	// Offset skips rows.
	Offset int
	// Filter is a SQL predicate ("reward > 0.5 AND role = 'assistant'").
	Filter string
}

func (o ListOptions) values() url.Values {
	return queryOf(map[string]string{"filter": o.Filter}, o.Limit, o.Offset)
}

// queryOf is a query of the non-empty values of params and of a page (a zero limit
// or offset is left out: the server's default).
func queryOf(params map[string]string, limit, offset int) url.Values {
	q := url.Values{}
	for k, v := range params {
		if v != "" {
			q.Set(k, v)
		}
	}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if offset > 0 {
		q.Set("offset", strconv.Itoa(offset))
	}
	return q
}

// List lists a rollout store's records (without their binary payloads).
func (c *Client) List(ctx context.Context, name string, opts ListOptions) (api.ListRecordsResponse[rollout.Record], error) {
	var out api.ListRecordsResponse[rollout.Record]
	err := c.do(ctx, http.MethodGet, storePath(name)+"/records", opts.values(), nil, &out)
	return out, err
}

// Get reads one record by id (ErrNoRecord when the store has none).
func (c *Client) Get(ctx context.Context, name, id string) (rollout.Record, error) {
	var out api.GetRecordResponse[*rollout.Record]
	if err := c.do(ctx, http.MethodGet, storePath(name)+"/records/"+url.PathEscape(id), nil, nil, &out); err != nil {
		return rollout.Record{}, err
	}
	if out.Record == nil {
		return rollout.Record{}, fmt.Errorf("%w: %q in store %q", ErrNoRecord, id, name)
	}
	return *out.Record, nil
}

// ExperimentsOptions filter and page the master's experiment list.
type ExperimentsOptions struct {
	Search string
	// Kind keeps one store kind (rollout, generic, datagen); "" lists every kind.
	Kind          string
	Limit, Offset int
}

// Experiments lists the experiments the master knows (every store kind).
func (c *Client) Experiments(ctx context.Context, opts ExperimentsOptions) (api.ExperimentListResponse, error) {
	q := queryOf(map[string]string{"search": opts.Search, "kind": opts.Kind}, opts.Limit, opts.Offset)
	var out api.ExperimentListResponse
	err := c.do(ctx, http.MethodGet, "/api/v1/experiments", q, nil, &out)
	return out, err
}

// TasksOptions filter and page the master's task list.
type TasksOptions struct {
	Kind, Target string
	// State is a comma-separated list of states (queued, running, succeeded, ...).
	State         string
	Limit, Offset int
}

// Tasks lists the master's tasks, newest first.
func (c *Client) Tasks(ctx context.Context, opts TasksOptions) (api.TaskListResponse, error) {
	q := queryOf(map[string]string{"kind": opts.Kind, "target": opts.Target, "state": opts.State}, opts.Limit, opts.Offset)
	var out api.TaskListResponse
	err := c.do(ctx, http.MethodGet, "/api/v1/tasks", q, nil, &out)
	return out, err
}

// Query runs read-only SQL over one experiment (table `records`); kind "" is rollout.
func (c *Client) Query(ctx context.Context, name, kind, sql string) (api.QueryResponse, error) {
	var q url.Values
	if kind != "" {
		q = url.Values{"kind": {kind}}
	}
	var out api.QueryResponse
	err := c.do(ctx, http.MethodPost, "/api/v1/experiments/"+url.PathEscape(name)+"/query", q, api.QueryRequest{SQL: sql}, &out)
	return out, err
}
