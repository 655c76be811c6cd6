package expr

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

// sameTree compares two trees, ignoring source offsets.
func sameTree(a, b Expr) bool {
	switch x := a.(type) {
	case *colRef:
		y, ok := b.(*colRef)
		return ok && x.name == y.name
	case *literal:
		y, ok := b.(*literal)
		if !ok || x.kind != y.kind {
			return false
		}
		switch x.kind {
		case litBool:
			return x.b == y.b
		case litInt, litDate:
			return x.i == y.i
		case litFloat:
			return x.f == y.f && math.Signbit(x.f) == math.Signbit(y.f)
		case litString:
			return x.s == y.s
		case litTimestamp:
			return x.ts == y.ts
		}
		return true
	case *compare:
		y, ok := b.(*compare)
		return ok && x.op == y.op && sameTree(x.l, y.l) && sameTree(x.r, y.r)
	case *inList:
		y, ok := b.(*inList)
		if !ok || x.not != y.not || !sameTree(x.x, y.x) || len(x.list) != len(y.list) {
			return false
		}
		for i := range x.list {
			if !sameTree(x.list[i], y.list[i]) {
				return false
			}
		}
		return true
	case *isExpr:
		y, ok := b.(*isExpr)
		return ok && x.what == y.what && x.not == y.not && sameTree(x.x, y.x)
	case *between:
		y, ok := b.(*between)
		return ok && x.not == y.not && sameTree(x.x, y.x) && sameTree(x.lo, y.lo) && sameTree(x.hi, y.hi)
	case *like:
		y, ok := b.(*like)
		return ok && x.not == y.not && x.pattern == y.pattern && sameTree(x.x, y.x)
	case *notExpr:
		y, ok := b.(*notExpr)
		return ok && sameTree(x.x, y.x)
	case *andExpr:
		y, ok := b.(*andExpr)
		return ok && sameTerms(x.terms, y.terms)
	case *orExpr:
		y, ok := b.(*orExpr)
		return ok && sameTerms(x.terms, y.terms)
	}
	return false
}

func sameTerms(a, b []Expr) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !sameTree(a[i], b[i]) {
			return false
		}
	}
	return true
}

// checkRoundTrip asserts the round-trip property on a parsed tree.
func checkRoundTrip(t testing.TB, src string, e Expr) {
	t.Helper()
	s := e.String()
	again, err := Parse(s)
	if err != nil {
		t.Fatalf("Parse(%q).String() = %q does not parse: %v", src, s, err)
	}
	if !sameTree(e, again) {
		t.Fatalf("Parse(%q).String() = %q parses to a different tree", src, s)
	}
	if s2 := again.String(); s2 != s {
		t.Fatalf("String not stable for %q: %q then %q", src, s, s2)
	}
}

