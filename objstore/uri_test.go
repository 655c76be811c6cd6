package objstore

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCanonicalURI(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	here := "file://" + filepath.ToSlash(wd)
	cases := map[string]struct{ in, want string }{
		"a relative path becomes an absolute file URI":  {"./lance-data", here + "/lance-data"},
		"a bare relative name too":                      {"lance-data/", here + "/lance-data"},
		"an absolute path":                              {"/srv/data/", "file:///srv/data"},
		"a path with dot segments is cleaned":           {"/srv/./x/../data", "file:///srv/data"},
		"a file URI stays a file URI":                   {"file:///srv/data", "file:///srv/data"},
		"a file URI with localhost":                     {"file://localhost/srv/data/", "file:///srv/data"},
		"a file URI with a trailing slash":              {"file:///srv/data///", "file:///srv/data"},
		"an S3 URI keeps bucket and prefix":             {"s3://bucket/rollouts/", "s3://bucket/rollouts"},
		"the scheme is lower-cased":                     {"S3://bucket/rollouts", "s3://bucket/rollouts"},
		"an S3 query (endpoint, signature) is dropped":  {"s3://bucket/p?endpoint=http://x:9000&X-Amz-Signature=abc", "s3://bucket/p"},
		"an Azure URI":                                  {"az://container/prefix", "az://container/prefix"},
		"an abfss URI keeps its container":              {"abfss://cont@acct.dfs.core.windows.net/p", "abfss://cont@acct.dfs.core.windows.net/p"},
		"a password in the URI is dropped":              {"abfss://cont:secret@acct.dfs.core.windows.net/p", "abfss://cont@acct.dfs.core.windows.net/p"},
		"a bucket without a prefix":                     {"s3://bucket", "s3://bucket"},
		"a mem URI":                                     {"mem://x", "mem://x"},
		"an unparsable URI loses its query and secrets": {"s3://user:pw@b%zz/p?sig=1", "s3://b%zz/p"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := CanonicalURI(tc.in); got != tc.want {
				t.Fatalf("CanonicalURI(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if again := CanonicalURI(CanonicalURI(tc.in)); again != tc.want {
				t.Fatalf("not idempotent: %q", again)
			}
		})
	}
}

func TestDatasetURIIsTheSameForEverySpellingOfADataDir(t *testing.T) {
	dir := t.TempDir()
	rel, err := filepath.Rel(mustWd(t), dir)
	if err != nil {
		t.Fatal(err)
	}
	want := "file://" + filepath.ToSlash(dir) + "/exp.rollout.lance"
	for _, spelling := range []string{dir, dir + "/", "file://" + filepath.ToSlash(dir), "file://" + filepath.ToSlash(dir) + "/", rel} {
		if got := DatasetURI(spelling, "exp.rollout.lance"); got != want {
			t.Errorf("DatasetURI(%q) = %q, want %q", spelling, got, want)
		}
	}
}

func mustWd(t *testing.T) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	return wd
}
