package api

import (
	_ "embed"
	"slices"
)

//go:embed openapi.json
var openapiDoc []byte

// OpenAPI returns the OpenAPI 3 document (JSON) of the worker routes (Routes) and the
// master routes (MasterRoutes). The worker serves it as it is; the returned slice is a
// copy the caller may keep.
func OpenAPI() []byte {
	return slices.Clone(openapiDoc)
}

// Route is one method and path pattern of the worker, in the {param} syntax shared by
// OpenAPI and net/http.ServeMux.
type Route struct {
	Method string
	Path   string
}

// Routes lists every route of the worker API, the ones the OpenAPI document
// describes. A test of this package keeps the two equal; the worker's tests can check
// that its mux serves each of them.
func Routes() []Route {
	return []Route{
		{"POST", "/api/v1/rollouts"},
		{"GET", "/api/v1/rollouts"},
		{"GET", "/api/v1/rollouts/{name}"},
		{"DELETE", "/api/v1/rollouts/{name}"},
		{"POST", "/api/v1/rollouts/{name}/records"},
		{"GET", "/api/v1/rollouts/{name}/records"},
		{"GET", "/api/v1/rollouts/{name}/records/{id}"},
		{"GET", "/api/v1/rollouts/{name}/records/{id}/blob"},
		{"GET", "/api/v1/rollouts/{name}/arrow"},
		{"POST", "/api/v1/internal/merge-wal/{name}"},
		{"POST", "/api/v1/generic"},
		{"GET", "/api/v1/generic"},
		{"GET", "/api/v1/generic/{name}"},
		{"DELETE", "/api/v1/generic/{name}"},
		{"POST", "/api/v1/generic/{name}/rows"},
		{"GET", "/api/v1/generic/{name}/rows"},
		{"GET", "/api/v1/generic/{name}/rows/{id}"},
		{"POST", "/api/v1/generic/{name}/batch-get"},
		{"POST", "/api/v1/generic/{name}/flush"},
		{"POST", "/api/v1/generic/{name}/merge-wal"},
		{"POST", "/api/v1/datagen"},
		{"GET", "/api/v1/datagen"},
		{"GET", "/api/v1/datagen/{name}"},
		{"DELETE", "/api/v1/datagen/{name}"},
		{"POST", "/api/v1/datagen/{name}/events"},
		{"GET", "/api/v1/datagen/{name}/items/{item_id}"},
		{"GET", "/api/v1/datagen/{name}/items/{item_id}/failures"},
		{"GET", "/api/v1/datagen/{name}/items/{item_id}/events"},
		{"GET", "/api/v1/datagen/{name}/overview"},
		{"GET", "/api/v1/datagen/{name}/root-status"},
		{"GET", "/api/v1/datagen/{name}/roots/{root_item_id}/events"},
		{"GET", "/api/v1/datagen/{name}/blobs/{event_id}"},
		{"GET", "/api/v1/health"},
		{"GET", "/metrics"},
		{"GET", "/api/v1/openapi.json"},
		{"POST", "/api/v1/contexts"},
		{"GET", "/api/v1/contexts"},
		{"GET", "/api/v1/contexts/{name}"},
		{"DELETE", "/api/v1/contexts/{name}"},
		{"POST", "/api/v1/contexts/{name}/records"},
		{"PUT", "/api/v1/contexts/{name}/records"},
		{"PUT", "/api/v1/contexts/{name}/records/batch"},
		{"PATCH", "/api/v1/contexts/{name}/records"},
		{"GET", "/api/v1/contexts/{name}/records"},
		{"DELETE", "/api/v1/contexts/{name}/records"},
		{"GET", "/api/v1/contexts/{name}/records/by-external-id"},
		{"GET", "/api/v1/contexts/{name}/records/related"},
		{"GET", "/api/v1/contexts/{name}/records/{id}"},
		{"DELETE", "/api/v1/contexts/{name}/records/{id}"},
		{"GET", "/api/v1/contexts/{name}/records/{id}/payload"},
		{"POST", "/api/v1/contexts/{name}/search"},
		{"POST", "/api/v1/contexts/{name}/retrieve"},
		{"GET", "/api/v1/contexts/{name}/version"},
		{"POST", "/api/v1/contexts/{name}/checkout"},
		{"POST", "/api/v1/contexts/{name}/compact"},
		{"GET", "/api/v1/contexts/{name}/compact/stats"},
	}
}

// MasterRoutes lists every route of the master API (`lancectx master`; `lancectx
// serve` serves them beside the worker's, with one /api/v1/health and /metrics for
// both), the ones the OpenAPI document describes with the tag "master". A test of this
// package keeps the two equal; the master's tests check that it serves each of them.
func MasterRoutes() []Route {
	return []Route{
		{"GET", "/api/v1/experiments"},
		{"GET", "/api/v1/experiments/{name}"},
		{"POST", "/api/v1/experiments/{name}/rescan"},
		{"POST", "/api/v1/experiments/{name}/optimize"},
		{"POST", "/api/v1/experiments/{name}/query"},
		{"GET", "/api/v1/experiments/{name}/records"},
		{"GET", "/api/v1/experiments/{name}/records/{id}"},
		{"GET", "/api/v1/experiments/{name}/records/{id}/blob"},
		{"GET", "/api/v1/tasks"},
		{"POST", "/api/v1/tasks"},
		{"GET", "/api/v1/tasks/{id}"},
		{"GET", "/api/v1/cluster"},
		{"POST", "/api/v1/tasks/{id}/cancel"},
		{"POST", "/api/v1/tasks/{id}/retry"},
		{"GET", "/api/v1/experiments/{name}/versions"},
		{"GET", "/api/v1/experiments/{name}/fragments"},
		{"GET", "/api/v1/health"},
		{"GET", "/metrics"},
		{"GET", "/api/v1/openapi.json"},
	}
}
