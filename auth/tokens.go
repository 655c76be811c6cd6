package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/lancectx/lancectx/api"
)

// Scope is a permission of a public token.
type Scope string

// The scopes a public token may hold. They are independent: a write-only token (a
// producer that must not read other runs) cannot read.
const (
	ScopeRead  Scope = "read"
	ScopeWrite Scope = "write"
)

// MinTokenLen is the shortest token accepted: a token is the only thing between the
// network and the data, so it must not be guessable (openssl rand -hex 32 makes a good one).
const MinTokenLen = 16

// maxTokenLen bounds a token in the file and a presented one (longer ones are refused
// before hashing).
const maxTokenLen = 1024

// maxTokensFileBytes bounds the tokens file and the internal token file.
const maxTokensFileBytes = 1 << 20

// ErrTokensFile marks every problem of a tokens file (unreadable, malformed, invalid):
// the commands refuse to start on it.
var ErrTokensFile = errors.New("auth: tokens file")

// tokensFile is the JSON document of --api-tokens-file.
type tokensFile struct {
	Tokens            []tokenEntry `json:"tokens"`
	InternalToken     string       `json:"internal_token"`
	InternalTokenFile string       `json:"internal_token_file"`
}

type tokenEntry struct {
	Name   string   `json:"name"`
	Token  string   `json:"token"`
	Scopes []string `json:"scopes"`
}

var tokensFileDecoder = api.NewJSONDecoder(&tokensFile{})

// Tokens is a loaded set of tokens: names, scopes and SHA-256 digests, never the
// tokens themselves. It is immutable and safe for concurrent use; it prints (String,
// LogValue) as names and scopes only.
type Tokens struct {
	entries     []entry
	internal    [sha256.Size]byte
	hasInternal bool
	// compare is subtle.ConstantTimeCompare; a test counts its calls to check that
	// every lookup compares against every digest.
	compare func(a, b []byte) int
}

type entry struct {
	name        string
	digest      [sha256.Size]byte
	read, write bool
}

// Identity is the holder of a presented token.
type Identity struct {
	// Name is the token's name from the file ("internal" for the internal token).
	Name     string
	Read     bool
	Write    bool
	Internal bool
}

// InternalName is the Identity name of the internal token.
const InternalName = "internal"

// LoadTokensFile reads and validates a tokens file. Every error wraps ErrTokensFile
// and lists every problem found; none contains a token.
func LoadTokensFile(path string) (*Tokens, error) {
	data, err := readSecretFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrTokensFile, path, err)
	}
	defer clear(data)
	t, err := parseTokens(data, filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrTokensFile, path, err)
	}
	return t, nil
}

// readSecretFile reads a small regular file whole.
func readSecretFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, maxTokensFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxTokensFileBytes {
		clear(data)
		return nil, fmt.Errorf("larger than the limit of %d bytes", maxTokensFileBytes)
	}
	return data, nil
}

// ParseTokens parses and validates a tokens file's content; dir resolves a relative
// internal_token_file. Errors wrap ErrTokensFile.
func ParseTokens(data []byte, dir string) (*Tokens, error) {
	t, err := parseTokens(data, dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTokensFile, err)
	}
	return t, nil
}

