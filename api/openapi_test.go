package api

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
)

// openAPIDoc is the part of an OpenAPI 3 document the tests look at.
type openAPIDoc struct {
	OpenAPI    string                                `json:"openapi"`
	Info       map[string]any                        `json:"info"`
	Paths      map[string]map[string]json.RawMessage `json:"paths"`
	Components struct {
		Schemas    map[string]SchemaDoc `json:"schemas"`
		Parameters map[string]any       `json:"parameters"`
		Responses  map[string]any       `json:"responses"`
	} `json:"components"`
}

// SchemaDoc is an OpenAPI schema object, as far as the tests need it.
type SchemaDoc struct {
	Properties map[string]json.RawMessage `json:"properties"`
	Required   []string                   `json:"required"`
}

func parseOpenAPI(t *testing.T) openAPIDoc {
	t.Helper()
	var doc openAPIDoc
	if err := json.Unmarshal(OpenAPI(), &doc); err != nil {
		t.Fatalf("openapi.json does not parse: %v", err)
	}
	return doc
}

var httpMethods = []string{"get", "put", "post", "delete", "patch", "head", "options", "trace"}

func TestOpenAPIListsEveryRouteAndNothingElse(t *testing.T) {
	doc := parseOpenAPI(t)
	if doc.OpenAPI != "3.1.0" {
		t.Fatalf("openapi = %q, want 3.1.0", doc.OpenAPI)
	}
	if doc.Info["title"] == nil || doc.Info["version"] == nil {
		t.Fatal("info lacks title or version")
	}
	var inDoc []string
	opIDs := map[string]bool{}
	for path, item := range doc.Paths {
		for key, raw := range item {
			if key == "parameters" {
				continue
			}
			if !slices.Contains(httpMethods, key) {
				t.Errorf("%s: unexpected key %q", path, key)
				continue
			}
			inDoc = append(inDoc, strings.ToUpper(key)+" "+path)
			var op struct {
				OperationID string                     `json:"operationId"`
				Tags        []string                   `json:"tags"`
				Responses   map[string]json.RawMessage `json:"responses"`
			}
			if err := json.Unmarshal(raw, &op); err != nil {
				t.Fatalf("%s %s: %v", key, path, err)
			}
			if op.OperationID == "" || opIDs[op.OperationID] {
				t.Errorf("%s %s: operationId %q missing or repeated", key, path, op.OperationID)
			}
			opIDs[op.OperationID] = true
			if len(op.Responses) == 0 {
				t.Errorf("%s %s: no responses", key, path)
			}
			// Every route refuses unknown query parameters (/metrics excepted).
			if _, ok := op.Responses["400"]; !ok && path != "/metrics" {
				t.Errorf("%s %s: no 400 response", key, path)
			}
			if len(op.Tags) == 0 {
				t.Errorf("%s %s: no tags", key, path)
			}
			for _, tag := range op.Tags {
				if tag != "worker" && tag != "master" {
					t.Errorf("%s %s: unknown tag %q", key, path, tag)
				}
			}
		}
	}
	var want []string
	for _, r := range append(Routes(), MasterRoutes()...) {
		if k := r.Method + " " + r.Path; !slices.Contains(want, k) {
			want = append(want, k) // health and metrics are both processes' routes
		}
	}
	sort.Strings(inDoc)
	sort.Strings(want)
	if !slices.Equal(inDoc, want) {
		t.Fatalf("document routes:\n%s\nRoutes():\n%s", strings.Join(inDoc, "\n"), strings.Join(want, "\n"))
	}
}

func TestOpenAPIReferencesResolve(t *testing.T) {
	var root any
	if err := json.Unmarshal(OpenAPI(), &root); err != nil {
		t.Fatal(err)
	}
	var walk func(v any)
	n := 0
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				n++
				if !strings.HasPrefix(ref, "#/") {
					t.Errorf("non-local $ref %q", ref)
					return
				}
				var cur any = root
				for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
					m, ok := cur.(map[string]any)
					if !ok || m[part] == nil {
						t.Errorf("$ref %q does not resolve", ref)
						return
					}
					cur = m[part]
				}
			}
			for _, c := range v {
				walk(c)
			}
		case []any:
			for _, c := range v {
				walk(c)
			}
		}
	}
	walk(root)
	if n < 20 {
		t.Fatalf("only %d $refs found; the walk is broken", n)
	}
}

