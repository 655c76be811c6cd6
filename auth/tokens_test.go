package auth

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

const (
	trainerTok   = "trainer-0123456789abcdef"
	readerTok    = "reader-0123456789abcdef"
	writerTok    = "writer-0123456789abcdef"
	internalTok  = "internal-0123456789abcdef"
	validTokens  = `{"tokens":[{"name":"trainer","token":"` + trainerTok + `","scopes":["read","write"]},{"name":"dashboard","token":"` + readerTok + `","scopes":["read"]},{"name":"producer","token":"` + writerTok + `","scopes":["write"]}],"internal_token":"` + internalTok + `"}`
	allPlaintext = trainerTok + "|" + readerTok + "|" + writerTok + "|" + internalTok
)

func mustParse(t testing.TB, doc string) *Tokens {
	t.Helper()
	tk, err := ParseTokens([]byte(doc), t.TempDir())
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return tk
}

func TestLookupFindsEveryTokenWithItsScopes(t *testing.T) {
	tk := mustParse(t, validTokens)
	cases := map[string]struct {
		token string
		want  Identity
		ok    bool
	}{
		"the trainer token reads and writes":      {trainerTok, Identity{Name: "trainer", Read: true, Write: true}, true},
		"the dashboard token only reads":          {readerTok, Identity{Name: "dashboard", Read: true}, true},
		"the producer token only writes":          {writerTok, Identity{Name: "producer", Write: true}, true},
		"the internal token is internal only":     {internalTok, Identity{Name: InternalName, Internal: true}, true},
		"an unknown token is nobody":              {"nobody-0123456789abcdef", Identity{}, false},
		"a prefix of a token is nobody":           {trainerTok[:len(trainerTok)-1], Identity{}, false},
		"a token with a suffix is nobody":         {trainerTok + "x", Identity{}, false},
		"the empty string is nobody":              {"", Identity{}, false},
		"a token in another case is nobody":       {strings.ToUpper(trainerTok), Identity{}, false},
		"the SHA-256 of a token is nobody either": {fmt.Sprintf("%x", tk.entries[0].digest), Identity{}, false},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := tk.Lookup(c.token)
			if ok != c.ok || got != c.want {
				t.Fatalf("Lookup = %+v, %v; want %+v, %v", got, ok, c.want, c.ok)
			}
		})
	}
	if tk.Len() != 3 || !tk.HasInternal() {
		t.Fatalf("Len %d HasInternal %v", tk.Len(), tk.HasInternal())
	}
	var nilTokens *Tokens
	if _, ok := nilTokens.Lookup(trainerTok); ok {
		t.Fatal("a nil set found a token")
	}
}

// TestLookupComparesAgainstEveryDigest is the constant-time property: whichever token
// is presented (the first, the last, the internal one, none, an empty one), Lookup
// compares one digest of it with every stored digest, with the constant-time compare,
// and never stops early.
func TestLookupComparesAgainstEveryDigest(t *testing.T) {
	tk := mustParse(t, validTokens)
	calls := 0
	tk.compare = func(a, b []byte) int {
		calls++
		if len(a) != 32 || len(b) != 32 {
			t.Fatalf("compared %d and %d bytes: digests are 32", len(a), len(b))
		}
		return subtle.ConstantTimeCompare(a, b)
	}
	for _, tok := range []string{trainerTok, writerTok, internalTok, "nobody-0123456789abcdef", "", strings.Repeat("x", 5000)} {
		calls = 0
		tk.Lookup(tok)
		if calls != tk.Len()+1 {
			t.Errorf("lookup of a %d-byte token made %d comparisons; want %d (every digest)", len(tok), calls, tk.Len()+1)
		}
	}
	// The production compare is crypto/subtle's.
	if reflect.ValueOf(mustParse(t, validTokens).compare).Pointer() != reflect.ValueOf(subtle.ConstantTimeCompare).Pointer() {
		t.Fatal("Tokens does not compare with subtle.ConstantTimeCompare")
	}
}