func parseTokens(data []byte, dir string) (*Tokens, error) {
	var f tokensFile
	if err := tokensFileDecoder.Unmarshal(data, &f); err != nil {
		var je *api.JSONError
		switch {
		case errors.As(err, &je) && je.Syntax:
			return nil, fmt.Errorf("invalid JSON at offset %d: %s", je.Offset, je.Msg)
		case errors.As(err, &je) && je.Path != "":
			return nil, fmt.Errorf("%s: %s", je.Path, je.Msg)
		case errors.As(err, &je):
			return nil, errors.New(je.Msg)
		}
		return nil, errors.New("not a tokens document")
	}
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	t := &Tokens{compare: subtle.ConstantTimeCompare}
	if len(f.Tokens) == 0 {
		bad("tokens is empty: list at least one token with its scopes")
	}
	names := map[string]int{}
	digests := map[[sha256.Size]byte]string{}
	for i, te := range f.Tokens {
		where := fmt.Sprintf("tokens[%d]", i)
		if te.Name != "" {
			where += fmt.Sprintf(" (%q)", te.Name)
		}
		if err := checkName(te.Name); err != nil {
			bad("%s: %v", where, err)
		} else if j, dup := names[te.Name]; dup {
			bad("%s: the name is also used by tokens[%d]", where, j)
		} else {
			names[te.Name] = i
		}
		e := entry{name: te.Name}
		if err := checkToken(te.Token); err != nil {
			bad("%s: token %v", where, err)
		} else {
			e.digest = sha256.Sum256([]byte(te.Token))
			if other, dup := digests[e.digest]; dup {
				bad("%s: the same token as %s (every token must be distinct)", where, other)
			}
			digests[e.digest] = where
		}
		if len(te.Scopes) == 0 {
			bad("%s: scopes is empty (use [\"read\"], [\"write\"] or both)", where)
		}
		for _, s := range te.Scopes {
			switch Scope(s) {
			case ScopeRead:
				if e.read {
					bad("%s: scope read is listed twice", where)
				}
				e.read = true
			case ScopeWrite:
				if e.write {
					bad("%s: scope write is listed twice", where)
				}
				e.write = true
			default:
				bad("%s: unknown scope %q (the scopes are read and write; the internal token has its own field)", where, truncate(s, 32))
			}
		}
		t.entries = append(t.entries, e)
	}
	internal := f.InternalToken
	switch {
	case f.InternalToken != "" && f.InternalTokenFile != "":
		bad("set internal_token or internal_token_file, not both")
	case f.InternalTokenFile != "":
		p := f.InternalTokenFile
		if !filepath.IsAbs(p) && dir != "" {
			p = filepath.Join(dir, p)
		}
		b, err := readSecretFile(p)
		if err != nil {
			bad("internal_token_file %s: %v", p, err)
			break
		}
		internal = strings.TrimSpace(string(b))
		clear(b)
		if internal == "" {
			bad("internal_token_file %s is empty", p)
		}
	}
	if internal != "" {
		if err := checkToken(internal); err != nil {
			bad("internal token %v", err)
		} else {
			t.internal, t.hasInternal = sha256.Sum256([]byte(internal)), true
			if other, dup := digests[t.internal]; dup {
				bad("the internal token is the same as %s: it must be a token of its own", other)
			}
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return t, nil
}

// checkName keeps token names printable in logs and messages.
func checkName(name string) error {
	if name == "" {
		return errors.New("name is empty")
	}
	if len(name) > 64 {
		return fmt.Errorf("name is %d bytes long; the limit is 64", len(name))
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c == '_' || c == '-' || c == '.' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return fmt.Errorf("name has %q at byte %d; use letters, digits, '.', '-' and '_'", rune(c), i)
		}
	}
	return nil
}

// checkToken describes what is wrong with a token without quoting it.
func checkToken(tok string) error {
	switch {
	case tok == "":
		return errors.New("is empty")
	case len(tok) < MinTokenLen:
		return fmt.Errorf("is %d characters long; use at least %d (e.g. openssl rand -hex 32)", len(tok), MinTokenLen)
	case len(tok) > maxTokenLen:
		return fmt.Errorf("is %d bytes long; the limit is %d", len(tok), maxTokenLen)
	}
	for i := 0; i < len(tok); i++ {
		// RFC 6750 token characters are printable ASCII; a space or a control character
		// could never arrive intact in an Authorization header.
		if c := tok[i]; c <= ' ' || c >= 0x7f {
			return fmt.Errorf("has a space, control or non-ASCII byte at byte %d", i)
		}
	}
	return nil
}

// Lookup finds the holder of a presented token. It hashes the token once and compares
// the digest with every stored digest in constant time, whichever matches.
func (t *Tokens) Lookup(token string) (Identity, bool) {
	if t == nil {
		return Identity{}, false
	}
	d := sha256.Sum256([]byte(token))
	found := -1
	for i := range t.entries {
		found = subtle.ConstantTimeSelect(t.compare(d[:], t.entries[i].digest[:]), i, found)
	}
	internal := 0
	if t.hasInternal {
		internal = t.compare(d[:], t.internal[:])
	}
	switch {
	case internal == 1:
		return Identity{Name: InternalName, Internal: true}, true
	case found >= 0:
		e := &t.entries[found]
		return Identity{Name: e.name, Read: e.read, Write: e.write}, true
	}
	return Identity{}, false
}

// Len is the number of public tokens.
func (t *Tokens) Len() int {
	if t == nil {
		return 0
	}
	return len(t.entries)
}

// HasInternal tells whether an internal token is configured; without one, every
// /api/v1/internal/* request is refused.
func (t *Tokens) HasInternal() bool { return t != nil && t.hasInternal }

// String lists the token names and scopes (never a token or digest).
func (t *Tokens) String() string {
	if t == nil {
		return "none"
	}
	var parts []string
	for _, e := range t.entries {
		var sc []string
		if e.read {
			sc = append(sc, string(ScopeRead))
		}
		if e.write {
			sc = append(sc, string(ScopeWrite))
		}
		parts = append(parts, e.name+"("+strings.Join(sc, ",")+")")
	}
	if t.hasInternal {
		parts = append(parts, InternalName+"(internal)")
	}
	return strings.Join(parts, " ")
}

// LogValue renders the set as String does, so logging a *Tokens never leaks.
func (t *Tokens) LogValue() slog.Value { return slog.StringValue(t.String()) }

// Format keeps %v, %+v and %#v to String: no digest ever reaches a log line.
func (t *Tokens) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte(t.String())) }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
