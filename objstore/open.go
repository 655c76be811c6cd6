package objstore

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
)

// ErrUnsupportedScheme: Open was given a URI scheme it has no backend for.
var ErrUnsupportedScheme = errors.New("objstore: unsupported URI scheme")

// URI is a parsed store location.
type URI struct {
	// Scheme is lower case: "file", "mem", "s3", "az", "gs", ...
	Scheme string
	// Bucket is the URI host: the bucket or container; empty for file.
	Bucket string
	// Path is the absolute directory for file, otherwise the key prefix inside the
	// bucket without leading or trailing slashes.
	Path string
}

// ParseURI parses file:///abs/path, a bare absolute or relative filesystem path (made
// absolute against the working directory), or scheme://bucket/prefix.
func ParseURI(uri string) (URI, error) {
	if uri == "" {
		return URI{}, errors.New("objstore: empty store URI")
	}
	if !strings.Contains(uri, "://") {
		abs, err := filepath.Abs(uri)
		if err != nil {
			return URI{}, fmt.Errorf("objstore: parse %q: %w", uri, err)
		}
		return URI{Scheme: "file", Path: abs}, nil
	}
	u, err := url.Parse(uri)
	if err != nil {
		return URI{}, fmt.Errorf("objstore: parse store URI: %w", err)
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "file" {
		return URI{Scheme: scheme, Bucket: u.Host, Path: strings.Trim(u.Path, "/")}, nil
	}
	if u.Host != "" && u.Host != "localhost" || u.Path == "" {
		return URI{}, fmt.Errorf("objstore: parse %q: want file:///absolute/path", uri)
	}
	return URI{Scheme: "file", Path: filepath.Clean(filepath.FromSlash(u.Path))}, nil
}

// Open opens the store a URI names. A new scheme is one more case in its switch.
//
//   - file:///abs/path or a bare path: a FileStore, creating the directory if needed.
//   - mem://anything: a new, empty MemStore on every call; two Opens of the same
//     mem:// URI do not share data, and the data dies with the store.
func Open(ctx context.Context, uri string) (Store, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	u, err := ParseURI(uri)
	if err != nil {
		return nil, err
	}
	switch u.Scheme {
	case "file":
		return NewFile(u.Path)
	case "mem":
		return NewMem(), nil
	default:
		return nil, fmt.Errorf("%w: %s:// is not supported yet", ErrUnsupportedScheme, u.Scheme)
	}
}
