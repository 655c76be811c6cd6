package api

import (
	"net/http/httptest"
	"strings"
	"testing"
)

func TestQueryRefusesUnknownAndMalformedParameters(t *testing.T) {
	cases := map[string]struct {
		target   string
		accepted []string
		msg      string // "" means accepted
	}{
		"no query on a route without parameters":       {"/x", nil, ""},
		"accepted parameters pass":                     {"/x?limit=5&filter=a%20%3D%201", []string{"limit", "offset", "filter"}, ""},
		"an accepted parameter given empty passes":     {"/x?limit=", []string{"limit"}, ""},
		"an unknown parameter names itself and others": {"/x?rollout_id=traj1", []string{"limit", "offset"}, `unknown query parameter "rollout_id": this route accepts limit, offset`},
		"several unknown parameters are sorted":        {"/x?b=1&a=2&limit=1", []string{"limit"}, `unknown query parameters "a", "b": this route accepts limit`},
		"a parameter on a route that takes none":       {"/x?fresh=true", nil, `unknown query parameter "fresh": this route takes no query parameters`},
		"a bare unknown flag":                          {"/x?verbose", []string{"flush"}, `unknown query parameter "verbose"`},
		"names are case-sensitive":                     {"/x?Limit=3", []string{"limit"}, `unknown query parameter "Limit"`},
		"many unknown names are cut short":             {"/x?a=1&b=1&c=1&d=1&e=1&f=1&g=1", nil, `"a", "b", "c", "d", "e", ...`},
		"a bad percent escape is refused":              {"/x?filter=%ZZ", []string{"filter"}, "the query string is malformed"},
		"a raw semicolon is refused":                   {"/x?limit=1;offset=2", []string{"limit", "offset"}, "the query string is malformed"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := httptest.NewRequest("GET", tc.target, nil)
			q, err := Query(r, tc.accepted...)
			if tc.msg == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if q == nil {
					t.Fatal("no values")
				}
				return
			}
			e, ok := AsError(err)
			if !ok || e.Status != 400 || e.Code != CodeInvalidRequest || !strings.Contains(e.Message, tc.msg) {
				t.Fatalf("got %v, want a 400 containing %q", err, tc.msg)
			}
		})
	}
}

func TestQueryKeepsTheValues(t *testing.T) {
	r := httptest.NewRequest("GET", "/x?filter=reward%20%3E%205.5&limit=3", nil)
	q, err := Query(r, "filter", "limit")
	if err != nil {
		t.Fatal(err)
	}
	if q.Get("filter") != "reward > 5.5" || q.Get("limit") != "3" {
		t.Fatalf("values %v", q)
	}
}
