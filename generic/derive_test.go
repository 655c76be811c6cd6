package generic

import (
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

// A table created from a spec derives that spec back: the derivation an adoption uses
// declares exactly the columns the table has.
func TestDeriveRoundTripsEveryType(t *testing.T) {
	want := mustSpec(t, strings.Replace(everyType, `{"name":"meta","type":"json"},`, "", 1))
	sp, seal, err := Derive(want.Arrow(true))
	if err != nil {
		t.Fatal(err)
	}
	if d := want.Diff(sp); d != "" {
		t.Fatalf("derived spec differs: %s", d)
	}
	if !seal {
		t.Error("seal_on_add=true was not read back")
	}
	// What it persists is what a lancectx generic store reads.
	back, _, err := FromArrow(sp.Arrow(seal))
	if err != nil || back.Diff(want) != "" {
		t.Fatalf("FromArrow of the derived spec: %v", err)
	}
}

// A json column is a large string in the table: derived as one (the table cannot say
// it held JSON), with another system's spec metadata ignored.
func TestDeriveIgnoresForeignSpecMetadata(t *testing.T) {
	md := arrow.NewMetadata([]string{MetaSchemaSpec, MetaSealOnAdd}, []string{`[["id",{"type":{"String":{"large":false}}}]]`, "maybe"})
	sch := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.BinaryTypes.String},
		{Name: "doc", Type: arrow.BinaryTypes.LargeString, Nullable: true},
	}, &md)
	sp, seal, err := Derive(sch)
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := sp.Column("doc"); c.Type != TypeString || !c.Large || !c.Nullable {
		t.Errorf("doc derived as %+v", c)
	}
	if seal {
		t.Error(`seal_on_add "maybe" read as true`)
	}
}

func TestDeriveRefusesWhatNoSpecExpresses(t *testing.T) {
	id := arrow.Field{Name: "id", Type: arrow.BinaryTypes.String}
	cases := map[string]struct {
		fields []arrow.Field
		want   string
	}{
		"a dictionary": {[]arrow.Field{id, {Name: "role", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int8,
			ValueType: arrow.BinaryTypes.String}, Nullable: true}}, `"role"`},
		"a struct":        {[]arrow.Field{id, {Name: "s", Type: arrow.StructOf(arrow.Field{Name: "a", Type: arrow.PrimitiveTypes.Int32}), Nullable: true}}, `"s"`},
		"an int8":         {[]arrow.Field{id, {Name: "n", Type: arrow.PrimitiveTypes.Int8, Nullable: true}}, "int8"},
		"a local time":    {[]arrow.Field{id, {Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond}, Nullable: true}}, "UTC"},
		"a list of int8":  {[]arrow.Field{id, {Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int8), Nullable: true}}, "list element"},
		"a float64 embed": {[]arrow.Field{id, {Name: "e", Type: arrow.FixedSizeListOf(2, arrow.PrimitiveTypes.Float64), Nullable: true}}, "float32"},
		"a nullable id":   {[]arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String, Nullable: true}}, "non-nullable"},
		"no id":           {[]arrow.Field{{Name: "key", Type: arrow.BinaryTypes.String}}, `"id"`},
		"a dashed name":   {[]arrow.Field{id, {Name: "a-b", Type: arrow.PrimitiveTypes.Int32, Nullable: true}}, "not allowed"},
		"a reserved name": {[]arrow.Field{id, {Name: "_x", Type: arrow.PrimitiveTypes.Int32, Nullable: true}}, "reserved"},
		"a non-null list element": {[]arrow.Field{id, {Name: "l", Type: arrow.ListOfNonNullable(arrow.PrimitiveTypes.Int32),
			Nullable: true}}, `"l"`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, _, err := Derive(arrow.NewSchema(c.fields, nil))
			if !errors.Is(err, ErrNotExpressible) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want ErrNotExpressible naming %s", err, c.want)
			}
		})
	}
}
