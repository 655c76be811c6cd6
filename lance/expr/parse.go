package expr

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Parse parses a filter. Errors are *SyntaxError values carrying the byte offset of the
// problem; they wrap ErrInvalid.
func Parse(src string) (Expr, error) {
	if len(src) > MaxInputLen {
		return nil, &SyntaxError{Offset: MaxInputLen, Msg: fmt.Sprintf("filter longer than %d bytes", MaxInputLen)}
	}
	if !utf8.ValidString(src) {
		off := 0
		for off < len(src) {
			r, w := utf8.DecodeRuneInString(src[off:])
			if r == utf8.RuneError && w == 1 {
				break
			}
			off += w
		}
		return nil, &SyntaxError{Offset: off, Msg: "invalid UTF-8"}
	}
	p := &parser{lx: lexer{src: src}}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind == tEOF {
		return nil, p.errAt(p.tok.pos, "empty filter")
	}
	e, err := p.parseOr()
	if err != nil {
		return nil, err
	}
	if p.tok.kind != tEOF {
		return nil, p.unexpected()
	}
	return e, nil
}

type tokKind uint8

const (
	tEOF tokKind = iota
	tIdent
	tQuotedIdent
	tNumber
	tString
	tLParen
	tRParen
	tComma
	tOp
	tPlus
	tMinus
)

type token struct {
	kind tokKind
	pos  int
	text string // identifier name, string value, number text or operator
	op   cmpOp
}

func (t token) describe() string {
	switch t.kind {
	case tEOF:
		return "end of input"
	case tIdent:
		if keywords[strings.ToUpper(t.text)] {
			return "keyword " + strings.ToUpper(t.text)
		}
		return fmt.Sprintf("identifier %q", t.text)
	case tQuotedIdent:
		return fmt.Sprintf("quoted identifier %q", t.text)
	case tNumber:
		return "number " + t.text
	case tString:
		return "string " + QuoteString(clip(t.text, 40))
	case tLParen:
		return "'('"
	case tRParen:
		return "')'"
	case tComma:
		return "','"
	case tPlus:
		return "'+'"
	case tMinus:
		return "'-'"
	default:
		return "'" + t.text + "'"
	}
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "..."
}

// keywords cannot be bare column names, except DATE and TIMESTAMP when no string
// follows (a column called "timestamp" is too common to forbid).
var keywords = map[string]bool{
	"AND": true, "OR": true, "NOT": true, "IN": true, "IS": true, "NULL": true,
	"TRUE": true, "FALSE": true, "BETWEEN": true, "LIKE": true, "DATE": true,
	"TIMESTAMP": true,
}

type lexer struct {
	src string
	pos int
}

func (lx *lexer) next() (token, error) {
	s := lx.src
	for lx.pos < len(s) {
		c := s[lx.pos]
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v' {
			lx.pos++
			continue
		}
		break
	}
	start := lx.pos
	if start >= len(s) {
		return token{kind: tEOF, pos: start}, nil
	}
	c := s[start]
	switch {
	case c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z':
		i := start + 1
		for i < len(s) && (s[i] == '_' || 'a' <= s[i] && s[i] <= 'z' || 'A' <= s[i] && s[i] <= 'Z' || '0' <= s[i] && s[i] <= '9') {
			i++
		}
		lx.pos = i
		return token{kind: tIdent, pos: start, text: s[start:i]}, nil
	case '0' <= c && c <= '9' || c == '.' && start+1 < len(s) && '0' <= s[start+1] && s[start+1] <= '9':
		return lx.number()
	case c == '\'':
		v, err := lx.quoted('\'')
		if err != nil {
			return token{}, err
		}
		return token{kind: tString, pos: start, text: v}, nil
	case c == '"' || c == '`':
		v, err := lx.quoted(c)
		if err != nil {
			return token{}, err
		}
		if v == "" {
			return token{}, &SyntaxError{Offset: start, Msg: "empty quoted identifier"}
		}
		return token{kind: tQuotedIdent, pos: start, text: v}, nil
	case c == '(':
		lx.pos++
		return token{kind: tLParen, pos: start}, nil
	case c == ')':
		lx.pos++
		return token{kind: tRParen, pos: start}, nil
	case c == ',':
		lx.pos++
		return token{kind: tComma, pos: start}, nil
	case c == '+':
		lx.pos++
		return token{kind: tPlus, pos: start}, nil
	case c == '-':
		lx.pos++
		return token{kind: tMinus, pos: start}, nil
	case c == '=':
		lx.pos++
		if lx.pos < len(s) && s[lx.pos] == '=' {
			lx.pos++ // "==" is accepted as "=", as Lance does.
		}
		return token{kind: tOp, pos: start, text: s[start:lx.pos], op: opEq}, nil
	case c == '!':
		if start+1 < len(s) && s[start+1] == '=' {
			lx.pos += 2
			return token{kind: tOp, pos: start, text: "!=", op: opNe}, nil
		}
	case c == '<':
		lx.pos++
		if lx.pos < len(s) && s[lx.pos] == '=' {
			lx.pos++
			return token{kind: tOp, pos: start, text: "<=", op: opLe}, nil
		}
		if lx.pos < len(s) && s[lx.pos] == '>' {
			lx.pos++
			return token{kind: tOp, pos: start, text: "<>", op: opNe}, nil
		}
		return token{kind: tOp, pos: start, text: "<", op: opLt}, nil
	case c == '>':
		lx.pos++
		if lx.pos < len(s) && s[lx.pos] == '=' {
			lx.pos++
			return token{kind: tOp, pos: start, text: ">=", op: opGe}, nil
		}
		return token{kind: tOp, pos: start, text: ">", op: opGt}, nil
	}
	r, _ := utf8.DecodeRuneInString(s[start:])
	return token{}, &SyntaxError{Offset: start, Msg: fmt.Sprintf("unexpected character %q", r)}
}

