package s3

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/lancectx/lancectx/objstore"
)

func TestConfigFromURI(t *testing.T) {
	cases := map[string]struct {
		uri     string
		env     map[string]string
		want    Config
		wantErr string
	}{
		"bucket only": {
			uri:  "s3://my-bucket",
			want: Config{Bucket: "my-bucket"},
		},
		"bucket and prefix, slashes trimmed": {
			uri:  "s3://my-bucket/team/lancectx/",
			want: Config{Bucket: "my-bucket", Prefix: "team/lancectx"},
		},
		"upper-case scheme": {
			uri:  "S3://my-bucket/p",
			want: Config{Bucket: "my-bucket", Prefix: "p"},
		},
		"every query parameter": {
			uri:  "s3://b1/p?region=eu-west-1&endpoint=http://minio:9000&path_style=true&profile=ci",
			want: Config{Bucket: "b1", Prefix: "p", Region: "eu-west-1", Endpoint: "http://minio:9000", PathStyle: true, Profile: "ci"},
		},
		"R2 style": {
			uri: "s3://my-bucket/lancectx?endpoint=https://acct.r2.cloudflarestorage.com&region=auto&path_style=1",
			want: Config{Bucket: "my-bucket", Prefix: "lancectx", Region: "auto",
				Endpoint: "https://acct.r2.cloudflarestorage.com", PathStyle: true},
		},
		"LANCECTX environment fills what the URI leaves out": {
			uri: "s3://b1",
			env: map[string]string{EnvRegion: "us-west-2", EnvEndpoint: "http://localhost:9000", EnvPathStyle: "true",
				"AWS_ENDPOINT_URL_S3": "http://ignored:1"},
			want: Config{Bucket: "b1", Region: "us-west-2", Endpoint: "http://localhost:9000", PathStyle: true},
		},
		"the URI beats the environment": {
			uri:  "s3://b1?region=eu-central-1&endpoint=https://s3.example.com&path_style=false",
			env:  map[string]string{EnvRegion: "us-west-2", EnvEndpoint: "http://localhost:9000", EnvPathStyle: "true"},
			want: Config{Bucket: "b1", Region: "eu-central-1", Endpoint: "https://s3.example.com"},
		},
		"AWS_ENDPOINT_URL_S3 before AWS_ENDPOINT_URL": {
			uri:  "s3://b1",
			env:  map[string]string{"AWS_ENDPOINT_URL_S3": "http://s3only:9000", "AWS_ENDPOINT_URL": "http://all:9000"},
			want: Config{Bucket: "b1", Endpoint: "http://s3only:9000"},
		},
		"AWS_ENDPOINT_URL alone": {
			uri:  "s3://b1",
			env:  map[string]string{"AWS_ENDPOINT_URL": "http://all:9000"},
			want: Config{Bucket: "b1", Endpoint: "http://all:9000"},
		},
		"AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": {
			uri:  "s3://b1",
			env:  map[string]string{"AWS_ENDPOINT_URL": "http://all:9000", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS": "true"},
			want: Config{Bucket: "b1"},
		},
		"wrong scheme":            {uri: "gs://b1/p", wantErr: "scheme"},
		"no bucket":               {uri: "s3:///p", wantErr: "want s3://bucket/prefix"},
		"port":                    {uri: "s3://b1:9000/p", wantErr: "want s3://bucket/prefix"},
		"credentials in the URI":  {uri: "s3://key:secret@b1/p", wantErr: "want s3://bucket/prefix"},
		"invalid prefix":          {uri: "s3://b1/a//b", wantErr: "prefix"},
		"dot-dot prefix":          {uri: "s3://b1/a/../b", wantErr: "prefix"},
		"unknown parameter":       {uri: "s3://b1/p?regoin=x", wantErr: `unknown parameter "regoin"`},
		"repeated parameter":      {uri: "s3://b1/p?region=a&region=b", wantErr: "2 times"},
		"bad path_style":          {uri: "s3://b1/p?path_style=maybe", wantErr: "path_style"},
		"bad env path style":      {uri: "s3://b1", env: map[string]string{EnvPathStyle: "yes please"}, wantErr: EnvPathStyle},
		"endpoint without scheme": {uri: "s3://b1?endpoint=minio:9000", wantErr: "endpoint"},
		"not a URI":               {uri: "s3://b1/%zz", wantErr: "parse"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := configFromURI(c.uri, func(k string) string { return c.env[k] })
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("ConfigFromURI(%q) = %+v, %v; want an error mentioning %q", c.uri, got, err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ConfigFromURI(%q): %v", c.uri, err)
			}
			if got != c.want {
				t.Errorf("ConfigFromURI(%q) =\n%v\nwant\n%v", c.uri, got, c.want)
			}
		})
	}
}

