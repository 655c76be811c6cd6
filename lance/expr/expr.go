// Package expr is the filter language of lancectx scans, deletes and HTTP queries: a
// small subset of the SQL that Lance and LanceDB accept in a filter string, evaluated
// over Arrow record batches.
//
// The life of a filter is Parse (text to tree), Bind (resolve columns against a
// schema and type-check every comparison) and Eval (run it over a record batch). The
// tree prints itself back as canonical SQL with String: Parse(e.String()) gives the
// same tree again, and the text parses as Lance SQL too (a Delete stores its predicate
// text in the Lance transaction, where other Lance readers see it). Lance selects the
// same rows wherever it accepts the filter; Bind lists the few it refuses.
//
// Semantics follow SQL: a comparison involving NULL is NULL, NOT NULL is NULL, AND and
// OR use the three-valued truth tables, and a filter keeps only the rows for which it
// is TRUE. Input may be hostile (HTTP query filters), so Parse bounds the input length,
// the nesting depth and the size of IN lists, and nothing in this package panics on
// bad input.
//
// The grammar (keywords are case-insensitive):
//
//	filter  = or
//	or      = and { OR and }
//	and     = not { AND not }
//	not     = NOT not | pred
//	pred    = '(' or ')' [ IS [NOT] (NULL|TRUE|FALSE) ]
//	        | operand [ cmpop operand
//	                  | [NOT] IN '(' literal { ',' literal } ')'
//	                  | IS [NOT] (NULL|TRUE|FALSE)
//	                  | [NOT] BETWEEN operand AND operand
//	                  | [NOT] LIKE string ]
//	operand = column | literal
//	literal = [+|-] number | string | TRUE | FALSE | NULL
//	        | DATE string | TIMESTAMP [ '(' 0|3|6|9 ')' ] string
//	column  = [A-Za-z_][A-Za-z0-9_]* | "quoted ""name""" | `quoted ``name```
//	cmpop   = = | == | != | <> | < | <= | > | >=
//
// A LIKE pattern's `%` matches any run of characters and `_` one character; a backslash
// makes the next character literal. Integers must be within ±9223372036854775807;
// Lance reads -9223372036854775808 as a float. A TIMESTAMP literal may carry a UTC
// offset (Z, +02:00); TIMESTAMP(p) with p in 0, 3, 6, 9 gives the precision Lance reads
// it at (6 by default), and a literal with more fractional digits than that is refused.
package expr

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Limits that Parse enforces. They keep a hostile filter from costing more than a
// bounded amount of memory and stack, whatever the caller does with it afterwards.
const (
	// MaxInputLen is the longest filter text, in bytes.
	MaxInputLen = 64 << 10
	// MaxDepth bounds nesting: each parenthesis and each NOT counts one level.
	MaxDepth = 64
	// MaxInList is the largest number of values in one IN list.
	MaxInList = 10000
)

// ErrInvalid is wrapped by every error that Parse and Bind return, so a server can turn
// any of them into a 400 with one errors.Is test.
var ErrInvalid = errors.New("expr: invalid filter")

// SyntaxError reports a filter that does not parse. Offset is the byte offset into the
// filter text where the problem was found.
type SyntaxError struct {
	Offset int
	Msg    string
}

// Error reads like "expr: unexpected ')' at offset 12".
func (e *SyntaxError) Error() string {
	return fmt.Sprintf("expr: %s at offset %d", e.Msg, e.Offset)
}

// Unwrap makes errors.Is(err, ErrInvalid) hold.
func (e *SyntaxError) Unwrap() error { return ErrInvalid }

// BindError reports a filter that parses but does not fit the schema: an unknown
// column, or a comparison between types that cannot be compared. Column is the column
// involved, if any; Offset is the byte offset of the offending part of the text.
type BindError struct {
	Offset int
	Column string
	Msg    string
}

// Error reads like "expr: unknown column x; valid columns: a, b (at offset 0)".
func (e *BindError) Error() string {
	return fmt.Sprintf("expr: %s (at offset %d)", e.Msg, e.Offset)
}