// number scans digits [ '.' digits ] [ e [+-] digits ], or the same starting at '.'.
func (lx *lexer) number() (token, error) {
	s := lx.src
	start := lx.pos
	i := start
	digits := func() {
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i++
		}
	}
	digits()
	if i < len(s) && s[i] == '.' {
		i++
		digits()
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		if j < len(s) && '0' <= s[j] && s[j] <= '9' {
			i = j
			digits()
		} else {
			return token{}, &SyntaxError{Offset: i, Msg: "malformed exponent in number"}
		}
	}
	if i < len(s) && (s[i] == '_' || s[i] == '.' || 'a' <= s[i] && s[i] <= 'z' || 'A' <= s[i] && s[i] <= 'Z' || '0' <= s[i] && s[i] <= '9') {
		return token{}, &SyntaxError{Offset: i, Msg: fmt.Sprintf("unexpected character %q after number", s[i])}
	}
	lx.pos = i
	return token{kind: tNumber, pos: start, text: s[start:i]}, nil
}

// quoted scans a string or identifier in quote q, where a doubled quote stands for one.
func (lx *lexer) quoted(q byte) (string, error) {
	s := lx.src
	start := lx.pos
	i := start + 1
	var b strings.Builder
	seg := i
	for {
		j := strings.IndexByte(s[i:], q)
		if j < 0 {
			what := "string"
			if q != '\'' {
				what = "quoted identifier"
			}
			return "", &SyntaxError{Offset: start, Msg: "unterminated " + what}
		}
		i += j
		if i+1 < len(s) && s[i+1] == q {
			b.WriteString(s[seg : i+1])
			i += 2
			seg = i
			continue
		}
		b.WriteString(s[seg:i])
		lx.pos = i + 1
		return b.String(), nil
	}
}

type parser struct {
	lx    lexer
	tok   token
	depth int
}

func (p *parser) advance() error {
	t, err := p.lx.next()
	if err != nil {
		return err
	}
	p.tok = t
	return nil
}

