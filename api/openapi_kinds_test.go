package api_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/storekind"
)

// Every place the document enumerates store kinds lists exactly the kinds the master
// serves (storekind): adding a kind there without the document fails here. (An
// external test package: storekind imports api through the schema packages.)
func TestOpenAPIStoreKindsAreTheKindTable(t *testing.T) {
	var doc struct {
		Components struct {
			Schemas    map[string]struct{ Properties map[string]json.RawMessage } `json:"schemas"`
			Parameters map[string]struct{ Schema json.RawMessage }                `json:"parameters"`
		} `json:"components"`
	}
	if err := json.Unmarshal(api.OpenAPI(), &doc); err != nil {
		t.Fatal(err)
	}
	enums := map[string]json.RawMessage{
		"parameters.StoreKind":              doc.Components.Parameters["StoreKind"].Schema,
		"parameters.StoreKindFilter":        doc.Components.Parameters["StoreKindFilter"].Schema,
		"ExperimentSummary.properties.kind": doc.Components.Schemas["ExperimentSummary"].Properties["kind"],
		"ExperimentDetail.properties.kind":  doc.Components.Schemas["ExperimentDetail"].Properties["kind"],
	}
	for where, raw := range enums {
		var s struct {
			Enum []string `json:"enum"`
		}
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatalf("%s: %v (%s)", where, err, raw)
		}
		if !slices.Equal(s.Enum, storekind.Names()) {
			t.Errorf("%s: enum %v, the master serves %v", where, s.Enum, storekind.Names())
		}
	}
}