// Unwrap makes errors.Is(err, ErrInvalid) hold.
func (e *BindError) Unwrap() error { return ErrInvalid }

// Expr is a parsed filter. String prints canonical SQL that Parse accepts again and
// Lance accepts too; Columns lists the distinct column names it references, in order
// of first appearance.
type Expr interface {
	String() string
	Columns() []string

	// write appends the canonical SQL of the node to b.
	write(b *strings.Builder)
	// cols appends the column names referenced by the node (with repeats).
	cols(dst []string) []string
	// offset is the byte offset of the node in the text it was parsed from.
	offset() int
}

// cmpOp is a comparison operator.
type cmpOp uint8

const (
	opEq cmpOp = iota
	opNe
	opLt
	opLe
	opGt
	opGe
)

func (o cmpOp) String() string {
	switch o {
	case opEq:
		return "="
	case opNe:
		return "!="
	case opLt:
		return "<"
	case opLe:
		return "<="
	case opGt:
		return ">"
	default:
		return ">="
	}
}

// flip returns the operator that gives the same answer with the operands swapped.
func (o cmpOp) flip() cmpOp {
	switch o {
	case opLt:
		return opGt
	case opLe:
		return opGe
	case opGt:
		return opLt
	case opGe:
		return opLe
	default:
		return o
	}
}

// holds reports whether the operator is true for a three-way comparison result c.
func (o cmpOp) holds(c int) bool {
	switch o {
	case opEq:
		return c == 0
	case opNe:
		return c != 0
	case opLt:
		return c < 0
	case opLe:
		return c <= 0
	case opGt:
		return c > 0
	default:
		return c >= 0
	}
}

// colRef is a column reference.
type colRef struct {
	name string
	pos  int
}

// litKind says which field of a literal holds its value.
type litKind uint8

const (
	litNull litKind = iota
	litBool
	litInt
	litFloat
	litString
	litDate
	litTimestamp
)

func (k litKind) String() string {
	switch k {
	case litNull:
		return "NULL"
	case litBool:
		return "boolean"
	case litInt:
		return "integer"
	case litFloat:
		return "float"
	case litString:
		return "string"
	case litDate:
		return "date"
	default:
		return "timestamp"
	}
}

// literal is a constant. A date is held as days since 1970-01-01; a timestamp as the
// wall-clock time it spells (seconds and nanoseconds, read as if UTC) plus, when the
// text carried one, its UTC offset. Keeping the wall clock rather than an instant lets a
// literal without offset be read in the time zone of the column it is compared with,
// as Lance does.
type literal struct {
	kind litKind
	b    bool
	i    int64 // litInt, and days for litDate
	f    float64
	s    string
	ts   tsValue
	pos  int
}

// tsValue is a timestamp literal.
type tsValue struct {
	wall      int64 // seconds since the epoch of the wall-clock time, read as UTC
	nsec      int32 // 0..999,999,999
	hasOffset bool
	offset    int32 // seconds east of UTC, when hasOffset
}

// compare is `l op r`, where each side is a column or a literal.
type compare struct {
	op   cmpOp
	l, r Expr
	pos  int
}

// inList is `x [NOT] IN (v, ...)`.
type inList struct {
	x    Expr
	list []*literal
	not  bool
	pos  int
}

// isKind is what an IS test checks for.
type isKind uint8

const (
	isNull isKind = iota
	isTrue
	isFalse
)

// isExpr is `x IS [NOT] NULL|TRUE|FALSE`; x is a column, a literal or a parenthesized
// filter.
type isExpr struct {
	x    Expr
	what isKind
	not  bool
	pos  int
}

// between is `x [NOT] BETWEEN lo AND hi`, which SQL defines as `x >= lo AND x <= hi`.
type between struct {
	x, lo, hi Expr
	not       bool
	pos       int
}