func (p *parser) errAt(pos int, format string, args ...any) error {
	return &SyntaxError{Offset: pos, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) unexpected() error {
	return p.errAt(p.tok.pos, "unexpected %s", p.tok.describe())
}

// isKeyword reports whether the current token is the bare keyword kw (upper case).
func (p *parser) isKeyword(kw string) bool {
	return p.tok.kind == tIdent && strings.EqualFold(p.tok.text, kw)
}

func (p *parser) expectKeyword(kw string) error {
	if !p.isKeyword(kw) {
		return p.errAt(p.tok.pos, "expected %s, found %s", kw, p.tok.describe())
	}
	return p.advance()
}

func (p *parser) enter(pos int) error {
	p.depth++
	if p.depth > MaxDepth {
		return p.errAt(pos, "filter nested deeper than %d levels", MaxDepth)
	}
	return nil
}

func (p *parser) parseOr() (Expr, error) {
	pos := p.tok.pos
	first, err := p.parseAnd()
	if err != nil {
		return nil, err
	}
	if !p.isKeyword("OR") {
		return first, nil
	}
	terms := appendFlat[*orExpr](nil, first)
	for p.isKeyword("OR") {
		if err := p.advance(); err != nil {
			return nil, err
		}
		t, err := p.parseAnd()
		if err != nil {
			return nil, err
		}
		terms = appendFlat[*orExpr](terms, t)
	}
	return &orExpr{terms: terms, pos: pos}, nil
}

func (p *parser) parseAnd() (Expr, error) {
	pos := p.tok.pos
	first, err := p.parseNot()
	if err != nil {
		return nil, err
	}
	if !p.isKeyword("AND") {
		return first, nil
	}
	terms := appendFlat[*andExpr](nil, first)
	for p.isKeyword("AND") {
		if err := p.advance(); err != nil {
			return nil, err
		}
		t, err := p.parseNot()
		if err != nil {
			return nil, err
		}
		terms = appendFlat[*andExpr](terms, t)
	}
	return &andExpr{terms: terms, pos: pos}, nil
}

// appendFlat appends t to terms, splicing in the terms of t when it is itself an AND
// (or OR) written in parentheses, so equal filters have equal trees.
func appendFlat[T *andExpr | *orExpr](terms []Expr, t Expr) []Expr {
	if inner, ok := t.(T); ok {
		switch v := any(inner).(type) {
		case *andExpr:
			return append(terms, v.terms...)
		case *orExpr:
			return append(terms, v.terms...)
		}
	}
	return append(terms, t)
}

func (p *parser) parseNot() (Expr, error) {
	if !p.isKeyword("NOT") {
		return p.parsePred()
	}
	pos := p.tok.pos
	if err := p.enter(pos); err != nil {
		return nil, err
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	x, err := p.parseNot()
	if err != nil {
		return nil, err
	}
	p.depth--
	return &notExpr{x: x, pos: pos}, nil
}

func (p *parser) parsePred() (Expr, error) {
	pos := p.tok.pos
	if p.tok.kind == tLParen {
		if err := p.enter(pos); err != nil {
			return nil, err
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		inner, err := p.parseOr()
		if err != nil {
			return nil, err
		}
		if p.tok.kind != tRParen {
			return nil, p.errAt(p.tok.pos, "expected ')' to close '(' at offset %d, found %s", pos, p.tok.describe())
		}
		p.depth--
		if err := p.advance(); err != nil {
			return nil, err
		}
		if p.isKeyword("IS") {
			return p.parseIs(inner, pos)
		}
		return inner, nil
	}
	x, err := p.parseOperand()
	if err != nil {
		return nil, err
	}
	if p.tok.kind == tOp {
		op := p.tok.op
		if err := p.advance(); err != nil {
			return nil, err
		}
		r, err := p.parseOperand()
		if err != nil {
			return nil, err
		}
		return &compare{op: op, l: x, r: r, pos: pos}, nil
	}
	if p.isKeyword("IS") {
		return p.parseIs(x, pos)
	}
	not := false
	if p.isKeyword("NOT") {
		not = true
		if err := p.advance(); err != nil {
			return nil, err
		}
		if !p.isKeyword("IN") && !p.isKeyword("BETWEEN") && !p.isKeyword("LIKE") {
			return nil, p.errAt(p.tok.pos, "expected IN, BETWEEN or LIKE after NOT, found %s", p.tok.describe())
		}
	}
	switch {
	case p.isKeyword("IN"):
		return p.parseIn(x, not, pos)
	case p.isKeyword("BETWEEN"):
		if err := p.advance(); err != nil {
			return nil, err
		}
		lo, err := p.parseOperand()
		if err != nil {
			return nil, err
		}
		if err := p.expectKeyword("AND"); err != nil {
			return nil, err
		}
		hi, err := p.parseOperand()
		if err != nil {
			return nil, err
		}
		return &between{x: x, lo: lo, hi: hi, not: not, pos: pos}, nil
	case p.isKeyword("LIKE"):
		if err := p.advance(); err != nil {
			return nil, err
		}
		if p.tok.kind != tString {
			return nil, p.errAt(p.tok.pos, "LIKE needs a string pattern, found %s", p.tok.describe())
		}
		pat := p.tok.text
		if err := p.advance(); err != nil {
			return nil, err
		}
		if p.isKeyword("ESCAPE") {
			return nil, p.errAt(p.tok.pos, "LIKE ... ESCAPE is not supported; a backslash escapes the character after it")
		}
		return &like{x: x, pattern: pat, not: not, pos: pos}, nil
	}
	// A bare operand: a boolean column or literal used as the whole predicate.
	return x, nil
}

func (p *parser) parseIs(x Expr, pos int) (Expr, error) {
	if err := p.advance(); err != nil { // IS
		return nil, err
	}
	not := false
	if p.isKeyword("NOT") {
		not = true
		if err := p.advance(); err != nil {
			return nil, err
		}
	}
	var what isKind
	switch {
	case p.isKeyword("NULL"):
		what = isNull
	case p.isKeyword("TRUE"):
		what = isTrue
	case p.isKeyword("FALSE"):
		what = isFalse
	default:
		return nil, p.errAt(p.tok.pos, "expected NULL, TRUE or FALSE after IS, found %s", p.tok.describe())
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	return &isExpr{x: x, what: what, not: not, pos: pos}, nil
}

func (p *parser) parseIn(x Expr, not bool, pos int) (Expr, error) {
	if err := p.advance(); err != nil { // IN
		return nil, err
	}
	if p.tok.kind != tLParen {
		return nil, p.errAt(p.tok.pos, "expected '(' after IN, found %s", p.tok.describe())
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind == tRParen {
		return nil, p.errAt(p.tok.pos, "empty IN list")
	}
	var list []*literal
	for {
		if len(list) == MaxInList {
			return nil, p.errAt(p.tok.pos, "IN list longer than %d values", MaxInList)
		}
		if p.tok.kind == tIdent && !keywords[strings.ToUpper(p.tok.text)] || p.tok.kind == tQuotedIdent {
			return nil, p.errAt(p.tok.pos, "IN list values must be literals, found %s", p.tok.describe())
		}
		lit, err := p.parseLiteral()
		if err != nil {
			return nil, err
		}
		list = append(list, lit)
		if p.tok.kind == tComma {
			if err := p.advance(); err != nil {
				return nil, err
			}
			continue
		}
		if p.tok.kind == tRParen {
			break
		}
		return nil, p.errAt(p.tok.pos, "expected ',' or ')' in IN list, found %s", p.tok.describe())
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	return &inList{x: x, list: list, not: not, pos: pos}, nil
}

// parseOperand parses a column or a literal.
func (p *parser) parseOperand() (Expr, error) {
	t := p.tok
	switch t.kind {
	case tQuotedIdent:
		if err := p.advance(); err != nil {
			return nil, err
		}
		return &colRef{name: t.text, pos: t.pos}, nil
	case tIdent:
		up := strings.ToUpper(t.text)
		if !keywords[up] {
			if err := p.advance(); err != nil {
				return nil, err
			}
			return &colRef{name: t.text, pos: t.pos}, nil
		}
		if up == "DATE" || up == "TIMESTAMP" {
			// A column named date or timestamp, unless a literal follows.
			save := p.lx
			next, err := p.lx.next()
			p.lx = save
			if err == nil && next.kind != tString && next.kind != tLParen {
				if err := p.advance(); err != nil {
					return nil, err
				}
				return &colRef{name: t.text, pos: t.pos}, nil
			}
		}
	}
	return p.parseLiteral()
}

func (p *parser) parseLiteral() (*literal, error) {
	t := p.tok
	switch t.kind {
	case tNumber:
		if err := p.advance(); err != nil {
			return nil, err
		}
		return numberLiteral(t.text, false, t.pos)
	case tPlus, tMinus:
		if err := p.advance(); err != nil {
			return nil, err
		}
		if p.tok.kind != tNumber {
			return nil, p.errAt(p.tok.pos, "expected a number after %s, found %s", t.describe(), p.tok.describe())
		}
		num := p.tok.text
		if err := p.advance(); err != nil {
			return nil, err
		}
		return numberLiteral(num, t.kind == tMinus, t.pos)
	case tString:
		if err := p.advance(); err != nil {
			return nil, err
		}
		return &literal{kind: litString, s: t.text, pos: t.pos}, nil
	case tIdent:
		switch strings.ToUpper(t.text) {
		case "NULL":
			return p.simpleLiteral(&literal{kind: litNull, pos: t.pos})
		case "TRUE":
			return p.simpleLiteral(&literal{kind: litBool, b: true, pos: t.pos})
		case "FALSE":
			return p.simpleLiteral(&literal{kind: litBool, b: false, pos: t.pos})
		case "DATE":
			if err := p.advance(); err != nil {
				return nil, err
			}
			if p.tok.kind != tString {
				return nil, p.errAt(p.tok.pos, "expected a string after DATE, found %s", p.tok.describe())
			}
			days, err := parseDate(p.tok.text)
			if err != nil {
				return nil, p.errAt(p.tok.pos, "bad DATE literal %s: %v", QuoteString(clip(p.tok.text, 40)), err)
			}
			if err := p.advance(); err != nil {
				return nil, err
			}
			return &literal{kind: litDate, i: days, pos: t.pos}, nil
		case "TIMESTAMP":
			return p.parseTimestamp()
		}
	}
	hint := ""
	if t.kind == tIdent {
		hint = fmt.Sprintf(" (write %s for a column of that name)", QuoteIdent(t.text))
	}
	return nil, p.errAt(t.pos, "expected a column or a literal, found %s%s", t.describe(), hint)
}

func (p *parser) simpleLiteral(l *literal) (*literal, error) {
	if err := p.advance(); err != nil {
		return nil, err
	}
	return l, nil
}

// parseTimestamp parses TIMESTAMP [(p)] 'text'. The precision exists because Lance reads
// a plain TIMESTAMP literal as microseconds; a literal whose text is finer than its
// precision is rejected rather than silently truncated.
func (p *parser) parseTimestamp() (*literal, error) {
	pos := p.tok.pos
	if err := p.advance(); err != nil {
		return nil, err
	}
	digits := 6
	if p.tok.kind == tLParen {
		if err := p.advance(); err != nil {
			return nil, err
		}
		if p.tok.kind != tNumber || (p.tok.text != "0" && p.tok.text != "3" && p.tok.text != "6" && p.tok.text != "9") {
			return nil, p.errAt(p.tok.pos, "TIMESTAMP precision must be 0, 3, 6 or 9, found %s", p.tok.describe())
		}
		digits = int(p.tok.text[0] - '0')
		if err := p.advance(); err != nil {
			return nil, err
		}
		if p.tok.kind != tRParen {
			return nil, p.errAt(p.tok.pos, "expected ')' after TIMESTAMP precision, found %s", p.tok.describe())
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
	}
	if p.tok.kind != tString {
		return nil, p.errAt(p.tok.pos, "expected a string after TIMESTAMP, found %s", p.tok.describe())
	}
	ts, fracDigits, err := parseTimestamp(p.tok.text)
	if err != nil {
		return nil, p.errAt(p.tok.pos, "bad TIMESTAMP literal %s: %v", QuoteString(clip(p.tok.text, 40)), err)
	}
	if fracDigits > digits {
		return nil, p.errAt(p.tok.pos, "TIMESTAMP literal has %d fractional digits but precision %d; write TIMESTAMP(9) for nanoseconds", fracDigits, digits)
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	return &literal{kind: litTimestamp, ts: ts, pos: pos}, nil
}

// numberLiteral turns number text into an integer literal (range-checked against
// int64) or, with a point or an exponent, a float literal (finite).
func numberLiteral(text string, neg bool, pos int) (*literal, error) {
	if !strings.ContainsAny(text, ".eE") {
		// -9223372036854775808 is out too: Lance reads it as minus an integer that
		// overflows, which becomes a float, so it could not appear in printed text.
		u, err := strconv.ParseUint(text, 10, 64)
		if err != nil || u > math.MaxInt64 {
			sign := ""
			if neg {
				sign = "-"
			}
			return nil, &SyntaxError{Offset: pos, Msg: fmt.Sprintf("integer %s%s out of range (integers must be within ±9223372036854775807)", sign, clip(text, 40))}
		}
		v := int64(u)
		if neg {
			v = -v
		}
		return &literal{kind: litInt, i: v, pos: pos}, nil
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || math.IsInf(f, 0) {
		return nil, &SyntaxError{Offset: pos, Msg: fmt.Sprintf("number %s out of range for a 64-bit float", clip(text, 40))}
	}
	if neg {
		f = -f
	}
	return &literal{kind: litFloat, f: f, pos: pos}, nil
}