func TestParseValid(t *testing.T) {
	cases := map[string]struct{ src, want string }{
		"a simple equality prints canonically":               {"x=1", "x = 1"},
		"keywords are case-insensitive":                      {"x in (1,2) and NOT y is not null", "x IN (1, 2) AND NOT (y IS NOT NULL)"},
		"<> and == are other spellings":                      {"a <> 1 OR b == 2", "a != 1 OR b = 2"},
		"a literal may stand on the left":                    {"5 < x", "5 < x"},
		"negative and positive numbers":                      {"x > -5 AND y < +3 AND z = - 7", "x > -5 AND y < 3 AND z = -7"},
		"the smallest integer Lance can read parses":         {"x = -9223372036854775807", "x = -9223372036854775807"},
		"floats keep a point or exponent":                    {"x = 2.0 OR x = 1e3 OR x = .5 OR x = 1.5E-7", "x = 2.0 OR x = 1000.0 OR x = 0.5 OR x = 1.5e-07"},
		"huge floats print with an exponent":                 {"x < 1e300", "x < 1e+300"},
		"strings double their quotes":                        {"name = 'O''Brien'", "name = 'O''Brien'"},
		"double-quoted identifiers print in backticks":       {`"weird name" = 'x'`, "`weird name` = 'x'"},
		"backticked identifiers keep doubled backticks":      {"`a``b` = 1", "`a``b` = 1"},
		"keyword-like column names are quoted":               {"`select` = 1 AND `order` > 2", "`select` = 1 AND `order` > 2"},
		"a column called timestamp needs no quotes":          {"timestamp > 5", "`timestamp` > 5"},
		"a column called date needs no quotes":               {"date IS NULL", "`date` IS NULL"},
		"identifiers are case-sensitive and kept":            {"userId = 3", "userId = 3"},
		"AND binds tighter than OR":                          {"a = 1 OR b = 2 AND c = 3", "a = 1 OR (b = 2 AND c = 3)"},
		"parentheses override precedence":                    {"(a = 1 OR b = 2) AND c = 3", "(a = 1 OR b = 2) AND c = 3"},
		"nested ANDs flatten":                                {"a = 1 AND (b = 2 AND c = 3)", "a = 1 AND b = 2 AND c = 3"},
		"redundant parentheses vanish":                       {"((((x = 1))))", "x = 1"},
		"NOT applies to the whole comparison":                {"NOT x = 1", "NOT (x = 1)"},
		"NOT NOT is kept":                                    {"NOT NOT done", "NOT NOT done"},
		"IN, NOT IN with mixed literals":                     {"x NOT IN (1, NULL, -2.5)", "x NOT IN (1, NULL, -2.5)"},
		"IS TRUE and IS NOT FALSE":                           {"done IS TRUE OR done IS NOT FALSE", "done IS TRUE OR done IS NOT FALSE"},
		"IS applies to a parenthesized condition":            {"(x > 1) IS NOT TRUE", "(x > 1) IS NOT TRUE"},
		"BETWEEN takes its own AND":                          {"x BETWEEN 1 AND 5 AND y = 2", "x BETWEEN 1 AND 5 AND y = 2"},
		"NOT BETWEEN":                                        {"x not between -1 and 1.5", "x NOT BETWEEN -1 AND 1.5"},
		"LIKE and NOT LIKE":                                  {"s LIKE 'ab%' OR s NOT LIKE '_\\%'", "s LIKE 'ab%' OR s NOT LIKE '_\\%'"},
		"date literals":                                      {"d >= date '2024-01-02'", "d >= DATE '2024-01-02'"},
		"timestamp literals print their fraction":            {"t < timestamp '2024-01-02 03:04:05.120'", "t < TIMESTAMP '2024-01-02 03:04:05.12'"},
		"a T separator and a zone offset are accepted":       {"t = TIMESTAMP '2024-01-02T03:04:05Z'", "t = TIMESTAMP '2024-01-02 03:04:05+00:00'"},
		"negative offsets print as written":                  {"t = timestamp '2024-01-02 03:04:05-0530'", "t = TIMESTAMP '2024-01-02 03:04:05-05:30'"},
		"a date alone is a timestamp at midnight":            {"t = TIMESTAMP '2024-01-02'", "t = TIMESTAMP '2024-01-02 00:00:00'"},
		"nanosecond timestamps print with precision 9":       {"t = TIMESTAMP(9) '2024-01-02 03:04:05.123456789'", "t = TIMESTAMP(9) '2024-01-02 03:04:05.123456789'"},
		"a BETWEEN with one nanosecond bound prints both so": {"t BETWEEN TIMESTAMP '2024-01-02' AND TIMESTAMP(9) '2024-01-02 00:00:00.000000001'", "t BETWEEN TIMESTAMP(9) '2024-01-02 00:00:00' AND TIMESTAMP(9) '2024-01-02 00:00:00.000000001'"},
		"an IN list with one nanosecond value prints all so": {"t IN (TIMESTAMP(9) '2024-01-02 00:00:00.000000001', TIMESTAMP '2024-01-02', DATE '2024-01-02')", "t IN (TIMESTAMP(9) '2024-01-02 00:00:00.000000001', TIMESTAMP(9) '2024-01-02 00:00:00', DATE '2024-01-02')"},
		"precision 0 with a whole second is plain":           {"t = TIMESTAMP(0) '2024-01-02 03:04:05.000'", "t = TIMESTAMP '2024-01-02 03:04:05'"},
		"a bare boolean column is a condition":               {"done", "done"},
		"TRUE, FALSE and NULL literals":                      {"TRUE AND NOT FALSE OR NULL", "(TRUE AND NOT FALSE) OR NULL"},
		"comparing two columns":                              {"a<b", "a < b"},
		"comparing two literals":                             {"1 = 1", "1 = 1"},
		"whitespace of every kind is skipped":                {"\tx\n=\r\n1 ", "x = 1"},
		"unicode in strings and quoted identifiers":          {"`名前` = '日本'", "`名前` = '日本'"},
		"a NULL comparison parses (and is always NULL)":      {"x = NULL", "x = NULL"},
		"an IN list can hold strings and dates":              {"x IN ('a', DATE '2020-02-29')", "x IN ('a', DATE '2020-02-29')"},
		"long OR chains stay flat":                           {"a=1 OR a=2 OR a=3 OR a=4", "a = 1 OR a = 2 OR a = 3 OR a = 4"},
		"a keyword is not a prefix match":                    {"android = 1 AND order_id = 2 AND notes = 'x'", "android = 1 AND order_id = 2 AND notes = 'x'"},
		"an identifier may start with an underscore":         {"_rowid < 10", "_rowid < 10"},
		"IN with NOT before the subject is a NOT node":       {"NOT x IN (1)", "NOT (x IN (1))"},
		"a parenthesized IS NULL of an OR":                   {"(a OR b) IS NULL", "(a OR b) IS NULL"},
		"the empty string literal":                           {"s = ''", "s = ''"},
		"a string holding only a quote":                      {"s = ''''", "s = ''''"},
		"date and timestamp columns used by name nearby":     {"date = timestamp", "`date` = `timestamp`"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e, err := Parse(tc.src)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.src, err)
			}
			if got := e.String(); got != tc.want {
				t.Fatalf("Parse(%q).String() = %q, want %q", tc.src, got, tc.want)
			}
			checkRoundTrip(t, tc.src, e)
		})
	}
}

