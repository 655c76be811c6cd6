package expr

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestHostileInputsStayCheap feeds filters built to be expensive, each at the input
// limit, through Parse, String, Columns and Bind. The bound is generous (a loaded CI
// machine is slow); it is there to catch work that grows faster than the input.
func TestHostileInputsStayCheap(t *testing.T) {
	fill := func(unit string) string { return strings.Repeat(unit, (MaxInputLen-100)/len(unit)) }
	many := func(f func(i int) string, sep string) string {
		var b strings.Builder
		for i := 0; b.Len() < MaxInputLen-200; i++ {
			if i > 0 {
				b.WriteString(sep)
			}
			b.WriteString(f(i))
		}
		return b.String()
	}
	cases := map[string]string{
		"thousands of distinct columns":     many(func(i int) string { return fmt.Sprintf("c%d = 1", i) }, " AND "),
		"a long OR chain of IN lists":       many(func(i int) string { return "x IN (1, 2, 3)" }, " OR "),
		"an IN list at its limit of values": "x IN (" + many(func(i int) string { return fmt.Sprint(i % MaxInList) }, ",")[:30000] + ")",
		"a huge string literal":             "s = '" + fill("''") + "'",
		"a huge quoted identifier":          "`" + fill("``") + "` = 1",
		"a huge LIKE pattern":               "s LIKE '" + fill("%a_") + "'",
		"parentheses just inside the limit": strings.Repeat("(", MaxDepth) + "x = 1" + strings.Repeat(")", MaxDepth) + " AND " + many(func(int) string { return "y = 2" }, " AND ")[:50000],
		"a number with 60000 digits":        "x = " + fill("9"),
		"a float with a huge exponent":      "x = 1e" + fill("9"),
		"unterminated string at the end":    "s = '" + fill("a"),
	}
	schema := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int64}, {Name: "s", Type: arrow.BinaryTypes.String}}, nil)
	for name, src := range cases {
		t.Run(name, func(t *testing.T) {
			if len(src) > MaxInputLen {
				t.Fatalf("case is %d bytes, over the limit", len(src))
			}
			e, err := Parse(src)
			if err != nil {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("error %v does not wrap ErrInvalid", err)
				}
				return
			}
			_ = e.Columns()
			checkRoundTrip(t, name, e)
			if _, err := Bind(e, schema); err != nil && !errors.Is(err, ErrInvalid) {
				t.Fatalf("bind error %v does not wrap ErrInvalid", err)
			}
		})
	}
}

// TestSlowLikeStopsOnCancel: a general LIKE pattern over long values is the one kernel
// whose cost per row is not bounded by the row; a cancelled ctx must stop it.
func TestSlowLikeStopsOnCancel(t *testing.T) {
	sb := array.NewStringBuilder(memory.DefaultAllocator)
	long := strings.Repeat("a", 4000)
	for i := 0; i < 20000; i++ {
		sb.Append(long)
	}
	col := sb.NewArray()
	sb.Release()
	schema := arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String}}, nil)
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, 20000)
	col.Release()
	defer rec.Release()
	e, err := Parse("s LIKE '%" + strings.Repeat("a_", 200) + "b%'")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = Select(ctx, e, rec)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v after %v, want the deadline to stop it", err, time.Since(start))
	}
}
