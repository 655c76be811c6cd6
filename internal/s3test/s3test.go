// Package s3test serves an in-process S3 (gofakes3) on loopback for tests outside the s3
// package, e.g. Lance commits and cleanup against the S3 protocol.
package s3test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"

	"github.com/lancectx/lancectx/objstore/s3"
)

// Server is a gofakes3 instance on 127.0.0.1, closed when the test ends.
type Server struct {
	URL     string
	backend *s3mem.Backend
	buckets atomic.Int64
}

// Start serves a fresh in-memory S3.
func Start(t testing.TB) *Server {
	t.Helper()
	b := s3mem.New()
	srv := httptest.NewServer(gofakes3.New(b).Server())
	t.Cleanup(srv.Close)
	return &Server{URL: srv.URL, backend: b}
}

// Store opens an s3.Store on a new bucket (names need 3+ characters) under prefix.
func (s *Server) Store(t testing.TB, prefix string) *s3.Store {
	t.Helper()
	name := fmt.Sprintf("bucket-%03d", s.buckets.Add(1))
	if err := s.backend.CreateBucket(name); err != nil {
		t.Fatalf("create bucket %s: %v", name, err)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	st, err := s3.New(context.Background(), s3.Config{
		Bucket: name, Prefix: prefix, Region: "us-east-1", Endpoint: s.URL, PathStyle: true,
		AccessKeyID: "AKIDTEST", SecretAccessKey: "secret", HTTPClient: &http.Client{Transport: tr},
	})
	if err != nil {
		t.Fatalf("open s3 store: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}