func TestConfigFromURIReadsProcessEnvironment(t *testing.T) {
	t.Setenv(EnvRegion, "ap-south-1")
	t.Setenv(EnvEndpoint, "")
	t.Setenv("AWS_ENDPOINT_URL_S3", "")
	t.Setenv("AWS_ENDPOINT_URL", "")
	t.Setenv(EnvPathStyle, "")
	cfg, err := ConfigFromURI("s3://b1/p")
	if err != nil || cfg.Region != "ap-south-1" {
		t.Errorf("ConfigFromURI = %v, %v; want region from %s", cfg, err, EnvRegion)
	}
}

func TestNewValidatesConfig(t *testing.T) {
	ctx := context.Background()
	ok := Config{Bucket: "b1", Region: "us-east-1", AccessKeyID: "a", SecretAccessKey: "s"}
	cases := map[string]struct {
		mod     func(*Config)
		wantErr string
	}{
		"no bucket":                   {func(c *Config) { c.Bucket = "" }, "bucket is required"},
		"invalid prefix":              {func(c *Config) { c.Prefix = "a/../b" }, "prefix"},
		"bad endpoint":                {func(c *Config) { c.Endpoint = "ftp://x" }, "endpoint"},
		"key id without secret":       {func(c *Config) { c.SecretAccessKey = "" }, "both"},
		"MaxBatchDelete above 1000":   {func(c *Config) { c.MaxBatchDelete = 1001 }, "MaxBatchDelete"},
		"negative MaxBatchDelete":     {func(c *Config) { c.MaxBatchDelete = -1 }, "MaxBatchDelete"},
		"negative DeleteConcurrency":  {func(c *Config) { c.DeleteConcurrency = -1 }, "DeleteConcurrency"},
		"PartSize below S3's minimum": {func(c *Config) { c.PartSize = 1 << 20 }, "PartSize"},
		"negative UploadConcurrency":  {func(c *Config) { c.UploadConcurrency = -2 }, "UploadConcurrency"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := ok
			c.mod(&cfg)
			if _, err := New(ctx, cfg); err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("New(%v) = %v, want an error mentioning %q", cfg, err, c.wantErr)
			}
		})
	}

	s, err := New(ctx, Config{Bucket: "b1", Prefix: "/a/b/", Region: "us-east-1", AccessKeyID: "a", SecretAccessKey: "s", MaxBatchDelete: 250})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	defer s.Close()
	if s.root != "a/b/" || s.MaxBatchDelete() != 250 || s.cfg.DeleteConcurrency != DefaultDeleteConcurrency ||
		s.cfg.PartSize != DefaultPartSize || s.cfg.UploadConcurrency != DefaultUploadConcurrency {
		t.Errorf("defaults: root %q, config %v", s.root, s.cfg)
	}
	if _, err := s.Get(ctx, "../x"); !errors.Is(err, objstore.ErrInvalidKey) {
		t.Errorf("Get(../x) = %v, want ErrInvalidKey before any request", err)
	}
}

func TestConfigStringMasksSecrets(t *testing.T) {
	c := Config{Bucket: "b1", AccessKeyID: "AKIDVISIBLE", SecretAccessKey: "very-secret", SessionToken: "token-secret"}
	s := c.String()
	if strings.Contains(s, "very-secret") || strings.Contains(s, "token-secret") || !strings.Contains(s, "AKIDVISIBLE") {
		t.Errorf("Config.String() = %s: want secrets masked, the key id shown", s)
	}
}