// like is `x [NOT] LIKE 'pattern'`; `%` matches any run of characters, `_` one
// character, and a backslash makes the next character literal (Lance's rule).
type like struct {
	x       Expr
	pattern string
	not     bool
	pos     int
}

// andExpr and orExpr hold two or more terms; the parser flattens nested chains, which
// is sound because both are associative in three-valued logic too.
type andExpr struct {
	terms []Expr
	pos   int
}

type orExpr struct {
	terms []Expr
	pos   int
}

type notExpr struct {
	x   Expr
	pos int
}

var (
	_ Expr = (*colRef)(nil)
	_ Expr = (*literal)(nil)
	_ Expr = (*compare)(nil)
	_ Expr = (*inList)(nil)
	_ Expr = (*isExpr)(nil)
	_ Expr = (*between)(nil)
	_ Expr = (*like)(nil)
	_ Expr = (*andExpr)(nil)
	_ Expr = (*orExpr)(nil)
	_ Expr = (*notExpr)(nil)
)

func exprString(e Expr) string {
	var b strings.Builder
	e.write(&b)
	return b.String()
}

func exprColumns(e Expr) []string {
	all := e.cols(nil)
	out := all[:0]
	seen := make(map[string]bool, len(all))
	for _, c := range all {
		if !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	return slices.Clip(out)
}

func (e *colRef) String() string     { return exprString(e) }
func (e *literal) String() string    { return exprString(e) }
func (e *compare) String() string    { return exprString(e) }
func (e *inList) String() string     { return exprString(e) }
func (e *isExpr) String() string     { return exprString(e) }
func (e *between) String() string    { return exprString(e) }
func (e *like) String() string       { return exprString(e) }
func (e *andExpr) String() string    { return exprString(e) }
func (e *orExpr) String() string     { return exprString(e) }
func (e *notExpr) String() string    { return exprString(e) }
func (e *colRef) Columns() []string  { return exprColumns(e) }
func (e *literal) Columns() []string { return exprColumns(e) }
func (e *compare) Columns() []string { return exprColumns(e) }
func (e *inList) Columns() []string  { return exprColumns(e) }
func (e *isExpr) Columns() []string  { return exprColumns(e) }
func (e *between) Columns() []string { return exprColumns(e) }
func (e *like) Columns() []string    { return exprColumns(e) }
func (e *andExpr) Columns() []string { return exprColumns(e) }
func (e *orExpr) Columns() []string  { return exprColumns(e) }
func (e *notExpr) Columns() []string { return exprColumns(e) }

func (e *colRef) offset() int  { return e.pos }
func (e *literal) offset() int { return e.pos }
func (e *compare) offset() int { return e.pos }
func (e *inList) offset() int  { return e.pos }
func (e *isExpr) offset() int  { return e.pos }
func (e *between) offset() int { return e.pos }
func (e *like) offset() int    { return e.pos }
func (e *andExpr) offset() int { return e.pos }
func (e *orExpr) offset() int  { return e.pos }
func (e *notExpr) offset() int { return e.pos }

func (e *colRef) cols(dst []string) []string  { return append(dst, e.name) }
func (e *literal) cols(dst []string) []string { return dst }
func (e *compare) cols(dst []string) []string { return e.r.cols(e.l.cols(dst)) }
func (e *inList) cols(dst []string) []string  { return e.x.cols(dst) }
func (e *isExpr) cols(dst []string) []string  { return e.x.cols(dst) }
func (e *between) cols(dst []string) []string { return e.hi.cols(e.lo.cols(e.x.cols(dst))) }
func (e *like) cols(dst []string) []string    { return e.x.cols(dst) }
func (e *notExpr) cols(dst []string) []string { return e.x.cols(dst) }
func (e *andExpr) cols(dst []string) []string {
	for _, t := range e.terms {
		dst = t.cols(dst)
	}
	return dst
}
func (e *orExpr) cols(dst []string) []string {
	for _, t := range e.terms {
		dst = t.cols(dst)
	}
	return dst
}

func (e *colRef) write(b *strings.Builder) { b.WriteString(QuoteIdent(e.name)) }

func (e *literal) write(b *strings.Builder) {
	switch e.kind {
	case litNull:
		b.WriteString("NULL")
	case litBool:
		if e.b {
			b.WriteString("TRUE")
		} else {
			b.WriteString("FALSE")
		}
	case litInt:
		b.WriteString(strconv.FormatInt(e.i, 10))
	case litFloat:
		b.WriteString(formatFloat(e.f))
	case litString:
		b.WriteString(QuoteString(e.s))
	case litDate:
		b.WriteString("DATE '")
		b.WriteString(time.Unix(e.i*86400, 0).UTC().Format("2006-01-02"))
		b.WriteByte('\'')
	case litTimestamp:
		writeTimestamp(b, e.ts, false)
	}
}

// writeLiterals prints the literals of one IN list or BETWEEN. Lance gives such a group
// one common type, truncating a TIMESTAMP(9) among plain (microsecond) TIMESTAMPs, so
// when any literal of the group needs nanoseconds, every timestamp in it is printed
// as TIMESTAMP(9).
func writeLiterals(b *strings.Builder, sep string, lits ...Expr) {
	nanos := false
	for _, e := range lits {
		if l, ok := e.(*literal); ok && l.kind == litTimestamp && l.ts.nsec%1000 != 0 {
			nanos = true
		}
	}
	for i, e := range lits {
		if i > 0 {
			b.WriteString(sep)
		}
		if l, ok := e.(*literal); ok && l.kind == litTimestamp {
			writeTimestamp(b, l.ts, nanos)
			continue
		}
		writeOperand(b, e)
	}
}

// formatFloat prints the shortest text that reads back as the same float64 and that
// still reads as a float, not an integer.
func formatFloat(f float64) string {
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eEnN") {
		s += ".0"
	}
	return s
}

