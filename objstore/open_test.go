package objstore_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lancectx/lancectx/objstore"
)

func TestParseURI(t *testing.T) {
	cwd, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		uri  string
		want objstore.URI
	}{
		{"file:///data/lance", objstore.URI{Scheme: "file", Path: "/data/lance"}},
		{"file://localhost/data/", objstore.URI{Scheme: "file", Path: "/data"}},
		{"/data/lance", objstore.URI{Scheme: "file", Path: "/data/lance"}},
		{"rel/dir", objstore.URI{Scheme: "file", Path: filepath.Join(cwd, "rel", "dir")}},
		{"mem://anything", objstore.URI{Scheme: "mem", Bucket: "anything"}},
		{"S3://bucket/some/prefix/", objstore.URI{Scheme: "s3", Bucket: "bucket", Path: "some/prefix"}},
		{"az://container", objstore.URI{Scheme: "az", Bucket: "container"}},
	} {
		got, err := objstore.ParseURI(c.uri)
		if err != nil || got != c.want {
			t.Errorf("ParseURI(%q) = %+v, %v; want %+v", c.uri, got, err, c.want)
		}
	}
	for _, uri := range []string{"", "file://host/data", "file://", "://x"} {
		if got, err := objstore.ParseURI(uri); err == nil {
			t.Errorf("ParseURI(%q) = %+v, want an error", uri, got)
		}
	}
}

func TestOpen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, uri := range []string{"file://" + dir + "/ds", dir + "/ds"} {
		s, err := objstore.Open(ctx, uri)
		if err != nil {
			t.Fatalf("Open(%q): %v", uri, err)
		}
		fs, ok := s.(*objstore.FileStore)
		if !ok || fs.Root() != filepath.Join(dir, "ds") {
			t.Errorf("Open(%q) = %T %v, want a FileStore at %s/ds", uri, s, s, dir)
		}
	}
	t.Chdir(dir)
	if s, err := objstore.Open(ctx, "rel"); err != nil || s.(*objstore.FileStore).Root() != filepath.Join(dir, "rel") {
		t.Errorf("Open(rel) = %v, %v; want a FileStore at %s/rel", s, err, dir)
	}

	a, err := objstore.Open(ctx, "mem://x")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := objstore.Open(ctx, "mem://x")
	if err := objstore.PutBytes(ctx, a, "k", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Stat(ctx, "k"); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("two mem:// opens share data: %v", err)
	}

	for _, scheme := range []string{"s3", "az", "gs"} {
		_, err := objstore.Open(ctx, scheme+"://bucket/prefix")
		if !errors.Is(err, objstore.ErrUnsupportedScheme) || !strings.Contains(err.Error(), scheme+"://") {
			t.Errorf("Open(%s://...): %v, want ErrUnsupportedScheme naming %s", scheme, err, scheme)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := objstore.Open(cctx, "mem://x"); !errors.Is(err, context.Canceled) {
		t.Errorf("Open with a cancelled ctx: %v", err)
	}
}
