package azure

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestConfigFromURI(t *testing.T) {
	noEnv := map[string]string{}
	withKey := map[string]string{EnvAccount: "envacct", EnvKey: "c2VjcmV0"}
	for _, c := range []struct {
		name string
		uri  string
		env  map[string]string
		want Config
		err  string
	}{
		{name: "az with prefix and the default credential", uri: "az://rollouts/prod/ds", env: noEnv,
			want: Config{Container: "rollouts", Prefix: "prod/ds", UseDefaultCredential: true}},
		{name: "azure scheme, no prefix", uri: "azure://rollouts", env: noEnv,
			want: Config{Container: "rollouts", UseDefaultCredential: true}},
		{name: "trailing slashes are dropped", uri: "az://rollouts/prod/", env: noEnv,
			want: Config{Container: "rollouts", Prefix: "prod", UseDefaultCredential: true}},
		{name: "account and key from the environment", uri: "az://c1/p", env: withKey,
			want: Config{Container: "c1", Prefix: "p", AccountName: "envacct", AccountKey: "c2VjcmV0"}},
		{name: "connection string from the environment", uri: "az://c1",
			env:  map[string]string{EnvConnectionString: "UseDevelopmentStorage=true"},
			want: Config{Container: "c1", ConnectionString: "UseDevelopmentStorage=true"}},
		{name: "SAS token and endpoint from the environment", uri: "az://c1",
			env:  map[string]string{EnvAccount: "a", EnvSASToken: "?sv=x&sig=y", EnvEndpoint: "http://127.0.0.1:10000/devstoreaccount1"},
			want: Config{Container: "c1", AccountName: "a", SASToken: "?sv=x&sig=y", Endpoint: "http://127.0.0.1:10000/devstoreaccount1"}},
		{name: "abfss maps the dfs endpoint to the blob endpoint", uri: "abfss://fs1@myacct.dfs.core.windows.net/lake/ds", env: noEnv,
			want: Config{Container: "fs1", Prefix: "lake/ds", AccountName: "myacct", Endpoint: "https://myacct.blob.core.windows.net", UseDefaultCredential: true}},
		{name: "abfs too, and the URI's account wins over the environment", uri: "abfs://fs1@myacct.dfs.core.windows.net", env: withKey,
			want: Config{Container: "fs1", AccountName: "myacct", AccountKey: "c2VjcmV0", Endpoint: "https://myacct.blob.core.windows.net"}},
		{name: "sovereign cloud suffix is kept", uri: "abfss://fs@acct.dfs.core.chinacloudapi.cn/x", env: noEnv,
			want: Config{Container: "fs", Prefix: "x", AccountName: "acct", Endpoint: "https://acct.blob.core.chinacloudapi.cn", UseDefaultCredential: true}},
		{name: "abfss host case is folded", uri: "ABFSS://fs@MyAcct.DFS.core.windows.net/", env: noEnv,
			want: Config{Container: "fs", AccountName: "myacct", Endpoint: "https://myacct.blob.core.windows.net", UseDefaultCredential: true}},
		{name: "abfss naming the blob endpoint", uri: "abfss://fs@acct.blob.core.windows.net/p", env: noEnv,
			want: Config{Container: "fs", Prefix: "p", AccountName: "acct", Endpoint: "https://acct.blob.core.windows.net", UseDefaultCredential: true}},
		{name: "abfss does not use the endpoint variable", uri: "abfss://fs@acct.dfs.core.windows.net",
			env:  map[string]string{EnvEndpoint: "http://elsewhere"},
			want: Config{Container: "fs", AccountName: "acct", Endpoint: "https://acct.blob.core.windows.net", UseDefaultCredential: true}},

		{name: "abfss without a container", uri: "abfss://acct.dfs.core.windows.net/p", err: "CONTAINER@ACCOUNT"},
		{name: "abfss with a password", uri: "abfss://fs:pw@acct.dfs.core.windows.net/p", err: "password"},
		{name: "abfss with a foreign host", uri: "abfss://fs@example.com/p", err: "is not ACCOUNT.dfs"},
		{name: "abfss with a port", uri: "abfss://fs@acct.dfs.core.windows.net:443/p", err: "is not ACCOUNT.dfs"},
		{name: "az with a user part", uri: "az://fs@acct/p", err: "want az://CONTAINER/PREFIX"},
		{name: "az without a container", uri: "az:///p", err: "no container"},
		{name: "another scheme", uri: "s3://bucket/p", err: "scheme"},
		{name: "a query", uri: "az://c/p?sv=1", err: "query"},
		{name: "a prefix that escapes", uri: "az://c/a/../b", err: "bad prefix"},
		{name: "a prefix with an empty segment", uri: "az://c/a//b", err: "bad prefix"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := configFromURI(c.uri, func(k string) string { return c.env[k] })
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("configFromURI(%q) = %+v, %v; want an error containing %q", c.uri, got, err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("configFromURI(%q): %v", c.uri, err)
			}
			if got != c.want {
				t.Errorf("configFromURI(%q) =\n %+v\nwant\n %+v", c.uri, got, c.want)
			}
		})
	}
}

