package api

import (
	"reflect"
	"testing"
)

// The context routes' schemas in the document have exactly the Go types' fields.
func TestOpenAPIContextSchemasMatchTheGoTypes(t *testing.T) {
	cases := map[string]reflect.Type{
		"CreateContextStoreRequest":    reflect.TypeFor[CreateContextStoreRequest](),
		"ContextStoreInfo":             reflect.TypeFor[ContextStoreInfo](),
		"ListContextStoresResponse":    reflect.TypeFor[ListContextStoresResponse](),
		"ContextStateMetadata":         reflect.TypeFor[ContextStateMetadata](),
		"ContextRelationship":          reflect.TypeFor[ContextRelationship](),
		"AddContextRecord":             reflect.TypeFor[AddContextRecord](),
		"ContextRecord":                reflect.TypeFor[ContextRecord](),
		"AddContextRecordsRequest":     reflect.TypeFor[AddContextRecordsRequest](),
		"AddContextRecordsResponse":    reflect.TypeFor[AddContextRecordsResponse](),
		"UpsertContextRecordRequest":   reflect.TypeFor[UpsertContextRecordRequest](),
		"UpsertContextRecordResponse":  reflect.TypeFor[UpsertContextRecordResponse](),
		"UpsertContextRecordsRequest":  reflect.TypeFor[UpsertContextRecordsRequest](),
		"UpsertContextResult":          reflect.TypeFor[UpsertContextResult](),
		"UpsertContextRecordsResponse": reflect.TypeFor[UpsertContextRecordsResponse](),
		"PatchContextRecordRequest":    reflect.TypeFor[PatchContextRecordRequest](),
		"PatchContextRecordResponse":   reflect.TypeFor[PatchContextRecordResponse](),
		"DeleteContextRecordsResponse": reflect.TypeFor[DeleteContextRecordsResponse](),
		"GetContextRecordResponse":     reflect.TypeFor[GetContextRecordResponse](),
		"ListContextRecordsResponse":   reflect.TypeFor[ListContextRecordsResponse](),
		"ContextFilters":               reflect.TypeFor[ContextFilters](),
		"SearchContextRequest":         reflect.TypeFor[SearchContextRequest](),
		"SearchContextResult":          reflect.TypeFor[SearchContextResult](),
		"SearchContextResponse":        reflect.TypeFor[SearchContextResponse](),
		"RetrieveContextRequest":       reflect.TypeFor[RetrieveContextRequest](),
		"RetrieveContextResult":        reflect.TypeFor[RetrieveContextResult](),
		"RetrieveContextResponse":      reflect.TypeFor[RetrieveContextResponse](),
		"ContextVersionResponse":       reflect.TypeFor[ContextVersionResponse](),
		"ContextCheckoutRequest":       reflect.TypeFor[ContextCheckoutRequest](),
		"ContextCompactRequest":        reflect.TypeFor[ContextCompactRequest](),
		"ContextCompactResponse":       reflect.TypeFor[ContextCompactResponse](),
		"ContextCompactStatsResponse":  reflect.TypeFor[ContextCompactStatsResponse](),
	}
	for name, typ := range cases {
		t.Run(name, func(t *testing.T) { checkSchemaMatches(t, name, typ) })
	}
}
