package expr

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

// dump renders a syntax tree fully parenthesized.
func dump(a *ast) string {
	switch a.kind {
	case astLit:
		switch a.lit.k {
		case kInt:
			return fmt.Sprint(a.lit.i)
		case kFloat:
			return fmt.Sprint(a.lit.f) + "f"
		case kString:
			return fmt.Sprintf("%q", a.lit.s)
		case kBool:
			return fmt.Sprint(a.lit.b)
		}
		return "null"
	case astColumn:
		return "$" + a.name
	case astUnary:
		return "(" + opName(a.op) + " " + dump(a.args[0]) + ")"
	case astBinary:
		return "(" + dump(a.args[0]) + " " + opName(a.op) + " " + dump(a.args[1]) + ")"
	case astLogic:
		parts := make([]string, len(a.args))
		for i, x := range a.args {
			parts[i] = dump(x)
		}
		return "(" + strings.Join(parts, " "+opName(a.op)+" ") + ")"
	case astIsNull:
		if a.negate {
			return "(" + dump(a.args[0]) + " is not null)"
		}
		return "(" + dump(a.args[0]) + " is null)"
	case astIn:
		parts := make([]string, len(a.list))
		for i, x := range a.list {
			parts[i] = dump(x)
		}
		op := " in "
		if a.negate {
			op = " not in "
		}
		return "(" + dump(a.args[0]) + op + "[" + strings.Join(parts, ", ") + "])"
	case astCall:
		parts := make([]string, len(a.args))
		for i, x := range a.args {
			parts[i] = dump(x)
		}
		return a.name + "(" + strings.Join(parts, ", ") + ")"
	}
	return "?"
}

func TestParse(t *testing.T) {
	t.Parallel()
	cases := []struct{ src, want string }{
		{"1 + 2 * 3", "(1 + (2 * 3))"},
		{"(1 + 2) * 3", "((1 + 2) * 3)"},
		{"10 - 4 - 3", "((10 - 4) - 3)"},
		{"8 / 4 / 2 % 3", "(((8 / 4) / 2) % 3)"},
		{"-2 * 3", "(-2 * 3)"},
		{"- a * 3", "((- $a) * 3)"},
		{"- - 2", "(- -2)"},
		{"a - -1", "($a - -1)"},
		{"a-1", "($a - 1)"},
		{"a + b > c * 2", "(($a + $b) > ($c * 2))"},
		{"a = 1 or b = 2 and c = 3", "(($a == 1) or (($b == 2) and ($c == 3)))"},
		{"a or b or c", "($a or $b or $c)"},
		{"a and b and c or d", "(($a and $b and $c) or $d)"},
		{"a && b || !c", "(($a and $b) or (not $c))"},
		{"not a and b", "((not $a) and $b)"},
		{"NOT a == 1", "(not ($a == 1))"},
		{"not not a", "(not (not $a))"},
		{"a <> 1", "($a != 1)"},
		{"a != 1", "($a != 1)"},
		{"a <= 1", "($a <= 1)"},
		{"a >= 1", "($a >= 1)"},
		{"a is null", "($a is null)"},
		{"a IS NOT NULL", "($a is not null)"},
		{"a + 1 is null", "(($a + 1) is null)"},
		{"a in (1, -2, 3.5, 'x', null, TRUE)", "($a in [1, -2, 3.5f, \"x\", null, true])"},
		{"a not in (1)", "($a not in [1])"},
		{"not a in (1)", "(not ($a in [1]))"},
		{"f(a, b + 1)", "f($a, ($b + 1))"},
		{"f()", "f()"},
		{"Lower(`my col`)", "Lower($my col)"},
		{"`a``b`", "$a`b"},
		{"`not`", "$not"},
		{"'it''s' + \"say \"\"hi\"\"\"", "(\"it's\" + \"say \\\"hi\\\"\")"},
		{"1.5 + .5 + 1. + 1e3 + 2.5E-3", "((((1.5f + 0.5f) + 1f) + 1000f) + 0.0025f)"},
		{"-9223372036854775808", "-9223372036854775808"},
		{"True and FALSE or Null", "((true and false) or null)"},
		{"\ta\n>\r\n1 ", "($a > 1)"},
		{"((((a))))", "$a"},
	}
	for _, tc := range cases {
		a, err := parse(tc.src)
		if err != nil {
			t.Errorf("parse(%q): %v", tc.src, err)
			continue
		}
		if got := dump(a); got != tc.want {
			t.Errorf("parse(%q) = %s, want %s", tc.src, got, tc.want)
		}
	}
}

