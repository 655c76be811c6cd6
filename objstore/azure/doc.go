// Package azure is the Azure Blob Storage backend of objstore, for plain storage
// accounts and ADLS Gen2 (hierarchical-namespace) accounts alike: it always talks to the
// account's blob endpoint, which serves both.
//
// # Configuration
//
// A Store is made from a Config, written by hand or parsed from a URI by ConfigFromURI,
// which fills credentials from the environment.
//
// Account key (shared key):
//
//	s, err := azure.New(ctx, azure.Config{
//		Container:   "rollouts",
//		Prefix:      "prod",
//		AccountName: "myaccount",
//		AccountKey:  os.Getenv("AZURE_STORAGE_KEY"),
//	})
//
// SAS token (a container SAS with read, add, create, write, delete and list rights):
//
//	azure.Config{Container: "rollouts", AccountName: "myaccount", SASToken: "sv=...&sig=..."}
//
// Connection string (it names the account, the credential and the endpoint; Endpoint and
// AccountName are then ignored):
//
//	azure.Config{Container: "rollouts", ConnectionString: os.Getenv("AZURE_STORAGE_CONNECTION_STRING")}
//
// Default credential chain (azidentity.NewDefaultAzureCredential: environment service
// principal, workload identity, managed identity, Azure CLI, ...), used whenever no key,
// SAS or connection string is given; the identity needs the "Storage Blob Data
// Contributor" role on the container:
//
//	azure.Config{Container: "rollouts", AccountName: "myaccount"}
//
// Azurite, sovereign clouds and custom domains set Endpoint to the blob endpoint:
//
//	azure.Config{Container: "test", AccountName: "devstoreaccount1", AccountKey: azuritetest.AccountKey,
//		Endpoint: "http://127.0.0.1:10000/devstoreaccount1"}
//
// URIs, with the environment variables AZURE_STORAGE_ACCOUNT, AZURE_STORAGE_KEY,
// AZURE_STORAGE_CONNECTION_STRING, AZURE_STORAGE_SAS_TOKEN and LANCECTX_AZURE_ENDPOINT
// filling in the rest:
//
//	az://rollouts/prod                                   container rollouts, prefix prod
//	azure://rollouts/prod                                the same
//	abfss://rollouts@myaccount.dfs.core.windows.net/prod ADLS Gen2: the same container (file
//	                                                     system) through https://myaccount.blob.core.windows.net
//
//	cfg, err := azure.ConfigFromURI("abfss://rollouts@myaccount.dfs.core.windows.net/prod")
//	s, err := azure.New(ctx, cfg)
//
// # Behaviour
//
// PutIfAbsent and Copy use If-None-Match: * on the destination, so the service picks one
// winner. DeleteBatch uses the Blob batch API (256 deletes per request, requests in
// parallel). List emulates StartAfter on top of Azure's opaque continuation markers with
// a small cache, so sequential paging costs one request per page. The SDK's retries are
// off: errors wrap objstore.ErrTransient / ErrThrottled for the one retry layer above all
// backends, and the service's answer stays reachable as *ServiceError.
//
// On hierarchical-namespace accounts directories are real: the blob endpoint shows them
// as empty blobs with hdi_isfolder=true metadata, which this package never returns as
// objects. Deleting a file's last blob leaves its directory behind, so List with
// Delimiter "/" can still return that directory as a common prefix, and Put cannot
// create a blob where a directory of that name exists.
package azure
