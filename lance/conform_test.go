package lance

import (
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/lancectx/lancectx/internal/arrowjson"
	"github.com/lancectx/lancectx/lance/schema"
)

// TestConformColumnAfterSchemaEvolution reads a struct (and a list of it) the way a data
// file stores it, {x, y}, as a table that dropped y, renamed x, made it nullable and
// added z stored in no file.
func TestConformColumnAfterSchemaEvolution(t *testing.T) {
	stored := arrow.StructOf(
		arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int32},
		arrow.Field{Name: "y", Type: arrow.BinaryTypes.String, Nullable: true},
	)
	fileSchema, err := schema.FromArrow(arrow.NewSchema([]arrow.Field{
		{Name: "s", Type: stored, Nullable: true},
		{Name: "l", Type: arrow.ListOf(stored), Nullable: true},
	}, nil))
	if err != nil {
		t.Fatal(err)
	}
	table := fileSchema.Clone()
	for _, f := range []*schema.Field{table.Fields[0], table.Fields[1].Children[0]} {
		x := f.Children[0]
		x.Name, x.Nullable = "x2", true
		f.Children = []*schema.Field{x, {ID: 99, Name: "z", Type: arrow.PrimitiveTypes.Float64, Nullable: true}}
	}
	rec, err := arrowjson.ReadAll(strings.NewReader(`{"s":{"x":1,"y":"a"},"l":[{"x":2,"y":null},{"x":3,"y":"c"}]}
{"s":null,"l":null}
{"s":{"x":4,"y":"d"},"l":[]}`), fileSchema.Arrow())
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	var cols []arrow.Array
	var fields []arrow.Field
	for i, f := range table.Fields {
		c, err := conformColumn(rec.Column(i), fileSchema.Fields[i], f, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Release()
		cols, fields = append(cols, c), append(fields, f.Arrow())
	}
	out := array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, rec.NumRows())
	defer out.Release()
	rows, err := arrowjson.Rows(out)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"s":{"x2":1,"z":null},"l":[{"x2":2,"z":null},{"x2":3,"z":null}]}`,
		`{"s":null,"l":null}`,
		`{"s":{"x2":4,"z":null},"l":[]}`,
	}
	for i := range want {
		if rows[i] != want[i] {
			t.Errorf("row %d: %s, want %s", i, rows[i], want[i])
		}
	}
	// A type the stored one cannot become is an error, not a panic.
	bad := table.Fields[0].Clone()
	bad.Type = arrow.PrimitiveTypes.Int64
	bad.Children = nil
	if _, err := conformColumn(rec.Column(0), fileSchema.Fields[0], bad, nil); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("struct read as int64: %v", err)
	}
}
