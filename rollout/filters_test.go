package rollout

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/lancectx/lancectx/api"
	"github.com/lancectx/lancectx/lance/expr"
)

func TestParseFiltersBuildsQuotedSQL(t *testing.T) {
	cases := map[string]struct{ in, want string }{
		"no parameter is no filter":            {"", ""},
		"an empty object is no filter":         {"{}", ""},
		"empty strings are ignored":            {`{"rollout_id":"","dataset":""}`, ""},
		"nulls are ignored":                    {`{"rollout_id":null,"include_in_training":null}`, ""},
		"one string key is an equality":        {`{"policy_version":"ckpt-42"}`, "policy_version = 'ckpt-42'"},
		"a quote in a value is doubled":        {`{"policy_version":"worker's-ckpt"}`, "policy_version = 'worker''s-ckpt'"},
		"include_in_training true":             {`{"include_in_training":true}`, "include_in_training = true"},
		"include_in_training false":            {`{"include_in_training":false}`, "include_in_training = false"},
		"keys combine with AND in fixed order": {`{"role":"tool","rollout_id":"r","include_in_training":true}`, "rollout_id = 'r' AND role = 'tool' AND include_in_training = true"},
		"every key at once": {`{"rollout_id":"a","problem_id":"b","dataset":"c","policy_version":"d","role":"e","content_type":"f","artifact_type":"g","include_in_training":false}`,
			"rollout_id = 'a' AND problem_id = 'b' AND dataset = 'c' AND policy_version = 'd' AND role = 'e' AND content_type = 'f' AND artifact_type = 'g' AND include_in_training = false"},
		"an injection attempt stays a string": {`{"dataset":"x' OR 1=1 --"}`, "dataset = 'x'' OR 1=1 --'"},
		"backslashes stay literal":            {`{"dataset":"a\\'b"}`, `dataset = 'a\''b'`},
		"whitespace around the JSON is fine":  {" \n{\"dataset\":\"x\"} ", "dataset = 'x'"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseFilters(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
			if got == "" {
				return
			}
			e, err := expr.Parse(got)
			if err != nil {
				t.Fatalf("filter does not parse: %v", err)
			}
			if _, err := expr.Bind(e, Schema()); err != nil {
				t.Fatalf("filter does not bind to the rollout schema: %v", err)
			}
		})
	}
}

func TestParseFiltersSelectsTheRightRows(t *testing.T) {
	recs, err := ParseAppendJSON([]byte(`{"records":[
		{"id":"1","rollout_id":"a","dataset":"x' OR 1=1 --","role":"tool"},
		{"id":"2","rollout_id":"a","dataset":"x","include_in_training":true},
		{"id":"3","rollout_id":"b","dataset":"x","include_in_training":false},
		{"id":"4","rollout_id":"b","dataset":"x"}]}`), DecodeOptions{Now: fixedClock})
	if err != nil {
		t.Fatal(err)
	}
	b, err := ToBatch(recs, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Release()
	cases := map[string]struct {
		filters string
		want    []string
	}{
		"an injected value matches only itself":   {`{"dataset":"x' OR 1=1 --"}`, []string{"1"}},
		"a dictionary column is filtered":         {`{"role":"tool"}`, []string{"1"}},
		"a null include_in_training is not false": {`{"include_in_training":false}`, []string{"3"}},
		"conditions combine":                      {`{"rollout_id":"b","dataset":"x"}`, []string{"3", "4"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			sql, err := ParseFilters(tc.filters)
			if err != nil {
				t.Fatal(err)
			}
			e, err := expr.Parse(sql)
			if err != nil {
				t.Fatal(err)
			}
			sel, err := expr.Select(context.Background(), e, b)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, row := range sel.AppendRows(nil) {
				got = append(got, recs[row].ID)
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("%s selected %v, want %v", sql, got, tc.want)
			}
		})
	}
}

func TestParseFiltersRefusesBadInput(t *testing.T) {
	cases := map[string]struct{ in, msg string }{
		"malformed JSON":               {`{"role":`, "filters: invalid JSON"},
		"an unknown key":               {`{"reward":1.0}`, `filters: unknown field "reward"`},
		"a key in another case":        {`{"Role":"tool"}`, `filters: unknown field "Role"`},
		"a number for a string key":    {`{"policy_version":42}`, "filters.policy_version: expected a string, got number"},
		"a string for the boolean key": {`{"include_in_training":"yes"}`, "filters.include_in_training: expected true or false, got string"},
		"an array":                     {`[]`, "filters: expected an object, got array"},
		"a bare string":                {`"role"`, "filters: expected an object, got string"},
		"null":                         {`null`, "filters: expected an object, got null"},
		"a nested object":              {`{"role":{"eq":"tool"}}`, "filters.role: expected a string, got object"},
		"a duplicate key":              {`{"role":"a","role":"b"}`, `filters: duplicate key "role"`},
		"trailing data":                {`{} {}`, "filters: invalid JSON at offset 3"},
		"an oversized parameter":       {`{"dataset":"` + strings.Repeat("x", MaxFiltersLen) + `"}`, "the limit is 16384"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ParseFilters(tc.in)
			if e, ok := api.AsError(err); !ok || e.Status != 400 || !strings.Contains(e.Message, tc.msg) {
				t.Fatalf("got %v, want a 400 containing %q", err, tc.msg)
			}
		})
	}
}

func TestParseColumnsChecksNames(t *testing.T) {
	cases := map[string]struct {
		in   string
		want []string
		msg  string
	}{
		"an empty list gives the default read columns": {"", DefaultReadColumns(nil), ""},
		"names keep their order and lose spaces":       {" reward , id,binary_payload", []string{"reward", "id", "binary_payload"}, ""},
		"an unknown column is refused":                 {"id,rewards", nil, `unknown column "rewards"`},
		"an empty name is refused":                     {"id,,reward", nil, "name 1 is empty"},
		"a repeated column is refused":                 {"id,id", nil, `"id" is listed twice`},
		"more names than columns are refused":          {strings.Repeat("id,", 40) + "id", nil, "41 names"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseColumns(tc.in, nil)
			if tc.msg != "" {
				if e, ok := api.AsError(err); !ok || e.Status != 400 || !strings.Contains(e.Message, tc.msg) {
					t.Fatalf("got %v, want a 400 containing %q", err, tc.msg)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, %v", got, err)
			}
		})
	}
}
