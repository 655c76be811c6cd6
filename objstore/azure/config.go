package azure

import (
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/lancectx/lancectx/objstore"
)

// Limits of the Blob batch API and this package's defaults.
const (
	// MaxBatchDeleteLimit is the most sub-requests one Blob batch request may carry.
	MaxBatchDeleteLimit = 256
	// DefaultDeleteConcurrency bounds the batch requests one DeleteBatch has in flight.
	DefaultDeleteConcurrency = 4
)

// Environment variables ConfigFromURI falls back to; the first four are the Azure CLI's.
const (
	EnvAccount          = "AZURE_STORAGE_ACCOUNT"
	EnvKey              = "AZURE_STORAGE_KEY"
	EnvConnectionString = "AZURE_STORAGE_CONNECTION_STRING"
	EnvSASToken         = "AZURE_STORAGE_SAS_TOKEN"
	EnvEndpoint         = "LANCECTX_AZURE_ENDPOINT"
)

// Config says where a Store lives and how it authenticates. Credentials are tried in
// this order: ConnectionString, AccountName+AccountKey, SASToken, and otherwise (or when
// UseDefaultCredential is set) azidentity's default chain: environment, workload
// identity, managed identity, Azure CLI, ...
type Config struct {
	// Container is the container (ADLS Gen2: file system) holding the store.
	Container string
	// Prefix is the key prefix inside the container, without leading or trailing "/";
	// key "k" is blob "Prefix/k".
	Prefix string
	// AccountName is the storage account; with it alone the endpoint is
	// https://ACCOUNT.blob.core.windows.net.
	AccountName string
	// AccountKey is a shared key of the account (base64, as the portal shows it).
	AccountKey string
	// ConnectionString is an Azure Storage connection string; it names the account,
	// the credential and possibly the endpoint.
	ConnectionString string
	// SASToken is a container (or account) SAS query string, with or without the "?".
	// It needs read, write, delete and list rights; Copy also needs them on the source.
	SASToken string
	// Endpoint is the account's blob endpoint URL, for Azurite
	// (http://127.0.0.1:10000/devstoreaccount1), sovereign clouds or private endpoints.
	// The ADLS Gen2 dfs endpoint is not accepted here: give the blob endpoint.
	Endpoint string
	// UseDefaultCredential authenticates with azidentity.NewDefaultAzureCredential even
	// when a key, SAS or connection string is set.
	UseDefaultCredential bool
	// MaxBatchDelete is the most keys one batch request deletes: default and maximum 256.
	MaxBatchDelete int
	// DeleteConcurrency bounds the batch requests DeleteBatch runs at once: default 4.
	DeleteConcurrency int
	// HTTPClient, when set, sends every request (tests count and fault requests with it).
	HTTPClient *http.Client
}

// String prints the configuration with secrets masked, for start-up logs.
func (c Config) String() string {
	mask := func(s string) string {
		if s == "" {
			return `""`
		}
		return "***"
	}
	return fmt.Sprintf("azure{container=%q prefix=%q account=%q endpoint=%q key=%s sas=%s connection_string=%s default_credential=%v max_batch_delete=%d delete_concurrency=%d}",
		c.Container, c.Prefix, c.AccountName, c.Endpoint, mask(c.AccountKey), mask(c.SASToken),
		mask(c.ConnectionString), c.UseDefaultCredential, c.MaxBatchDelete, c.DeleteConcurrency)
}

// ConfigFromURI parses a store URI and fills what it does not say from the environment
// (AZURE_STORAGE_ACCOUNT, AZURE_STORAGE_KEY, AZURE_STORAGE_CONNECTION_STRING,
// AZURE_STORAGE_SAS_TOKEN, LANCECTX_AZURE_ENDPOINT). Accepted forms:
//
//	az://CONTAINER/PREFIX
//	azure://CONTAINER/PREFIX
//	abfs://CONTAINER@ACCOUNT.dfs.core.windows.net/PREFIX
//	abfss://CONTAINER@ACCOUNT.dfs.core.windows.net/PREFIX
//
// An abfs(s) URI names the account's ADLS Gen2 (dfs) endpoint; the store talks to the
// blob endpoint of the same account (ACCOUNT.blob.SUFFIX, always https), which serves
// hierarchical-namespace accounts too. With no key, SAS or connection string found,
// UseDefaultCredential is set.
func ConfigFromURI(uri string) (Config, error) { return configFromURI(uri, os.Getenv) }

func configFromURI(uri string, getenv func(string) string) (Config, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return Config{}, fmt.Errorf("objstore/azure: parse %q: %w", uri, err)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return Config{}, fmt.Errorf("objstore/azure: parse %q: query and fragment are not supported", uri)
	}
	var c Config
	switch scheme := strings.ToLower(u.Scheme); scheme {
	case "az", "azure":
		if u.User != nil {
			return Config{}, fmt.Errorf("objstore/azure: parse %q: want %s://CONTAINER/PREFIX", uri, scheme)
		}
		c.Container = u.Host
	case "abfs", "abfss":
		if u.User == nil || u.User.Username() == "" {
			return Config{}, fmt.Errorf("objstore/azure: parse %q: want %s://CONTAINER@ACCOUNT.dfs.core.windows.net/PREFIX", uri, scheme)
		}
		if _, hasPassword := u.User.Password(); hasPassword {
			return Config{}, fmt.Errorf("objstore/azure: parse %q: a password in the URI is not supported", uri)
		}
		c.Container = u.User.Username()
		host := strings.ToLower(u.Hostname())
		account, suffix, ok := strings.Cut(host, ".")
		service, suffix, ok2 := strings.Cut(suffix, ".")
		if !ok || !ok2 || account == "" || suffix == "" || service != "dfs" && service != "blob" || u.Port() != "" {
			return Config{}, fmt.Errorf("objstore/azure: parse %q: host %q is not ACCOUNT.dfs.SUFFIX", uri, u.Host)
		}
		c.AccountName = account
		c.Endpoint = "https://" + account + ".blob." + suffix
	default:
		return Config{}, fmt.Errorf("objstore/azure: parse %q: scheme %q is not az, azure, abfs or abfss", uri, u.Scheme)
	}
	if c.Container == "" {
		return Config{}, fmt.Errorf("objstore/azure: parse %q: no container", uri)
	}
	c.Prefix = strings.Trim(u.Path, "/")
	if c.Prefix != "" {
		if err := objstore.ValidateKey(c.Prefix); err != nil {
			return Config{}, fmt.Errorf("objstore/azure: parse %q: bad prefix: %w", uri, err)
		}
	}
	if c.AccountName == "" {
		c.AccountName = getenv(EnvAccount)
	}
	if c.Endpoint == "" {
		c.Endpoint = getenv(EnvEndpoint)
	}
	c.AccountKey = getenv(EnvKey)
	c.ConnectionString = getenv(EnvConnectionString)
	c.SASToken = getenv(EnvSASToken)
	c.UseDefaultCredential = c.AccountKey == "" && c.ConnectionString == "" && c.SASToken == ""
	return c, nil
}