var benchSchema = arrow.NewSchema([]arrow.Field{
	{Name: "amount", Type: arrow.PrimitiveTypes.Int64},
	{Name: "country", Type: arrow.BinaryTypes.String},
	{Name: "ts", Type: tsMs},
}, nil)

func TestCompileErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		schema *arrow.Schema
		src    string
		want   string // full Error() text, or a prefix ending in "..."
	}{
		{benchSchema, "amout > 10", `column 1: unknown column "amout" (columns: amount, country, ts); did you mean "amount"?`},
		{benchSchema, "amount > 10 and contry == 'DE'", `column 17: unknown column "contry" (columns: amount, country, ts); did you mean "country"?`},
		{benchSchema, "Amount > 1", `column 1: unknown column "Amount" (columns: amount, country, ts); did you mean "amount"? Column names are case-sensitive`},
		{benchSchema, "(amout)", `column 2: unknown column "amout"...`},
		{benchSchema, "foo(amount)", `column 1: unknown function "foo" (functions: abs, ceil, coalesce, concat, contains, ends_with, floor, if, length, lower, round, starts_with, to_float, to_int, to_millis, to_string, upper)`},
		{benchSchema, "lower(amount)", `column 7: lower: argument 1 must be string, found int64`},
		{benchSchema, "lower(country, country)", `column 1: lower expects 1 argument, got 2`},
		{benchSchema, "if(amount > 1, 1)", `column 1: if expects 3 arguments, got 2`},
		{benchSchema, "concat()", `column 1: concat expects at least 1 argument, got 0`},
		{benchSchema, "starts_with(country, 1)", `column 22: starts_with: argument 2 must be string, found int64`},
		{benchSchema, "abs('x')", `column 5: abs: argument 1 must be int64 or float64, found string`},
		{benchSchema, "to_millis(amount)", `column 11: to_millis: argument 1 must be timestamp, found int64`},
		{benchSchema, "to_int(ts)", `column 8: to_int: argument 1 must be int64 or float64 or string or bool, found timestamp`},
		{benchSchema, "coalesce(amount, country)", `column 18: coalesce: argument 2 has type string, which does not mix with int64`},
		{benchSchema, "if(amount, 1, 2)", `column 4: if: argument 1 (the condition) must be bool, found int64`},
		{benchSchema, "if(true, 1, 'x')", `column 13: if: the branches have types int64 and string, which do not mix`},
		{benchSchema, "country == 'DE", `column 12: unterminated string literal`},
		{benchSchema, "country == \"DE", `column 12: unterminated string literal`},
		{benchSchema, "`country == 1", `column 1: unterminated quoted identifier`},
		{benchSchema, "`` == 1", `column 1: empty quoted identifier`},
		{benchSchema, "amount > 1 )", `column 12: unexpected ")" without matching "("`},
		{benchSchema, "amount > 1 amount", `column 12: unexpected "amount" after end of expression`},
		{benchSchema, "(amount > 1", `column 12: expected ")", found end of expression`},
		{benchSchema, "amount >", `column 9: unexpected end of expression`},
		{benchSchema, "", `column 1: empty expression`},
		{benchSchema, "   ", `column 1: empty expression`},
		{benchSchema, "amount # 1", `column 8: unexpected character '#'`},
		{benchSchema, "amount & 1", `column 8: unexpected character '&'`},
		{benchSchema, "'ü' == é", `column 8: unexpected character 'é'`},
		{benchSchema, "'éé' == nope", `column 9: unknown column "nope"...`},
		{benchSchema, "1 < amount < 3", `column 12: comparisons cannot be chained; use parentheses or AND`},
		{benchSchema, "amount == 1 is null", `column 13: comparisons cannot be chained; use parentheses or AND`},
		{benchSchema, "'a' + 1", `column 5: cannot apply "+" to string and int64`},
		{benchSchema, "country * 2", `column 9: cannot apply "*" to string and int64`},
		{benchSchema, "ts + ts", `column 4: cannot apply "+" to timestamp and timestamp`},
		{benchSchema, "1 - ts", `column 3: cannot apply "-" to int64 and timestamp`},
		{benchSchema, "ts * 2", `column 4: cannot apply "*" to timestamp and int64`},
		{benchSchema, "true + 1", `column 6: cannot apply "+" to bool and int64`},
		{benchSchema, "null * 'x'", `column 6: cannot apply "*" to null and string`},
		{benchSchema, "true < false", `column 6: cannot apply "<" to bool and bool`},
		{benchSchema, "amount == 'x'", `column 8: cannot apply "==" to int64 and string`},
		{benchSchema, "ts == true", `column 4: cannot apply "==" to timestamp and bool`},
		{benchSchema, "ts > 'yesterday'", `column 6: invalid timestamp literal "yesterday": want RFC 3339, like 2024-01-02T15:04:05Z`},
		{benchSchema, "ts > '2024-01-01'", `column 6: invalid timestamp literal "2024-01-01"...`},
		{benchSchema, "ts > country", `column 6: only a string literal (an RFC 3339 instant) can be compared with a timestamp`},
		{benchSchema, "-country", `column 1: cannot apply "-" to string`},
		{benchSchema, "not amount", `column 1: cannot apply "not" to int64`},
		{benchSchema, "amount > 1 and 2", `column 16: operand of "and" must be bool, found int64`},
		{benchSchema, "amount or true", `column 1: operand of "or" must be bool, found int64`},
		{benchSchema, "amount is 1", `column 11: expected NULL after IS, found "1"`},
		{benchSchema, "amount not 1", `column 12: expected IN after NOT, found "1"`},
		{benchSchema, "amount in 1", `column 11: expected "(" after IN, found "1"`},
		{benchSchema, "amount in ()", `column 12: expected a literal in IN list, found ")"`},
		{benchSchema, "amount in (amount)", `column 12: expected a literal in IN list, found "amount"`},
		{benchSchema, "amount in (1 2)", `column 14: expected "," or ")" in IN list, found "2"`},
		{benchSchema, "amount in (1, 'x')", `column 15: IN list value 'x' (string) cannot be compared with int64`},
		{benchSchema, "ts in ('x')", `column 8: invalid timestamp literal "x" in IN list...`},
		{benchSchema, "lower(country country)", `column 15: expected "," or ")" in arguments of lower, found "country"`},
		{benchSchema, "1abc", `column 1: malformed number "1abc"`},
		{benchSchema, "1.2.3", `column 1: malformed number "1.2.3"`},
		{benchSchema, "1e", `column 1: malformed number "1e": missing exponent digits`},
		{benchSchema, "99999999999999999999", `column 1: integer literal 99999999999999999999 is out of range for int64`},
		{benchSchema, "-9223372036854775809", `column 1: integer literal -9223372036854775809 is out of range for int64`},
		{benchSchema, "1e999", `column 1: float literal 1e999 is out of range for float64`},
		{benchSchema, "order id", `column 7: unexpected "id" after end of expression`},
		{testSchema, "lst", `column 1: column "lst" has unsupported type list<item: int64, nullable>`},
		{testSchema, "i + lst", `column 5: column "lst" has unsupported type...`},
		{benchSchema, strings.Repeat("(", 1000) + "1" + strings.Repeat(")", 1000), `column 501: expression is nested too deeply (limit 500)`},
		{benchSchema, strings.Repeat("-", 1000) + "amount", `column 501: expression is nested too deeply (limit 500)`},
		{benchSchema, strings.Repeat("not ", 1000) + "true", `column 2001: expression is nested too deeply (limit 500)`},
		{arrow.NewSchema([]arrow.Field{{Name: "a", Type: arrow.PrimitiveTypes.Int64}, {Name: "a", Type: arrow.PrimitiveTypes.Int64}}, nil), "a + 1", `column 1: ambiguous column "a": the schema has 2 fields of that name`},
		{benchSchema, strings.Repeat("abs(", 1000) + "1" + strings.Repeat(")", 1000), `column 2004: expression is nested too deeply (limit 500)`},
		{benchSchema, strings.Repeat("1 + ", 1000) + "1", `column 1999: expression is nested too deeply (limit 500)`},
		{nil, "1", "nil schema"},
	}
	for _, tc := range cases {
		_, err := Compile(tc.src, tc.schema)
		var e *Error
		if !errors.As(err, &e) {
			t.Errorf("Compile(%q) error = %v (%T), want *Error", tc.src, err, err)
			continue
		}
		got := e.Error()
		if prefix, ok := strings.CutSuffix(tc.want, "..."); ok {
			if !strings.HasPrefix(got, prefix) {
				t.Errorf("Compile(%q):\n got  %s\n want %s", tc.src, got, tc.want)
			}
		} else if got != tc.want {
			t.Errorf("Compile(%q):\n got  %s\n want %s", tc.src, got, tc.want)
		}
	}
}

func TestErrorFormat(t *testing.T) {
	t.Parallel()
	if got := (&Error{Pos: 7, Msg: "bad"}).Error(); got != "column 7: bad" {
		t.Errorf("got %q", got)
	}
	if got := (&Error{Msg: "bad"}).Error(); got != "bad" {
		t.Errorf("got %q", got)
	}
	_, err := Compile("amount > 'x", benchSchema)
	if e := err.(*Error); e.Pos != 10 || e.Msg != "unterminated string literal" {
		t.Errorf("got %+v", e)
	}
}
