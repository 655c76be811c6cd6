package s3

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/lancectx/lancectx/objstore"
)

// Limits and defaults of the knobs in Config.
const (
	// DefaultMaxBatchDelete is S3's own cap on the keys of one DeleteObjects request.
	DefaultMaxBatchDelete = 1000
	// DefaultDeleteConcurrency bounds the DeleteObjects requests of one DeleteBatch.
	DefaultDeleteConcurrency = 4
	// DefaultPartSize is the single-PutObject threshold and the multipart part size.
	DefaultPartSize = 8 << 20
	// MinPartSize is S3's smallest allowed part (except the last one).
	MinPartSize = 5 << 20
	// MaxPartSize is S3's largest part, which is also the largest single PutObject.
	MaxPartSize = 5 << 30
	// DefaultUploadConcurrency bounds the parts one Put has in flight.
	DefaultUploadConcurrency = 4
	// MaxConditionalPutSize caps a PutIfAbsent body, which is buffered whole: such
	// bodies are manifests and tags, and a conditional create is one PutObject.
	MaxConditionalPutSize = 256 << 20
)

// Environment variables ConfigFromURI falls back to when the URI does not say.
const (
	EnvEndpoint  = "LANCECTX_S3_ENDPOINT"
	EnvRegion    = "LANCECTX_S3_REGION"
	EnvPathStyle = "LANCECTX_S3_PATH_STYLE"
)

// Config says where a Store lives and how to reach it. Only Bucket is required; every
// zero value below means the documented default.
type Config struct {
	// Bucket is the bucket name.
	Bucket string
	// Prefix roots the store in a "folder" of the bucket: key k is object Prefix+"/"+k.
	// Leading and trailing slashes are ignored; empty is the bucket root. It must be a
	// valid key (objstore.ValidateKey), so "a//b" or "../x" are refused.
	Prefix string
	// Region is the bucket's region ("eu-west-1"; "auto" for Cloudflare R2). Empty: the
	// SDK's chain (AWS_REGION, AWS_DEFAULT_REGION, the profile's region), and failing
	// that "us-east-1". A wrong region for an AWS bucket fails every request (301/400).
	Region string
	// Endpoint is the base URL of an S3-compatible service, such as
	// "http://minio:9000" or "https://<account>.r2.cloudflarestorage.com". Empty: the
	// SDK's resolution, which honours AWS_ENDPOINT_URL_S3 and AWS_ENDPOINT_URL and
	// otherwise talks to AWS.
	Endpoint string
	// PathStyle addresses objects as endpoint/bucket/key instead of
	// bucket.endpoint/key. MinIO and most self-hosted services need it; AWS and R2 do not.
	PathStyle bool
	// AccessKeyID and SecretAccessKey, plus SessionToken for temporary credentials,
	// are static credentials. Empty: the SDK's default chain, in order the environment
	// (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN), the shared
	// config and credentials files (the profile below or AWS_PROFILE, SSO included),
	// web identity (EKS IRSA), and the ECS or EC2 (IMDS) instance role.
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string
	// Profile selects a profile of the shared config files, like AWS_PROFILE.
	Profile string
	// HTTPClient sends the S3 requests. Nil: the SDK's client (which applies
	// AWS_CA_BUNDLE) with a pool that keeps enough idle connections for the parallel
	// deletes and part uploads. A client given here decides TLS alone: AWS_CA_BUNDLE
	// is not added to it. Close closes the idle connections of either.
	HTTPClient *http.Client
	// MaxBatchDelete caps the keys of one DeleteObjects request (0: 1000, S3's cap;
	// at most 1000). Lower it for services with a smaller cap.
	MaxBatchDelete int
	// DeleteConcurrency bounds the DeleteObjects requests one DeleteBatch has in
	// flight (0: 4).
	DeleteConcurrency int
	// PartSize is the largest body Put sends as one PutObject, and the part size of
	// the multipart upload used above it (0: 8 MiB; from 5 MiB to 5 GiB). S3 allows
	// 10,000 parts, so one Put holds at most 10,000 × PartSize (78 GiB by default).
	PartSize int64
	// UploadConcurrency bounds the parts one Put uploads at once (0: 4). A Put holds
	// up to UploadConcurrency+1 parts in memory.
	UploadConcurrency int
}

// String prints the configuration with the secret key and session token masked, so it
// can be logged at start.
func (c Config) String() string {
	mask := func(s string) string {
		if s == "" {
			return ""
		}
		return "****"
	}
	return fmt.Sprintf("s3.Config{Bucket:%q Prefix:%q Region:%q Endpoint:%q PathStyle:%t AccessKeyID:%q "+
		"SecretAccessKey:%q SessionToken:%q Profile:%q MaxBatchDelete:%d DeleteConcurrency:%d "+
		"PartSize:%d UploadConcurrency:%d}",
		c.Bucket, c.Prefix, c.Region, c.Endpoint, c.PathStyle, c.AccessKeyID,
		mask(c.SecretAccessKey), mask(c.SessionToken), c.Profile, c.MaxBatchDelete, c.DeleteConcurrency,
		c.PartSize, c.UploadConcurrency)
}