func TestParseErrors(t *testing.T) {
	cases := map[string]struct {
		src    string
		offset int
		msg    string
	}{
		"an empty filter":                                  {"", 0, "empty filter"},
		"only spaces":                                      {"   ", 3, "empty filter"},
		"a stray closing parenthesis":                      {"x = 1 AND y )", 12, "unexpected ')'"},
		"an unclosed parenthesis":                          {"(x = 1", 6, "expected ')' to close '(' at offset 0"},
		"a missing right operand":                          {"x = ", 4, "expected a column or a literal, found end of input"},
		"a dangling AND":                                   {"x = 1 AND", 9, "found end of input"},
		"two comparisons in a row":                         {"x = 1 = 2", 6, "unexpected '='"},
		"an unterminated string":                           {"x = 'abc", 4, "unterminated string"},
		"an unterminated quoted identifier":                {"`abc = 1", 0, "unterminated quoted identifier"},
		"an empty quoted identifier":                       {`"" = 1`, 0, "empty quoted identifier"},
		"an unknown character":                             {"x = 1; drop table t", 5, "unexpected character ';'"},
		"a lone bang":                                      {"x ! 1", 2, "unexpected character '!'"},
		"an integer beyond int64":                          {"x = 9223372036854775808", 4, "out of range"},
		"a negative integer beyond int64":                  {"x = -9223372036854775809", 4, "out of range"},
		"the smallest int64, which Lance reads as a float": {"x = -9223372036854775808", 4, "within ±9223372036854775807"},
		"a float beyond float64":                           {"x = 1e400", 4, "out of range"},
		"a malformed exponent":                             {"x = 1e+", 5, "malformed exponent"},
		"letters glued to a number":                        {"x = 12abc", 6, "after number"},
		"two points in a number":                           {"x = 1.2.3", 7, "after number"},
		"an empty IN list":                                 {"x IN ()", 6, "empty IN list"},
		"a column in an IN list":                           {"x IN (1, y)", 9, "IN list values must be literals"},
		"IN without parentheses":                           {"x IN 1", 5, "expected '(' after IN"},
		"a missing comma in an IN list":                    {"x IN (1 2)", 8, "expected ',' or ')'"},
		"NOT before something other than IN":               {"x NOT = 1", 6, "expected IN, BETWEEN or LIKE after NOT"},
		"IS followed by a number":                          {"x IS 1", 5, "expected NULL, TRUE or FALSE after IS"},
		"BETWEEN without AND":                              {"x BETWEEN 1 OR 2", 12, "expected AND"},
		"LIKE with a non-string pattern":                   {"x LIKE 5", 7, "LIKE needs a string pattern"},
		"LIKE with ESCAPE":                                 {"x LIKE 'a' ESCAPE '!'", 11, "ESCAPE is not supported"},
		"a keyword used as a column":                       {"and = 1", 0, "expected a column or a literal, found keyword AND (write `and` for a column of that name)"},
		"a bad date":                                       {"d = DATE '2023-02-29'", 9, "no such date"},
		"a date with garbage":                              {"d = DATE '2023-02-01x'", 9, "want YYYY-MM-DD"},
		"a timestamp with a bad time":                      {"t = TIMESTAMP '2023-02-01 25:00:00'", 14, "no such time of day"},
		"a timestamp with ten fractional digits":           {"t = TIMESTAMP(9) '2023-02-01 01:00:00.1234567891'", 17, "1 to 9 fractional digits"},
		"nanoseconds in a plain TIMESTAMP":                 {"t = TIMESTAMP '2023-02-01 01:00:00.1234567'", 14, "write TIMESTAMP(9)"},
		"milliseconds in TIMESTAMP(0)":                     {"t = TIMESTAMP(0) '2023-02-01 01:00:00.5'", 17, "precision 0"},
		"an unsupported TIMESTAMP precision":               {"t = TIMESTAMP(4) '2023-02-01'", 14, "precision must be 0, 3, 6 or 9"},
		"a bad offset":                                     {"t = TIMESTAMP '2023-02-01 01:00:00+25:00'", 14, "UTC offset"},
		"a sign without a number":                          {"x = -y", 5, "expected a number after '-'"},
		"an operator where a value belongs":                {"= 1", 0, "expected a column or a literal, found '='"},
		"a trailing comma in an IN list":                   {"x IN (1,)", 8, "found ')'"},
		"a NOT with nothing after it":                      {"NOT", 3, "found end of input"},
		"a keyword after a complete condition":             {"x = 1 y = 2", 6, `unexpected identifier "y"`},
		"an invalid UTF-8 byte":                            {"s = '\xff'", 5, "invalid UTF-8"},
		"a parenthesized condition compared to values":     {"(x = 1) = TRUE", 8, "unexpected '='"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e, err := Parse(tc.src)
			if err == nil {
				t.Fatalf("Parse(%q) = %q, want an error", tc.src, e)
			}
			var se *SyntaxError
			if !errors.As(err, &se) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("Parse(%q) error %v is not a *SyntaxError wrapping ErrInvalid", tc.src, err)
			}
			if se.Offset != tc.offset || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Parse(%q) = %q (offset %d), want offset %d and %q", tc.src, err, se.Offset, tc.offset, tc.msg)
			}
			if !strings.HasPrefix(err.Error(), "expr: ") {
				t.Fatalf("error %q lacks the package prefix", err)
			}
		})
	}
}

