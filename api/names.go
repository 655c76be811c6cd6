package api

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxNameLen is the longest store name, in bytes.
const MaxNameLen = 128

// MaxIDLen is the longest record id, in bytes.
const MaxIDLen = 512

// ValidateName checks a store name before any storage I/O: 1 to 128 ASCII bytes,
// the first a letter, digit or '_', the rest letters, digits, '.', '-' or '_'; no
// "..", no trailing '.', and not a reserved name (_registry, _stats, in any case).
// The name becomes a directory name ({name}.rollout.lance) on every backend, so the
// rules keep it one safe path segment everywhere (no '/', '\', ':', NUL, spaces) and
// keep it from colliding with the datasets the system keeps beside the stores. The
// error is a 400 *Error.
func ValidateName(name string) error {
	if name == "" {
		return InvalidRequest("store name is empty")
	}
	if len(name) > MaxNameLen {
		return InvalidRequest("store name %s is %d bytes long; the limit is %d", QuoteTrunc(name, 32), len(name), MaxNameLen)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		ok := c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			i > 0 && (c == '.' || c == '-')
		if !ok {
			if i == 0 && (c == '.' || c == '-') {
				return InvalidRequest("store name %s must start with a letter, digit or '_'", QuoteTrunc(name, 64))
			}
			return InvalidRequest("store name %s: %s at byte %d is not allowed; use letters, digits, '.', '-' and '_'",
				QuoteTrunc(name, 64), describeNameByte(c), i)
		}
	}
	if strings.Contains(name, "..") {
		return InvalidRequest("store name %s must not contain \"..\"", QuoteTrunc(name, 64))
	}
	if strings.HasSuffix(name, ".") {
		return InvalidRequest("store name %s must not end with '.'", QuoteTrunc(name, 64))
	}
	for _, r := range reservedNames {
		if strings.EqualFold(name, r) {
			return InvalidRequest("store name %s is reserved", QuoteTrunc(name, 64))
		}
	}
	return nil
}

// reservedNames would collide with datasets the system keeps in the data directory
// (_registry.rollout.lance, _stats.rollout.lance).
var reservedNames = [...]string{"_registry", "_stats"}

func describeNameByte(c byte) string {
	switch {
	case c == ' ':
		return "a space"
	case c == 0:
		return "a NUL byte"
	case c < 0x20 || c == 0x7f:
		return fmt.Sprintf("control byte 0x%02x", c)
	case c >= 0x80:
		return fmt.Sprintf("non-ASCII byte 0x%02x", c)
	}
	return fmt.Sprintf("%q", rune(c))
}

// ValidateID checks a record id: non-empty, at most 512 bytes, valid UTF-8 and free of
// control characters (C0, DEL and C1), because ids travel in URLs, filters and logs.
// The error is a 400 *Error whose message starts with "id:".
func ValidateID(id string) error {
	return ValidateIDField("id", id)
}

// ValidateIDField is ValidateID for an id-like value named field in the message
// (for example "records[3].rollout_id").
func ValidateIDField(field, id string) error {
	if id == "" {
		return InvalidRequest("%s: must not be empty", field)
	}
	if len(id) > MaxIDLen {
		return InvalidRequest("%s: is %d bytes long; the limit is %d", field, len(id), MaxIDLen)
	}
	for i := 0; i < len(id); {
		c := id[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return InvalidRequest("%s: control character U+%04X at byte %d is not allowed", field, c, i)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(id[i:])
		if r == utf8.RuneError && size == 1 {
			return InvalidRequest("%s: invalid UTF-8 at byte %d", field, i)
		}
		if unicode.IsControl(r) {
			return InvalidRequest("%s: control character U+%04X at byte %d is not allowed", field, r, i)
		}
		i += size
	}
	return nil
}