func TestConfigFromURIReadsTheEnvironment(t *testing.T) {
	t.Setenv(EnvAccount, "acct")
	t.Setenv(EnvKey, "a2V5")
	t.Setenv(EnvConnectionString, "")
	t.Setenv(EnvSASToken, "")
	t.Setenv(EnvEndpoint, "http://127.0.0.1:1/acct")
	got, err := ConfigFromURI("az://c/p")
	want := Config{Container: "c", Prefix: "p", AccountName: "acct", AccountKey: "a2V5", Endpoint: "http://127.0.0.1:1/acct"}
	if err != nil || got != want {
		t.Errorf("ConfigFromURI = %+v, %v; want %+v", got, err, want)
	}
}

func TestConfigStringMasksSecrets(t *testing.T) {
	c := Config{Container: "c", AccountName: "acct", AccountKey: "s3cr3tkey", SASToken: "sig=s3cr3tsas",
		ConnectionString: "AccountKey=s3cr3tconn"}
	s := c.String()
	if strings.Contains(s, "s3cr3t") {
		t.Errorf("String() leaks a secret: %s", s)
	}
	if !strings.Contains(s, `account="acct"`) || !strings.Contains(s, "key=***") {
		t.Errorf("String() = %s, want the account and a masked key", s)
	}
}

func TestNewValidates(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name string
		cfg  Config
		err  string
	}{
		{"no container", Config{AccountName: "a", AccountKey: "a2V5"}, "no container"},
		{"no account or endpoint", Config{Container: "c", SASToken: "sig=x"}, "no account name or endpoint"},
		{"key without account", Config{Container: "c", Endpoint: "http://127.0.0.1:1/a", AccountKey: "a2V5"}, "account name"},
		{"bad prefix", Config{Container: "c", AccountName: "a", AccountKey: "a2V5", Prefix: "a/../b"}, "bad prefix"},
		{"bad key", Config{Container: "c", AccountName: "a", AccountKey: "not base64!"}, "objstore/azure"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := New(ctx, c.cfg); err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("New(%v) = %v, want an error containing %q", c.cfg, err, c.err)
			}
		})
	}
	s, err := New(ctx, Config{Container: "c", AccountName: "a", AccountKey: "a2V5", MaxBatchDelete: 1000, DeleteConcurrency: -1})
	if err != nil {
		t.Fatal(err)
	}
	if s.MaxBatchDelete() != MaxBatchDeleteLimit || s.delConc != DefaultDeleteConcurrency {
		t.Errorf("limits = %d, %d; want %d, %d", s.MaxBatchDelete(), s.delConc, MaxBatchDeleteLimit, DefaultDeleteConcurrency)
	}
	if got := s.client.URL(); got != "https://a.blob.core.windows.net/c" {
		t.Errorf("container URL = %s, want the account's public blob endpoint", got)
	}
	s, err = New(ctx, Config{Container: "c", AccountName: "a", AccountKey: "a2V5", MaxBatchDelete: 100})
	if err != nil || s.MaxBatchDelete() != 100 {
		t.Errorf("MaxBatchDelete() = %d, %v; want 100", s.MaxBatchDelete(), err)
	}
	// No key, SAS or connection string: the default credential chain, built without I/O.
	s, err = New(ctx, Config{Container: "c", AccountName: "a"})
	if err != nil || s.cred == nil {
		t.Errorf("New without secrets = %v (credential %v), want the default credential chain", err, s != nil && s.cred != nil)
	}
}

func TestMarkerCache(t *testing.T) {
	c := newMarkerCache(2, time.Hour)
	k := func(after string) markerKey { return markerKey{"p/", "", after} }
	c.put(k("a"), listPos{marker: "ma"})
	c.put(k("b"), listPos{marker: "mb", skip: 3})
	if pos, ok := c.get(k("a")); !ok || pos.marker != "ma" { // a is now the most recent
		t.Errorf("get(a) = %+v, %v", pos, ok)
	}
	c.put(k("c"), listPos{marker: "mc"}) // evicts b, the least recently used
	if _, ok := c.get(k("b")); ok {
		t.Error("b survived eviction")
	}
	if pos, ok := c.get(k("c")); !ok || pos.marker != "mc" {
		t.Errorf("get(c) = %+v, %v", pos, ok)
	}
	if _, ok := c.get(markerKey{"p/", "/", "a"}); ok {
		t.Error("an entry of the flat listing answered for the delimited one")
	}
	c.remove(k("a"))
	if _, ok := c.get(k("a")); ok {
		t.Error("a survived remove")
	}

	short := newMarkerCache(10, time.Nanosecond)
	short.put(k("a"), listPos{marker: "ma"})
	time.Sleep(time.Millisecond) // the behaviour under test: let the 1ns TTL pass
	if _, ok := short.get(k("a")); ok {
		t.Error("an expired entry was returned")
	}
	c.clear()
	if _, ok := c.get(k("c")); ok || c.order.Len() != 0 {
		t.Error("clear left entries")
	}
}
