package expr

import (
	"bytes"
	"unicode/utf8"
)

// likeMatcher is a compiled LIKE pattern. `%` matches any run of characters, `_`
// exactly one character (a UTF-8 code point), and a backslash makes the character after
// it literal (`\%`, `\_`, `\\`; `\b` is plain b); a backslash at the very end is
// literal. That is the rule of Lance's LIKE (arrow-rs), which has no ESCAPE clause.
//
// Matching is linear in pattern × value at worst: each segment between `%` signs is
// placed at its leftmost possible position, which is always safe for `%` patterns, so
// there is no backtracking and no exponential case for hostile patterns.
type likeMatcher struct {
	kind likeKind
	lit  []byte      // for likeExact, likePrefix, likeSuffix, likeContains
	segs [][]likeTok // for likeGeneral: the pieces between `%`; first and last are anchored
	cost int         // the pattern's length in tokens: the factor of a general match
}

type likeKind uint8

const (
	likeAll      likeKind = iota // only `%`
	likeExact                    // no wildcard at all
	likePrefix                   // 'abc%'
	likeSuffix                   // '%abc'
	likeContains                 // '%abc%'
	likeGeneral
)

// likeTok is either literal bytes or (when lit is nil) one `_`.
type likeTok struct {
	lit []byte
}

func compileLike(pattern string) *likeMatcher {
	var segs [][]likeTok
	var cur []likeTok
	var litBuf []byte
	flushLit := func() {
		if len(litBuf) > 0 {
			cur = append(cur, likeTok{lit: litBuf})
			litBuf = nil
		}
	}
	for i := 0; i < len(pattern); i++ {
		c := pattern[i]
		switch {
		case c == '\\' && i+1 < len(pattern):
			// The escaped character may be multi-byte; its bytes are all literal.
			_, w := utf8.DecodeRuneInString(pattern[i+1:])
			litBuf = append(litBuf, pattern[i+1:i+1+w]...)
			i += w
		case c == '%':
			flushLit()
			segs = append(segs, cur)
			cur = nil
		case c == '_':
			flushLit()
			cur = append(cur, likeTok{})
		default:
			litBuf = append(litBuf, c)
		}
	}
	flushLit()
	segs = append(segs, cur)

	m := &likeMatcher{kind: likeGeneral, segs: segs, cost: 1}
	for _, seg := range segs {
		m.cost += len(seg)
	}
	pureLit := func(seg []likeTok) ([]byte, bool) {
		switch len(seg) {
		case 0:
			return []byte{}, true
		case 1:
			return seg[0].lit, seg[0].lit != nil
		}
		return nil, false
	}
	last := len(segs) - 1
	allEmpty := true
	for _, s := range segs {
		if len(s) > 0 {
			allEmpty = false
		}
	}
	switch {
	case last > 0 && allEmpty:
		m.kind = likeAll
	case last == 0:
		if l, ok := pureLit(segs[0]); ok {
			m.kind, m.lit = likeExact, l
		}
	case last == 1 && len(segs[1]) == 0:
		if l, ok := pureLit(segs[0]); ok {
			m.kind, m.lit = likePrefix, l
		}
	case last == 1 && len(segs[0]) == 0:
		if l, ok := pureLit(segs[1]); ok {
			m.kind, m.lit = likeSuffix, l
		}
	case last == 2 && len(segs[0]) == 0 && len(segs[2]) == 0:
		if l, ok := pureLit(segs[1]); ok {
			m.kind, m.lit = likeContains, l
		}
	}
	return m
}

// slow reports whether matching may cost more than a scan of the value.
func (m *likeMatcher) slow() bool { return m.kind == likeGeneral }

func (m *likeMatcher) match(s []byte) bool {
	switch m.kind {
	case likeAll:
		return true
	case likeExact:
		return bytes.Equal(s, m.lit)
	case likePrefix:
		return bytes.HasPrefix(s, m.lit)
	case likeSuffix:
		return bytes.HasSuffix(s, m.lit)
	case likeContains:
		return bytes.Contains(s, m.lit)
	}
	segs := m.segs
	if len(segs) == 1 {
		end, ok := matchSegAt(segs[0], s, 0, len(s))
		return ok && end == len(s)
	}
	pos, end := 0, len(s)
	if first := segs[0]; len(first) > 0 {
		p, ok := matchSegAt(first, s, 0, end)
		if !ok {
			return false
		}
		pos = p
	}
	if last := segs[len(segs)-1]; len(last) > 0 {
		e, ok := matchSegEnd(last, s, pos, end)
		if !ok {
			return false
		}
		end = e
	}
	for _, seg := range segs[1 : len(segs)-1] {
		if len(seg) == 0 {
			continue
		}
		p, ok := findSeg(seg, s, pos, end)
		if !ok {
			return false
		}
		pos = p
	}
	return true
}

// matchSegAt matches seg at s[p:], not past limit, and returns where the match ends.
func matchSegAt(seg []likeTok, s []byte, p, limit int) (int, bool) {
	for _, t := range seg {
		if t.lit != nil {
			if !bytes.HasPrefix(s[p:limit], t.lit) {
				return 0, false
			}
			p += len(t.lit)
			continue
		}
		if p >= limit {
			return 0, false
		}
		_, w := utf8.DecodeRune(s[p:limit])
		p += w
	}
	return p, true
}

// matchSegEnd matches seg so that it ends at limit and starts no earlier than min, and
// returns where the match starts.
func matchSegEnd(seg []likeTok, s []byte, min, limit int) (int, bool) {
	e := limit
	for i := len(seg) - 1; i >= 0; i-- {
		t := seg[i]
		if t.lit != nil {
			if !bytes.HasSuffix(s[min:e], t.lit) {
				return 0, false
			}
			e -= len(t.lit)
			continue
		}
		if e <= min {
			return 0, false
		}
		_, w := utf8.DecodeLastRune(s[min:e])
		e -= w
	}
	return e, true
}

// findSeg finds the leftmost match of seg within s[pos:limit] and returns its end.
func findSeg(seg []likeTok, s []byte, pos, limit int) (int, bool) {
	first := seg[0].lit
	for p := pos; p <= limit; {
		if first != nil {
			i := bytes.Index(s[p:limit], first)
			if i < 0 {
				return 0, false
			}
			p += i
		}
		if e, ok := matchSegAt(seg, s, p, limit); ok {
			return e, true
		}
		if p == limit {
			break
		}
		_, w := utf8.DecodeRune(s[p:limit])
		p += w
	}
	return 0, false
}