// jsonFields lists the JSON names of a struct type's fields, those of embedded
// structs included (encoding/json flattens them).
func jsonFields(t reflect.Type) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			out = append(out, jsonFields(f.Type)...)
			continue
		}
		if name != "" && name != "-" {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// checkSchemaMatches fails t when the document's schema named name does not have
// exactly the JSON fields of Go type typ.
func checkSchemaMatches(t *testing.T, name string, typ reflect.Type) {
	t.Helper()
	doc := parseOpenAPI(t)
	s, ok := doc.Components.Schemas[name]
	if !ok {
		t.Fatalf("schema %s missing", name)
	}
	var props []string
	for p := range s.Properties {
		props = append(props, p)
	}
	sort.Strings(props)
	if want := jsonFields(typ); !slices.Equal(props, want) {
		t.Errorf("schema %s properties %v; Go type %v has %v", name, props, typ, want)
	}
	for _, r := range s.Required {
		if !slices.Contains(props, r) {
			t.Errorf("schema %s requires unknown property %q", name, r)
		}
	}
}

func TestOpenAPISchemasMatchTheGoTypes(t *testing.T) {
	cases := map[string]reflect.Type{
		"CreateRolloutStoreRequest": reflect.TypeFor[CreateRolloutStoreRequest](),
		"StoreInfo":                 reflect.TypeFor[StoreInfo](),
		"StoreSummary":              reflect.TypeFor[StoreSummary](),
		"ListStoresResponse":        reflect.TypeFor[ListStoresResponse](),
		"AppendResponse":            reflect.TypeFor[AppendResponse](),
		"GetRecordResponse":         reflect.TypeFor[GetRecordResponse[struct{}]](),
		"ListRecordsResponse":       reflect.TypeFor[ListRecordsResponse[struct{}]](),
		"MergeWALResponse":          reflect.TypeFor[MergeWALResponse](),
		"HealthResponse":            reflect.TypeFor[HealthResponse](),
		"HealthCheck":               reflect.TypeFor[HealthCheck](),
		"Error":                     reflect.TypeFor[ErrorResponse](),
		"MasterHealthResponse":      reflect.TypeFor[MasterHealthResponse](),
		"ExperimentSummary":         reflect.TypeFor[ExperimentSummary](),
		"ExperimentListResponse":    reflect.TypeFor[ExperimentListResponse](),
		"ExperimentDetail":          reflect.TypeFor[ExperimentDetail](),
		"TaskRequest":               reflect.TypeFor[TaskRequest](),
		"Task":                      reflect.TypeFor[Task](),
		"TaskListResponse":          reflect.TypeFor[TaskListResponse](),
		"MasterInfo":                reflect.TypeFor[MasterInfo](),
		"WorkerInfo":                reflect.TypeFor[WorkerInfo](),
		"StatsInfo":                 reflect.TypeFor[StatsInfo](),
		"StatsMaintenanceInfo":      reflect.TypeFor[StatsMaintenanceInfo](),
		"ClusterResponse":           reflect.TypeFor[ClusterResponse](),

		// The routes the web UI needs beyond the reference's.
		"VersionInfo":                 reflect.TypeFor[VersionInfo](),
		"ExperimentVersionsResponse":  reflect.TypeFor[ExperimentVersionsResponse](),
		"FragmentInfo":                reflect.TypeFor[FragmentInfo](),
		"ExperimentFragmentsResponse": reflect.TypeFor[ExperimentFragmentsResponse](),

		"GenericColumn":             reflect.TypeFor[GenericColumn](),
		"GenericSchema":             reflect.TypeFor[GenericSchema](),
		"CreateGenericStoreRequest": reflect.TypeFor[CreateGenericStoreRequest](),
		"GenericStoreInfo":          reflect.TypeFor[GenericStoreInfo](),
		"GenericAppendResponse":     reflect.TypeFor[GenericAppendResponse](),
		"ListRowsResponse":          reflect.TypeFor[ListRowsResponse[struct{}]](),
		"GetRowsRequest":            reflect.TypeFor[GetRowsRequest](),
		"GetRowsResponse":           reflect.TypeFor[GetRowsResponse[struct{}]](),
		"QueryRequest":              reflect.TypeFor[QueryRequest](),
		"ExperimentRecordsResponse": reflect.TypeFor[ExperimentRecordsResponse[struct{}]](),
		"QueryResponse":             reflect.TypeFor[QueryResponse](),
	}
	for name, typ := range cases {
		t.Run(name, func(t *testing.T) { checkSchemaMatches(t, name, typ) })
	}
}

func TestOpenAPIReturnsACopy(t *testing.T) {
	a := OpenAPI()
	a[0] = 'X'
	if OpenAPI()[0] == 'X' {
		t.Fatal("OpenAPI returned the embedded bytes")
	}
}

// TestOpenAPIIs31: the document is OpenAPI 3.1, whose schemas are JSON Schema 2020-12:
// nullability is a "null" member of the type (3.0's `nullable` keyword is gone), and
// every type names JSON Schema's types.
func TestOpenAPIIs31(t *testing.T) {
	var doc any
	if err := json.Unmarshal(OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	types := []string{"null", "boolean", "object", "array", "number", "string", "integer"}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch x := v.(type) {
		case map[string]any:
			if _, ok := x["nullable"]; ok && !strings.HasSuffix(path, "/properties") {
				t.Errorf("%s: `nullable` is OpenAPI 3.0; 3.1 writes a \"null\" type", path)
			}
			if ty, ok := x["type"]; ok && !strings.HasSuffix(path, "/properties") {
				var names []any
				switch tt := ty.(type) {
				case string:
					names = []any{tt}
				case []any:
					names = tt
				default:
					t.Errorf("%s: type %v", path, ty)
				}
				for _, n := range names {
					if s, ok := n.(string); !ok || !slices.Contains(types, s) {
						t.Errorf("%s: type %v is not a JSON Schema type", path, n)
					}
				}
			}
			for k, e := range x {
				walk(path+"/"+k, e)
			}
		case []any:
			for i, e := range x {
				walk(fmt.Sprintf("%s/%d", path, i), e)
			}
		}
	}
	walk("#", doc)
}