// writeTimestamp prints TIMESTAMP 'YYYY-MM-DD HH:MM:SS[.fff][+HH:MM]'. Lance reads a
// plain TIMESTAMP literal at microsecond precision, so a literal with nanoseconds is
// printed as TIMESTAMP(9) to keep them.
func writeTimestamp(b *strings.Builder, ts tsValue, nanos bool) {
	if nanos || ts.nsec%1000 != 0 {
		b.WriteString("TIMESTAMP(9) '")
	} else {
		b.WriteString("TIMESTAMP '")
	}
	t := time.Unix(ts.wall, 0).UTC()
	b.WriteString(t.Format("2006-01-02 15:04:05"))
	if ts.nsec != 0 {
		frac := fmt.Sprintf("%09d", ts.nsec)
		b.WriteByte('.')
		b.WriteString(strings.TrimRight(frac, "0"))
	}
	if ts.hasOffset {
		off := ts.offset
		sign := byte('+')
		if off < 0 {
			sign = '-'
			off = -off
		}
		fmt.Fprintf(b, "%c%02d:%02d", sign, off/3600, off/60%60)
	}
	b.WriteByte('\'')
}

func (e *compare) write(b *strings.Builder) {
	e.l.write(b)
	b.WriteByte(' ')
	b.WriteString(e.op.String())
	b.WriteByte(' ')
	e.r.write(b)
}

func (e *inList) write(b *strings.Builder) {
	writeOperand(b, e.x)
	if e.not {
		b.WriteString(" NOT IN (")
	} else {
		b.WriteString(" IN (")
	}
	lits := make([]Expr, len(e.list))
	for i, v := range e.list {
		lits[i] = v
	}
	writeLiterals(b, ", ", lits...)
	b.WriteByte(')')
}

func (e *isExpr) write(b *strings.Builder) {
	writeOperand(b, e.x)
	b.WriteString(" IS ")
	if e.not {
		b.WriteString("NOT ")
	}
	switch e.what {
	case isNull:
		b.WriteString("NULL")
	case isTrue:
		b.WriteString("TRUE")
	default:
		b.WriteString("FALSE")
	}
}

