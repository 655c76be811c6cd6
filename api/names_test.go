package api

import (
	"strings"
	"testing"
)

func TestValidateNameFollowsTheStoreNameRules(t *testing.T) {
	cases := map[string]struct {
		name string
		msg  string // "" means valid
	}{
		"a plain name is valid":                    {"exp-42", ""},
		"dots, dashes and underscores are valid":   {"a.b-c_d", ""},
		"a leading underscore is valid":            {"_private", ""},
		"a leading digit is valid":                 {"42", ""},
		"one character is valid":                   {"x", ""},
		"128 characters are valid":                 {strings.Repeat("a", 128), ""},
		"a name like a reserved one is valid":      {"_registry2", ""},
		"an empty name is refused":                 {"", "store name is empty"},
		"129 characters are refused":               {strings.Repeat("a", 129), "129 bytes long; the limit is 128"},
		"200 characters are refused":               {strings.Repeat("n", 200), "200 bytes long"},
		".. is refused":                            {"..", "must start with"},
		"a .. inside is refused":                   {"a..b", `must not contain ".."`},
		"a trailing dot is refused":                {"abc.", "must not end with '.'"},
		"a leading dot is refused":                 {".a", "must start with"},
		"a leading dash is refused":                {"-a", "must start with"},
		"a slash is refused":                       {"a/b", `'/' at byte 1 is not allowed`},
		"a path traversal is refused":              {"a/../b", `'/' at byte 1`},
		"a backslash is refused":                   {`a\b`, `'\\' at byte 1`},
		"a NUL byte is refused":                    {"a\x00b", "a NUL byte at byte 1"},
		"a control byte is refused":                {"a\x1fb", "control byte 0x1f"},
		"a space is refused":                       {"a b", "a space at byte 1"},
		"a colon is refused":                       {"c:x", "':' at byte 1"},
		"non-ASCII is refused":                     {"café", "non-ASCII byte 0xc3 at byte 3"},
		"the reserved name _registry is refused":   {"_registry", "is reserved"},
		"the reserved name _stats is refused":      {"_stats", "is reserved"},
		"a reserved name in capitals is refused":   {"_REGISTRY", "is reserved"},
		"a percent sign is refused":                {"a%2Fb", "'%' at byte 1"},
		"a long bad name is shortened in messages": {strings.Repeat("a", 100) + "/", "... (101 bytes)"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := ValidateName(tc.name)
			if tc.msg == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			e, ok := AsError(err)
			if !ok || e.Status != 400 || e.Code != CodeInvalidRequest {
				t.Fatalf("got %v, want a 400", err)
			}
			if !strings.Contains(e.Message, tc.msg) {
				t.Fatalf("message %q does not contain %q", e.Message, tc.msg)
			}
		})
	}
}

func TestValidateIDAllowsWhatURLsCanCarry(t *testing.T) {
	cases := map[string]struct {
		id  string
		msg string
	}{
		"a uuid is valid":                 {"0b6e4b0e-8a0e-4b9e-9d5e-2b8f6e0f1a2b", ""},
		"a slash is valid (escape it)":    {"traj/1/step/2", ""},
		"unicode is valid":                {"шаг-1 🚀", ""},
		"512 bytes are valid":             {strings.Repeat("i", 512), ""},
		"an empty id is refused":          {"", "id: must not be empty"},
		"513 bytes are refused":           {strings.Repeat("i", 513), "id: is 513 bytes long; the limit is 512"},
		"a NUL is refused":                {"a\x00", "control character U+0000 at byte 1"},
		"a newline is refused":            {"a\nb", "control character U+000A"},
		"DEL is refused":                  {"a\x7f", "control character U+007F"},
		"a C1 control is refused":         {"a\u0085", "control character U+0085"},
		"invalid UTF-8 is refused":        {"a\xff", "invalid UTF-8 at byte 1"},
		"a truncated rune is refused":     {"a\xe2\x82", "invalid UTF-8"},
		"an encoded surrogate is refused": {"\xed\xa0\x80", "invalid UTF-8"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := ValidateID(tc.id)
			if tc.msg == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if e, ok := AsError(err); !ok || e.Status != 400 || !strings.Contains(e.Message, tc.msg) {
				t.Fatalf("got %v, want a 400 containing %q", err, tc.msg)
			}
		})
	}
	if err := ValidateIDField("records[3].rollout_id", ""); err == nil || !strings.Contains(err.Error(), "records[3].rollout_id: must not be empty") {
		t.Fatalf("field name not used: %v", err)
	}
}