// TestTokensKeepNoPlaintext walks the loaded set: no string or byte array in it holds a
// token, and printing it (any verb, slog) shows names and scopes only.
func TestTokensKeepNoPlaintext(t *testing.T) {
	tk := mustParse(t, validTokens)
	plain := strings.Split(allPlaintext, "|")
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		switch v.Kind() {
		case reflect.String:
			for _, p := range plain {
				if strings.Contains(v.String(), p) {
					t.Errorf("%s holds a token in plaintext", path)
				}
			}
		case reflect.Array, reflect.Slice:
			if v.Type().Elem().Kind() == reflect.Uint8 {
				b := make([]byte, v.Len())
				for i := range b {
					b[i] = byte(v.Index(i).Uint())
				}
				for _, p := range plain {
					if strings.Contains(string(b), p) {
						t.Errorf("%s holds a token in plaintext", path)
					}
				}
				return
			}
			for i := 0; i < v.Len(); i++ {
				walk(v.Index(i), fmt.Sprintf("%s[%d]", path, i))
			}
		case reflect.Struct:
			for i := 0; i < v.NumField(); i++ {
				walk(v.Field(i), path+"."+v.Type().Field(i).Name)
			}
		case reflect.Pointer:
			if !v.IsNil() {
				walk(v.Elem(), path)
			}
		}
	}
	walk(reflect.ValueOf(tk), "Tokens")
	for _, s := range []string{fmt.Sprint(tk), fmt.Sprintf("%+v", tk), fmt.Sprintf("%#v", tk), tk.LogValue().String()} {
		for _, p := range plain {
			if strings.Contains(s, p) {
				t.Fatalf("printing the set shows a token: %s", s)
			}
		}
		if strings.Contains(s, fmt.Sprintf("%x", tk.entries[0].digest)) {
			t.Fatalf("printing the set shows a digest: %s", s)
		}
	}
	if got := tk.String(); got != "trainer(read,write) dashboard(read) producer(write) internal(internal)" {
		t.Fatalf("String = %q", got)
	}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadTokensFileResolvesTheInternalTokenFile(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "internal.token", internalTok+"\n")
	p := writeFile(t, dir, "tokens.json", `{"tokens":[{"name":"a","token":"`+trainerTok+`","scopes":["read"]}],"internal_token_file":"internal.token"}`)
	tk, err := LoadTokensFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if id, ok := tk.Lookup(internalTok); !ok || !id.Internal {
		t.Fatalf("internal token from its file (trailing newline trimmed): %+v %v", id, ok)
	}
	// Without an internal token the set loads; internal routes are then closed.
	tk = mustParse(t, `{"tokens":[{"name":"a","token":"`+trainerTok+`","scopes":["read"]}]}`)
	if tk.HasInternal() {
		t.Fatal("HasInternal without one")
	}
}

