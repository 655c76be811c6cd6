package rollout

import (
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/lance/expr"
)

// MaxFiltersLen bounds the filters query parameter.
const MaxFiltersLen = 16 << 10

// filtersWire is the JSON object of the filters parameter.
type filtersWire struct {
	RolloutID         *string `json:"rollout_id"`
	ProblemID         *string `json:"problem_id"`
	Dataset           *string `json:"dataset"`
	PolicyVersion     *string `json:"policy_version"`
	Role              *string `json:"role"`
	ContentType       *string `json:"content_type"`
	ArtifactType      *string `json:"artifact_type"`
	IncludeInTraining *bool   `json:"include_in_training"`
}

var filtersDecoder = api.NewJSONDecoder(&filtersWire{}).WithRoot("filters").WithMaxDepth(2)

// ParseFilters turns the list route's filters parameter, a JSON object such as
// {"policy_version":"ckpt-42","include_in_training":true}, into a Lance SQL filter
// ("" when it filters nothing). Keys: rollout_id, problem_id, dataset,
// policy_version, role, content_type and artifact_type (strings; "" and null mean no
// condition) and include_in_training (boolean or null); they combine with AND.
// Unknown keys, wrong types, a non-object, duplicate keys and malformed JSON are 400
// *api.Error values. Values are quoted with expr.QuoteString, so any text is safe.
func ParseFilters(text string) (string, error) {
	if strings.TrimSpace(text) == "" {
		return "", nil
	}
	if len(text) > MaxFiltersLen {
		return "", api.InvalidRequest("filters: %d bytes; the limit is %d", len(text), MaxFiltersLen)
	}
	var f filtersWire
	if err := filtersDecoder.Unmarshal([]byte(text), &f); err != nil {
		return "", err
	}
	var conds []string
	add := func(col string, v *string) {
		if v != nil && *v != "" {
			conds = append(conds, expr.QuoteIdent(col)+" = "+expr.QuoteString(*v))
		}
	}
	add(ColRolloutID, f.RolloutID)
	add(ColProblemID, f.ProblemID)
	add(ColDataset, f.Dataset)
	add(ColPolicyVersion, f.PolicyVersion)
	add(ColRole, f.Role)
	add(ColContentType, f.ContentType)
	add(ColArtifactType, f.ArtifactType)
	if f.IncludeInTraining != nil {
		lit := "false"
		if *f.IncludeInTraining {
			lit = "true"
		}
		conds = append(conds, expr.QuoteIdent(ColIncludeInTraining)+" = "+lit)
	}
	return strings.Join(conds, " AND "), nil
}

// ParseColumns parses the comma-separated columns parameter of the Arrow route against
// the store's schema s: names in the order given, surrounding spaces trimmed. An empty
// list gives DefaultReadColumns(s). Unknown, empty and repeated names are 400
// *api.Error values.
func ParseColumns(list string, s *arrow.Schema) ([]string, error) {
	if s == nil {
		s = rolloutSchema
	}
	if strings.TrimSpace(list) == "" {
		return DefaultReadColumns(s), nil
	}
	parts := strings.Split(list, ",")
	if len(parts) > s.NumFields() {
		return nil, api.InvalidRequest("columns: %d names, but the store has %d columns", len(parts), s.NumFields())
	}
	out := make([]string, 0, len(parts))
	seen := make(map[string]bool, len(parts))
	for i, p := range parts {
		name := strings.TrimSpace(p)
		if name == "" {
			return nil, api.InvalidRequest("columns: name %d is empty", i)
		}
		if !s.HasField(name) {
			return nil, api.InvalidRequest("columns: unknown column %s; the columns are %s", quote(name, 64), strings.Join(fieldNames(s), ", "))
		}
		if seen[name] {
			return nil, api.InvalidRequest("columns: %s is listed twice", quote(name, 64))
		}
		seen[name] = true
		out = append(out, name)
	}
	return out, nil
}

func fieldNames(s *arrow.Schema) []string {
	out := make([]string, s.NumFields())
	for i, f := range s.Fields() {
		out[i] = f.Name
	}
	return out
}