// withDefaults validates c and fills in the defaults; root is "" or the prefix plus "/".
func (c Config) withDefaults() (cfg Config, root string, err error) {
	if c.Bucket == "" {
		return c, "", errors.New("s3: config: bucket is required")
	}
	if p := strings.Trim(c.Prefix, "/"); p != "" {
		if err := objstore.ValidateKey(p); err != nil {
			return c, "", fmt.Errorf("s3: config: prefix: %w", err)
		}
		root = p + "/"
	}
	if c.Endpoint != "" {
		if err := checkEndpoint(c.Endpoint); err != nil {
			return c, "", err
		}
	}
	if (c.AccessKeyID == "") != (c.SecretAccessKey == "") {
		return c, "", errors.New("s3: config: set both AccessKeyID and SecretAccessKey, or neither")
	}
	switch {
	case c.MaxBatchDelete == 0:
		c.MaxBatchDelete = DefaultMaxBatchDelete
	case c.MaxBatchDelete < 0 || c.MaxBatchDelete > DefaultMaxBatchDelete:
		return c, "", fmt.Errorf("s3: config: MaxBatchDelete %d is outside 1..%d", c.MaxBatchDelete, DefaultMaxBatchDelete)
	}
	switch {
	case c.DeleteConcurrency == 0:
		c.DeleteConcurrency = DefaultDeleteConcurrency
	case c.DeleteConcurrency < 0:
		return c, "", fmt.Errorf("s3: config: DeleteConcurrency %d is negative", c.DeleteConcurrency)
	}
	switch {
	case c.PartSize == 0:
		c.PartSize = DefaultPartSize
	case c.PartSize < MinPartSize || c.PartSize > MaxPartSize:
		return c, "", fmt.Errorf("s3: config: PartSize %d is outside %d..%d", c.PartSize, MinPartSize, MaxPartSize)
	}
	switch {
	case c.UploadConcurrency == 0:
		c.UploadConcurrency = DefaultUploadConcurrency
	case c.UploadConcurrency < 0:
		return c, "", fmt.Errorf("s3: config: UploadConcurrency %d is negative", c.UploadConcurrency)
	}
	return c, root, nil
}

func checkEndpoint(ep string) error {
	u, err := url.Parse(ep)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("s3: config: endpoint %q is not an http(s)://host[:port] URL", ep)
	}
	return nil
}

// ConfigFromURI parses s3://bucket/prefix?region=R&endpoint=URL&path_style=true&profile=P.
// Query parameters override the environment: LANCECTX_S3_REGION, LANCECTX_S3_PATH_STYLE
// and, for the endpoint, LANCECTX_S3_ENDPOINT, then AWS_ENDPOINT_URL_S3, then
// AWS_ENDPOINT_URL (the last two unless AWS_IGNORE_CONFIGURED_ENDPOINT_URLS is true).
// Credentials never come from the URI: New takes them from the SDK's default chain.
// Unknown query parameters are errors, so a typo does not silently talk to AWS.
func ConfigFromURI(uri string) (Config, error) { return configFromURI(uri, os.Getenv) }

func configFromURI(uri string, getenv func(string) string) (Config, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return Config{}, fmt.Errorf("s3: parse store URI: %w", err)
	}
	if !strings.EqualFold(u.Scheme, "s3") {
		return Config{}, fmt.Errorf("s3: parse %q: scheme is not s3://", uri)
	}
	if u.Host == "" || u.User != nil || u.Port() != "" || u.Fragment != "" || u.Opaque != "" {
		return Config{}, fmt.Errorf("s3: parse %q: want s3://bucket/prefix", uri)
	}
	cfg := Config{Bucket: u.Host, Prefix: strings.Trim(u.Path, "/")}
	if cfg.Prefix != "" {
		if err := objstore.ValidateKey(cfg.Prefix); err != nil {
			return Config{}, fmt.Errorf("s3: parse %q: prefix: %w", uri, err)
		}
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return Config{}, fmt.Errorf("s3: parse %q: %w", uri, err)
	}
	var pathStyle string
	for k, vs := range q {
		if len(vs) != 1 {
			return Config{}, fmt.Errorf("s3: parse %q: %s given %d times", uri, k, len(vs))
		}
		switch v := vs[0]; k {
		case "region":
			cfg.Region = v
		case "endpoint":
			cfg.Endpoint = v
		case "path_style":
			pathStyle = v
		case "profile":
			cfg.Profile = v
		default:
			return Config{}, fmt.Errorf("s3: parse %q: unknown parameter %q (want region, endpoint, path_style, profile)", uri, k)
		}
	}
	if cfg.Region == "" {
		cfg.Region = getenv(EnvRegion)
	}
	if cfg.Endpoint == "" {
		cfg.Endpoint = getenv(EnvEndpoint)
	}
	if cfg.Endpoint == "" && !strings.EqualFold(getenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS"), "true") {
		if cfg.Endpoint = getenv("AWS_ENDPOINT_URL_S3"); cfg.Endpoint == "" {
			cfg.Endpoint = getenv("AWS_ENDPOINT_URL")
		}
	}
	if cfg.Endpoint != "" {
		if err := checkEndpoint(cfg.Endpoint); err != nil {
			return Config{}, err
		}
	}
	what := "path_style"
	if pathStyle == "" {
		pathStyle, what = getenv(EnvPathStyle), EnvPathStyle
	}
	if pathStyle != "" {
		if cfg.PathStyle, err = strconv.ParseBool(pathStyle); err != nil {
			return Config{}, fmt.Errorf("s3: %s=%q is not a boolean", what, pathStyle)
		}
	}
	return cfg, nil
}
