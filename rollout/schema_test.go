package rollout

import (
	"encoding/json"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lancectx/lancectx/api"
	lanceschema "github.com/lancectx/lancectx/lance/schema"
)

// The rollout schema as the reference documents it (worker-schema.md 1.3): name,
// Arrow type as arrow-go prints it, nullability, in order.
var wantColumns = []struct {
	name, typ string
	nullable  bool
}{
	{"id", "utf8", false},
	{"rollout_id", "utf8", false},
	{"problem_id", "utf8", false},
	{"dataset", "utf8", true},
	{"sequence_order", "int32", false},
	{"role", "dictionary<values=utf8, indices=int8, ordered=false>", false},
	{"created_at", "timestamp[us]", false},
	{"content", "large_utf8", true},
	{"content_type", "utf8", false},
	{"model_input_string", "large_utf8", true},
	{"model_output_string", "large_utf8", true},
	{"rationale", "large_utf8", true},
	{"problem_text", "large_utf8", true},
	{"user_metadata", "large_utf8", true},
	{"input_tokens", "list<item: int32, nullable>", true},
	{"output_tokens", "list<item: int32, nullable>", true},
	{"num_input_tokens", "int32", true},
	{"num_output_tokens", "int32", true},
	{"output_logprobs", "list<item: float32, nullable>", true},
	{"input_logprobs", "list<item: float32, nullable>", true},
	{"ref_logprobs", "list<item: float32, nullable>", true},
	{"loss_mask", "list<item: int8, nullable>", true},
	{"advantage", "float32", true},
	{"reward", "float32", true},
	{"raw_reward", "float32", true},
	{"grader_id", "utf8", true},
	{"score", "float32", true},
	{"include_in_training", "bool", true},
	{"exclude_reason", "utf8", true},
	{"policy_version", "utf8", true},
	{"relationships", "list<item: struct<target_id: utf8, relation: utf8, weight: float32 nullable>, nullable>", true},
	{"binary_payload", "large_binary", true},
	{"payload_size", "int64", true},
	{"payload_checksum", "utf8", true},
	{"artifact_type", "utf8", true},
	{"metadata", "large_utf8", true},
}

func TestSchemaHasTheReferenceColumnsInOrder(t *testing.T) {
	s := Schema()
	if s.NumFields() != len(wantColumns) {
		t.Fatalf("%d columns, want %d", s.NumFields(), len(wantColumns))
	}
	for i, want := range wantColumns {
		f := s.Field(i)
		if f.Name != want.name || f.Type.String() != want.typ || f.Nullable != want.nullable {
			t.Errorf("column %d = %s %s nullable=%v; want %s %s nullable=%v", i, f.Name, f.Type, f.Nullable, want.name, want.typ, want.nullable)
		}
	}
	id := s.Field(0)
	if v, ok := id.Metadata.GetValue(MetaPrimaryKey); !ok || v != "true" {
		t.Fatalf("id metadata = %v", id.Metadata)
	}
	if ts := s.Field(6).Type.(*arrow.TimestampType); ts.TimeZone != "" || ts.Unit != arrow.Microsecond {
		t.Fatalf("created_at = %s, want microseconds without zone", ts)
	}
	rel := s.Field(30).Type.(*arrow.ListType).ElemField().Type.(*arrow.StructType)
	for i, nullable := range []bool{false, false, true} {
		if rel.Field(i).Nullable != nullable {
			t.Errorf("relationships.%s nullable=%v", rel.Field(i).Name, rel.Field(i).Nullable)
		}
	}
	for _, f := range s.Fields() {
		if lt, ok := f.Type.(*arrow.ListType); ok {
			if lt.ElemField().Name != "item" || !lt.ElemField().Nullable {
				t.Errorf("%s: list item %+v, want a nullable field named item", f.Name, lt.ElemField())
			}
		}
	}
	if KeyColumn != s.Field(0).Name {
		t.Fatalf("KeyColumn = %q", KeyColumn)
	}
}