func (e *between) write(b *strings.Builder) {
	writeOperand(b, e.x)
	if e.not {
		b.WriteString(" NOT BETWEEN ")
	} else {
		b.WriteString(" BETWEEN ")
	}
	writeLiterals(b, " AND ", e.lo, e.hi)
}

func (e *like) write(b *strings.Builder) {
	writeOperand(b, e.x)
	if e.not {
		b.WriteString(" NOT LIKE ")
	} else {
		b.WriteString(" LIKE ")
	}
	b.WriteString(QuoteString(e.pattern))
}

func (e *andExpr) write(b *strings.Builder) {
	for i, t := range e.terms {
		if i > 0 {
			b.WriteString(" AND ")
		}
		writeTerm(b, t)
	}
}

func (e *orExpr) write(b *strings.Builder) {
	for i, t := range e.terms {
		if i > 0 {
			b.WriteString(" OR ")
		}
		writeTerm(b, t)
	}
}

func (e *notExpr) write(b *strings.Builder) {
	b.WriteString("NOT ")
	switch e.x.(type) {
	case *colRef, *literal, *notExpr:
		e.x.write(b)
	default:
		b.WriteByte('(')
		e.x.write(b)
		b.WriteByte(')')
	}
}

// writeOperand prints the subject of a predicate, in parentheses unless it is a plain
// column or literal.
func writeOperand(b *strings.Builder, e Expr) {
	switch e.(type) {
	case *colRef, *literal:
		e.write(b)
	default:
		b.WriteByte('(')
		e.write(b)
		b.WriteByte(')')
	}
}

// writeTerm prints a term of AND or OR, with parentheses around a nested AND or OR so
// the reader never has to remember that AND binds tighter.
func writeTerm(b *strings.Builder, e Expr) {
	switch e.(type) {
	case *andExpr, *orExpr:
		b.WriteByte('(')
		e.write(b)
		b.WriteByte(')')
	default:
		e.write(b)
	}
}

// QuoteString returns s as a SQL string literal: in single quotes, with each quote
// doubled. Use it to build filter text from values, never plain concatenation.
func QuoteString(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// QuoteIdent returns name as it must appear in filter text: bare when it is a plain
// identifier that no SQL dialect reserves, otherwise in backticks (Lance's identifier
// quote) with each backtick doubled.
func QuoteIdent(name string) string {
	if isBareIdent(name) && !sqlKeywords[strings.ToLower(name)] {
		return name
	}
	return "`" + strings.ReplaceAll(name, "`", "``") + "`"
}

func isBareIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || i > 0 && '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// sqlKeywords are quoted by QuoteIdent even though they look like plain identifiers:
// our own keywords, and words that SQL parsers (Lance's among them) treat specially
// somewhere in a WHERE clause. A name quoted without need costs nothing; a keyword left
// bare turns a valid filter into a syntax error in another reader.
var sqlKeywords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`
		all and any array as asc between binary both by case cast ceil collate column
		constraint convert create cross cube current current_date current_time
		current_timestamp current_user date datetime day decimal default delete desc
		distinct div double else end escape except exists extract false fetch filter float
		floor for from full group grouping having hour ilike in inner int integer interval
		intersect into is join lambda lateral leading left like limit localtime
		localtimestamp map match minute month natural not null nulls of offset on only or
		order outer over overlaps overlay partition position prior qualify range regexp
		right rlike rollup row rows second select session_user set similar some string
		struct substring system_user table then time timestamp to trailing trim true
		try_cast safe_cast union unique unknown user using values when where window with
		within xor year`) {
		m[w] = true
	}
	return m
}()

// bindErrorf builds a BindError located at a node.
func bindErrorf(at Expr, column string, format string, args ...any) error {
	return &BindError{Offset: at.offset(), Column: column, Msg: fmt.Sprintf(format, args...)}
}