func TestParseErrorMessageShape(t *testing.T) {
	_, err := Parse("(a = 1 AND b))")
	if err == nil || err.Error() != "expr: unexpected ')' at offset 13" {
		t.Fatalf("got %v", err)
	}
}

func TestParseLimits(t *testing.T) {
	t.Run("input longer than the limit is rejected before parsing", func(t *testing.T) {
		src := "x = '" + strings.Repeat("a", MaxInputLen) + "'"
		_, err := Parse(src)
		var se *SyntaxError
		if !errors.As(err, &se) || !strings.Contains(se.Msg, "longer than") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("nesting at the limit parses", func(t *testing.T) {
		src := strings.Repeat("(", MaxDepth) + "x = 1" + strings.Repeat(")", MaxDepth)
		if _, err := Parse(src); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("parentheses one deeper than the limit fail", func(t *testing.T) {
		src := strings.Repeat("(", MaxDepth+1) + "x = 1" + strings.Repeat(")", MaxDepth+1)
		_, err := Parse(src)
		var se *SyntaxError
		if !errors.As(err, &se) || se.Offset != MaxDepth || !strings.Contains(se.Msg, "nested deeper") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("NOT chains count toward depth", func(t *testing.T) {
		src := strings.Repeat("NOT ", MaxDepth+1) + "x"
		if _, err := Parse(src); err == nil || !strings.Contains(err.Error(), "nested deeper") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("a deep mix of NOT and parentheses 10k levels deep fails fast without stack growth", func(t *testing.T) {
		src := strings.Repeat("NOT (", 10000) + "x" + strings.Repeat(")", 10000)
		if _, err := Parse(src); err == nil {
			t.Fatal("want error")
		}
	})
	t.Run("an IN list at the limit parses", func(t *testing.T) {
		src := "x IN (" + strings.TrimSuffix(strings.Repeat("1,", MaxInList), ",") + ")"
		if _, err := Parse(src); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("an IN list over the limit fails", func(t *testing.T) {
		src := "x IN (" + strings.TrimSuffix(strings.Repeat("1,", MaxInList+1), ",") + ")"
		if _, err := Parse(src); err == nil || !strings.Contains(err.Error(), "IN list longer") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("a long flat AND chain is fine", func(t *testing.T) {
		src := strings.TrimSuffix(strings.Repeat("x = 1 AND ", 5000), " AND ")
		e, err := Parse(src)
		if err != nil {
			t.Fatal(err)
		}
		checkRoundTrip(t, src, e)
	})
}

func TestColumns(t *testing.T) {
	e, err := Parse("b = 1 AND (a > b OR `c d` IS NULL) AND a BETWEEN x AND y AND s LIKE 'q'")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"b", "a", "c d", "x", "y", "s"}
	if got := e.Columns(); !slices.Equal(got, want) {
		t.Fatalf("Columns() = %q, want %q", got, want)
	}
}

func TestQuoting(t *testing.T) {
	cases := map[string]struct{ in, want string }{
		"a plain name stays bare":        {"reward", "reward"},
		"a name with a space":            {"a b", "`a b`"},
		"a name starting with a digit":   {"1st", "`1st`"},
		"a reserved word":                {"from", "`from`"},
		"a reserved word in upper case":  {"SELECT", "`SELECT`"},
		"a backtick is doubled":          {"a`b", "`a``b`"},
		"a dotted name is one name":      {"a.b", "`a.b`"},
		"a string's quote is doubled":    {"it's", "`it's`"},
		"the empty name must be quoted":  {"", "``"},
		"unicode letters must be quoted": {"größe", "`größe`"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := QuoteIdent(tc.in); got != tc.want {
				t.Fatalf("QuoteIdent(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
	if got := QuoteString("it's"); got != "'it''s'" {
		t.Fatalf("QuoteString = %q", got)
	}
	// Text built with the quoting helpers parses to the intended values.
	src := QuoteIdent("we`ird") + " = " + QuoteString("O'Brien")
	e, err := Parse(src)
	if err != nil {
		t.Fatal(err)
	}
	c := e.(*compare)
	if c.l.(*colRef).name != "we`ird" || c.r.(*literal).s != "O'Brien" {
		t.Fatalf("parsed %q wrong", src)
	}
}
