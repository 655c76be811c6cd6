// Package rollouttest ships test data for the rollout data plane: the corpus of bad
// requests that every layer must refuse. The worker replays it against the layer each
// case names (its request decoders, api's validators) and over HTTP, checking that
// nothing was written; tests/hostile replays it behind the whole stack; the rollout
// package seeds its fuzz targets with the bodies.
package rollouttest

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

//go:embed testdata/bad_requests.json
var corpusJSON []byte

// Layers of the corpus: which part of the system refuses a request.
const (
	LayerBody   = "body"   // the append body decoder (worker.DecodeAppendRequest)
	LayerCreate = "create" // store creation (api.DecodeJSON, then api.ValidateName)
	LayerName   = "name"   // the store name in the path (api.ValidateName)
	LayerQuery  = "query"  // query parameters (api.Query, then the list route's and flush's parsers)
	LayerID     = "id"     // the record id in the path (api.ValidateID)
	LayerStore  = "store"  // the registry: an unknown store or record (worker only)
)

// Corpus is the bad-request corpus.
type Corpus struct {
	Description string `json:"description"`
	// StorePlaceholder appears in paths where the name of an existing store goes.
	StorePlaceholder string `json:"store_placeholder"`
	// Limits are the server limits the expected answers assume.
	Limits Limits       `json:"limits"`
	Cases  []BadRequest `json:"cases"`
}

// Limits are the limits a server must run with for the corpus's 413 cases and its
// list limit cases.
type Limits struct {
	MaxBodyBytes int64 `json:"max_body_bytes"`
	MaxRecords   int   `json:"max_records"`
	MaxPartBytes int64 `json:"max_part_bytes"`
	// MaxListRows is the list route's bound (worker.Config.ListMaxRows).
	MaxListRows int `json:"max_list_rows"`
}

// BadRequest is one request that must be refused.
type BadRequest struct {
	// Name is a sentence saying what is refused; unique in the corpus.
	Name  string `json:"name"`
	Layer string `json:"layer"`
	// Method and Path (already percent-encoded; may contain the store placeholder).
	Method      string `json:"method"`
	Path        string `json:"path"`
	ContentType string `json:"content_type,omitempty"`
	// Body is the body as text; BodyBase64 holds bytes that are not UTF-8.
	Body       string `json:"body,omitempty"`
	BodyBase64 string `json:"body_base64,omitempty"`
	// Fill, when set, replaces Marker in the body with Count copies of Char (so an
	// oversized body need not be stored).
	Fill *Fill `json:"fill,omitempty"`
	// StoreName is the decoded store name a name-layer case carries in its path.
	StoreName string `json:"store_name,omitempty"`
	// RecordID (or RecordIDBase64) is the decoded record id an id-layer case carries.
	RecordID       string `json:"record_id,omitempty"`
	RecordIDBase64 string `json:"record_id_base64,omitempty"`
	WantStatus     int    `json:"want_status"`
	WantCode       string `json:"want_code"`
	// WantMessage, when set, must appear in the error message.
	WantMessage string `json:"want_message,omitempty"`
}

// Fill describes a generated stretch of the body.
type Fill struct {
	Marker string `json:"marker"`
	Char   string `json:"char"`
	Count  int    `json:"count"`
}

// BadRequests parses the embedded corpus.
func BadRequests() (Corpus, error) {
	var c Corpus
	dec := json.NewDecoder(bytes.NewReader(corpusJSON))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return Corpus{}, fmt.Errorf("rollouttest: parse corpus: %w", err)
	}
	return c, nil
}

// BodyBytes is the request body.
func (c *BadRequest) BodyBytes() ([]byte, error) {
	var b []byte
	if c.BodyBase64 != "" {
		var err error
		if b, err = base64.StdEncoding.DecodeString(c.BodyBase64); err != nil {
			return nil, fmt.Errorf("rollouttest: case %q: %w", c.Name, err)
		}
	} else {
		b = []byte(c.Body)
	}
	if c.Fill != nil {
		if !bytes.Contains(b, []byte(c.Fill.Marker)) {
			return nil, fmt.Errorf("rollouttest: case %q: fill marker not in body", c.Name)
		}
		b = bytes.Replace(b, []byte(c.Fill.Marker), bytes.Repeat([]byte(c.Fill.Char), c.Fill.Count), 1)
	}
	return b, nil
}

// HasBody tells whether the request carries a body.
func (c *BadRequest) HasBody() bool {
	return c.Body != "" || c.BodyBase64 != "" || c.ContentType != ""
}

// Target is the path with the store placeholder replaced by store.
func (c *BadRequest) Target(store string) string {
	return strings.ReplaceAll(c.Path, "{store}", store)
}

// ID is the decoded record id of an id-layer case.
func (c *BadRequest) ID() string {
	if c.RecordIDBase64 != "" {
		b, err := base64.StdEncoding.DecodeString(c.RecordIDBase64)
		if err == nil {
			return string(b)
		}
	}
	return c.RecordID
}

// NewRequest builds the request against baseURL (e.g. an httptest.Server's URL, or ""
// for a handler called directly) with store in place of the placeholder.
func (c *BadRequest) NewRequest(ctx context.Context, baseURL, store string) (*http.Request, error) {
	var body io.Reader
	if c.HasBody() {
		b, err := c.BodyBytes()
		if err != nil {
			return nil, err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, c.Method, baseURL+c.Target(store), body)
	if err != nil {
		return nil, fmt.Errorf("rollouttest: case %q: %w", c.Name, err)
	}
	if c.ContentType != "" {
		req.Header.Set("Content-Type", c.ContentType)
	}
	return req, nil
}