// TestTokensFileValidation: every mistake is refused with a message naming it (and
// never quoting a token); all mistakes of one file are reported together.
func TestTokensFileValidation(t *testing.T) {
	tok := func(name, token, scopes string) string {
		return `{"name":"` + name + `","token":"` + token + `","scopes":[` + scopes + `]}`
	}
	file := func(entries ...string) string { return `{"tokens":[` + strings.Join(entries, ",") + `]}` }
	ok := tok("a", trainerTok, `"read"`)
	cases := map[string]struct {
		doc  string
		want []string
	}{
		"a malformed document":                    {`{"tokens":[`, []string{"invalid JSON"}},
		"an unknown field":                        {`{"tokens":[],"tokenz":[]}`, []string{"tokenz"}},
		"a scopes field of the wrong type":        {`{"tokens":[{"name":"a","token":"` + trainerTok + `","scopes":"read"}]}`, []string{"scopes"}},
		"no tokens at all":                        {`{"tokens":[]}`, []string{"tokens is empty"}},
		"an empty document":                       {`{}`, []string{"tokens is empty"}},
		"the same token twice":                    {file(ok, tok("b", trainerTok, `"write"`)), []string{`tokens[1] ("b"): the same token as tokens[0] ("a")`}},
		"the same name twice":                     {file(ok, tok("a", readerTok, `"write"`)), []string{`tokens[1] ("a"): the name is also used by tokens[0]`}},
		"an empty token":                          {file(tok("a", "", `"read"`)), []string{`tokens[0] ("a"): token is empty`}},
		"a short token":                           {file(tok("a", "short", `"read"`)), []string{"token is 5 characters long; use at least 16"}},
		"a token with a space":                    {file(tok("a", "0123456789 abcdef", `"read"`)), []string{"space, control or non-ASCII byte at byte 10"}},
		"a token with a control character":        {file(tok("a", `0123456789\tabcdef`, `"read"`)), []string{"control"}},
		"an unknown scope":                        {file(tok("a", trainerTok, `"admin"`)), []string{`unknown scope "admin"`}},
		"the internal scope on a public token":    {file(tok("a", trainerTok, `"internal"`)), []string{`unknown scope "internal"`}},
		"no scopes":                               {file(tok("a", trainerTok, ``)), []string{"scopes is empty"}},
		"a scope listed twice":                    {file(tok("a", trainerTok, `"read","read"`)), []string{"scope read is listed twice"}},
		"an empty name":                           {file(tok("", trainerTok, `"read"`)), []string{"name is empty"}},
		"a name with a slash":                     {file(tok("a/b", trainerTok, `"read"`)), []string{`name has '/'`}},
		"both internal_token and its file":        {`{"tokens":[` + ok + `],"internal_token":"` + internalTok + `","internal_token_file":"x"}`, []string{"not both"}},
		"an internal token equal to a public one": {`{"tokens":[` + ok + `],"internal_token":"` + trainerTok + `"}`, []string{"internal token is the same as tokens[0]"}},
		"a short internal token":                  {`{"tokens":[` + ok + `],"internal_token":"tiny"}`, []string{"internal token is 4 characters long"}},
		"a missing internal token file":           {`{"tokens":[` + ok + `],"internal_token_file":"nope.token"}`, []string{"internal_token_file", "nope.token"}},
		"several mistakes at once":                {file(tok("a", "", `"read"`), tok("b", trainerTok, `"root"`)), []string{"token is empty", `unknown scope "root"`}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := ParseTokens([]byte(c.doc), t.TempDir())
			if err == nil {
				t.Fatal("accepted")
			}
			if !errors.Is(err, ErrTokensFile) {
				t.Errorf("error does not wrap ErrTokensFile: %v", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			for _, p := range strings.Split(allPlaintext, "|") {
				if strings.Contains(err.Error(), p) {
					t.Errorf("error quotes a token: %v", err)
				}
			}
		})
	}
}

func TestTokensFileUnreadable(t *testing.T) {
	dir := t.TempDir()
	big := writeFile(t, dir, "big.json", `{"tokens":[],"x":"`+strings.Repeat("a", maxTokensFileBytes)+`"}`)
	for name, path := range map[string]string{
		"a missing file":        filepath.Join(dir, "missing.json"),
		"a directory":           dir,
		"a file over the limit": big,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := LoadTokensFile(path)
			if err == nil || !errors.Is(err, ErrTokensFile) || !strings.Contains(err.Error(), path) {
				t.Fatalf("LoadTokensFile(%s): %v", path, err)
			}
		})
	}
	if os.Geteuid() != 0 { // root reads a mode-000 file anyway
		p := writeFile(t, dir, "secret.json", validTokens)
		if err := os.Chmod(p, 0); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadTokensFile(p); err == nil || !errors.Is(err, os.ErrPermission) {
			t.Fatalf("a file without read permission: %v", err)
		}
	}
}
