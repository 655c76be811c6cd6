package objstore

import (
	"net/url"
	"path/filepath"
	"strings"
)

// CanonicalURI is the one form in which lancectx reports a store location (a data
// directory, and with DatasetURI a dataset in it): what a user pastes into LanceDB's
// connect() or pylance's lance.dataset(). Worker and master both print locations
// through it, so the same data directory, however it was spelled on their command
// lines, gives the same string.
//
//   - A local directory, given as a bare path (relative or absolute) or as file://,
//     becomes file:///absolute/clean/path. A relative path would mean nothing to a
//     process started elsewhere; the file:// form is a URI like the cloud ones
//     (the field is called uri), LanceDB and pylance open it as they open the path,
//     and it is what the master has always written to the _stats table's uri column.
//   - A cloud URI keeps its scheme (lower case), its host and its path: s3://bucket/prefix,
//     az://container/prefix, abfss://container@account.dfs.core.windows.net/prefix.
//     The query (S3 endpoint settings, a signature), a password and the fragment are
//     dropped: they are not part of the location, and may be secrets.
//
// The result never ends in a slash, so DatasetURI and a plain base + "/" + dir agree.
// A URI that does not parse comes back cut at its first '?', without user info.
func CanonicalURI(uri string) string {
	if !strings.Contains(uri, "://") {
		abs, err := filepath.Abs(uri)
		if err != nil {
			abs = filepath.Clean(uri)
		}
		return strings.TrimRight("file://"+filepath.ToSlash(abs), "/")
	}
	u, err := url.Parse(uri)
	if err != nil {
		s, _, _ := strings.Cut(uri, "?")
		if scheme, rest, ok := strings.Cut(s, "://"); ok {
			if at := strings.LastIndex(rest, "@"); at >= 0 && !strings.Contains(rest[:at], "/") {
				rest = rest[at+1:]
			}
			s = scheme + "://" + rest
		}
		return strings.TrimRight(s, "/")
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme == "file" && (u.Host == "" || u.Host == "localhost") {
		return strings.TrimRight("file://"+filepath.ToSlash(filepath.Clean(filepath.FromSlash(u.Path))), "/")
	}
	out := url.URL{Scheme: scheme, Host: u.Host, Path: u.Path}
	if u.User != nil && u.User.Username() != "" {
		out.User = url.User(u.User.Username()) // abfs(s)://CONTAINER@ACCOUNT...: the container
	}
	return strings.TrimRight(out.String(), "/")
}

// DatasetURI is the canonical URI (CanonicalURI) of the dataset at dir, a path
// relative to the data directory dataDir (e.g. "exp.rollout.lance").
func DatasetURI(dataDir, dir string) string {
	return CanonicalURI(dataDir) + "/" + strings.TrimLeft(dir, "/")
}