func TestSchemaIsAcceptedByTheLanceSchemaModel(t *testing.T) {
	ls, err := lanceschema.FromArrow(Schema())
	if err != nil {
		t.Fatal(err)
	}
	back := ls.Arrow()
	if !back.Equal(Schema()) {
		t.Fatalf("lance schema round trip changed the schema:\n%s\n%s", back, Schema())
	}
	pk := ls.Field(KeyColumn)
	if pk == nil || !pk.UnenforcedPrimaryKey || pk.Metadata[MetaPrimaryKey] != "true" {
		t.Fatalf("primary key metadata lost: %+v", pk.Metadata)
	}
}

func TestDefaultReadColumnsLeaveOutThePayload(t *testing.T) {
	cols := DefaultReadColumns(nil)
	if len(cols) != Schema().NumFields()-1 || slices.Contains(cols, ColBinaryPayload) {
		t.Fatalf("columns %v", cols)
	}
}

func TestShardIDIsUUIDv5OfTheWorkerID(t *testing.T) {
	// Expected values computed independently (Python's uuid.uuid5(NAMESPACE_OID, id)).
	cases := map[string]struct{ worker, want string }{
		"a StatefulSet pod name maps to a stable shard": {"rollout-0", "c4118b9c-7f79-523d-9bad-381e42232c1d"},
		"another worker maps elsewhere":                 {"worker-a", "1e7d3248-a7b1-51ed-be83-24ee16fca099"},
		"no worker id maps to the default shard":        {"", "02e81b29-f150-54b9-9a08-ce75944f6889"},
		"the word default is the default shard":         {"default", "02e81b29-f150-54b9-9a08-ce75944f6889"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := ShardID(tc.worker); got != tc.want {
				t.Fatalf("ShardID(%q) = %s, want %s", tc.worker, got, tc.want)
			}
		})
	}
}

// The OpenAPI document of package api describes the record types of this package.
func TestOpenAPIRecordSchemasMatchTheGoTypes(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(api.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	cases := map[string]reflect.Type{
		"AddRecord":     reflect.TypeFor[AddRecord](),
		"Record":        reflect.TypeFor[Record](),
		"Relationship":  reflect.TypeFor[Relationship](),
		"AppendRequest": reflect.TypeFor[appendWire](),
	}
	for name, typ := range cases {
		t.Run(name, func(t *testing.T) {
			var props, fields []string
			for p := range doc.Components.Schemas[name].Properties {
				props = append(props, p)
			}
			for i := 0; i < typ.NumField(); i++ {
				n, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
				fields = append(fields, n)
			}
			sort.Strings(props)
			sort.Strings(fields)
			if !slices.Equal(props, fields) {
				t.Fatalf("schema %s has %v; Go type has %v", name, props, fields)
			}
		})
	}
	// The wire type accepts exactly the fields AddRecord has.
	var wire, add []string
	for i := 0; i < reflect.TypeFor[wireRecord]().NumField(); i++ {
		n, _, _ := strings.Cut(reflect.TypeFor[wireRecord]().Field(i).Tag.Get("json"), ",")
		wire = append(wire, n)
		n, _, _ = strings.Cut(reflect.TypeFor[AddRecord]().Field(i).Tag.Get("json"), ",")
		add = append(add, n)
	}
	if !slices.Equal(wire, add) {
		t.Fatalf("wire fields %v differ from AddRecord fields %v", wire, add)
	}
	// Every column is a field of Record, and the other way round.
	var cols []string
	for _, f := range Schema().Fields() {
		cols = append(cols, f.Name)
	}
	var recFields []string
	for i := 0; i < reflect.TypeFor[Record]().NumField(); i++ {
		n, _, _ := strings.Cut(reflect.TypeFor[Record]().Field(i).Tag.Get("json"), ",")
		recFields = append(recFields, n)
	}
	if !slices.Equal(cols, recFields) {
		t.Fatalf("columns %v\nRecord fields %v", cols, recFields)
	}
}
