package expr

import (
	"testing"
)

func TestArithmetic(t *testing.T) {
	t.Parallel()
	runEvalCases(t, []evalCase{
		{"i + j", "3, null, -4, null"},
		{"i - j", "-1, null, -10, null"},
		{"i * j", "2, null, -21, null"},
		{"i / j", "0, null, -2, null"},
		{"i % j", "1, null, -1, null"},
		{"10 / j", "5, null, 3, null"},
		{"10 % j", "0, null, 1, null"},
		{"i / 0", "null, null, null, null"},
		{"i % 0", "null, null, null, null"},
		{"i / i", "1, null, 1, 1"},
		{"7 / 2", "3, 3, 3, 3"},
		{"-7 / 2", "-3, -3, -3, -3"},
		{"-7 % 2", "-1, -1, -1, -1"},
		{"i + f", "2.5, null, null, 10"},
		{"i * 1.5", "1.5, null, -10.5, 15"},
		{"f / 0", "+Inf, -Inf, null, NaN"},
		{"f % 2", "1.5, -0.5, null, 0"},
		{"f32 + i32", "10.5, null, null, 6"},
		{"u8 + 1", "2, 3, null, 256"},
		{"u64 * 2", "2, 4, null, 6"},
		{"`order id` + 1", "101, 201, 301, 401"},
		{"-i", "-1, null, 7, -10"},
		{"-f", "-1.5, 2.5, null, -0"},
		{"- -i", "1, null, -7, 10"},
		{"1 - -1", "2, 2, 2, 2"},
		{"-9223372036854775808", "-9223372036854775808, -9223372036854775808, -9223372036854775808, -9223372036854775808"},
		{"-9223372036854775808 % -1", "0, 0, 0, 0"},
		{"1.5e1 + .5", "15.5, 15.5, 15.5, 15.5"},
		{"s + '!'", `"DE!", "fr!", null, "Ünïcödé!"`},
		{"s + ls", `"DEx", null, null, "Ünïcödé"`},
		{"'a' + 'b'", `"ab", "ab", "ab", "ab"`},
		{"\"it's\" + 'x''y'", `"it'sx'y", "it'sx'y", "it'sx'y", "it'sx'y"`},
		// Timestamps.
		{"ts + 500", "t1500, t499, null, t2000"},
		{"500 + ts", "t1500, t499, null, t2000"},
		{"ts - 1000", "t0, t-1001, null, t500"},
		{"tsn + 1", "t1001000000, t999999, null, t1501000000"},
		{"tss + 1500", "t2, t0, null, t3"},
		{"tss - 1500", "t0, t-2, null, t1"},
		{"tss + i", "t1, null, null, t2"},
		{"ts - ts", "0, 0, null, 0"},
		{"ts - tsn", "0, 0, null, 0"},
		{"tsn - ts", "0, 0, null, 0"},
		{"ts - tss", "0, 999, null, -500"},
		{"tss - ts", "0, -999, null, 500"},
		{"tss - tss", "0, 0, null, 0"},
		// Nulls.
		{"i + null", "null, null, null, null"},
		{"null * f", "null, null, null, null"},
		{"null + null", "null, null, null, null"},
		{"-null", "null, null, null, null"},
		{"s + null", "null, null, null, null"},
		{"ts + null", "null, null, null, null"},
		{"null - ts", "null, null, null, null"},
	})
}

func TestOverflow(t *testing.T) {
	t.Parallel()
	runEvalCases(t, []evalCase{
		{"i * 9223372036854775807", `eval error: column 1: integer overflow in "i * 9223372036854775807" at row 2 (-7 * 9223372036854775807)`},
		{"9223372036854775807 + 1", `eval error: column 1: integer overflow in "9223372036854775807 + 1" at row 0 (9223372036854775807 + 1)`},
		{"i - 9223372036854775807 - 10", `eval error: column 1: integer overflow in "i - 9223372036854775807" at row 2 (-7 - 9223372036854775807)`},
		{"i + 9223372036854775797 + 1", `eval error: column 1: integer overflow in "i + 9223372036854775797 + 1" at row 3 (9223372036854775807 + 1)`},
		{"-9223372036854775808 - i", `eval error: column 1: integer overflow in "-9223372036854775808 - i" at row 0 (-9223372036854775808 - 1)`},
		{"i - (-9223372036854775807 - 1)", `eval error: column 1: integer overflow in "i - (-9223372036854775807 - 1)" at row 0 (1 - -9223372036854775808)`},
		{"(i + 9223372036854775800) * 1", `eval error: column 1: integer overflow in "(i + 9223372036854775800)" at row 3 (10 + 9223372036854775800)`},
		{"-(-9223372036854775807 - 1)", `eval error: column 1: integer overflow in "-(-9223372036854775807 - 1)" at row 0 (-(-9223372036854775808))`},
		{"abs(-9223372036854775808)", `eval error: column 1: integer overflow in "abs(-9223372036854775808)" at row 0 (abs(-9223372036854775808))`},
		{"-9223372036854775808 / -1", `eval error: column 1: integer overflow in "-9223372036854775808 / -1" at row 0 (-9223372036854775808 / -1)`},
		{"tsn + 9223372036854775807", "eval error: column 1: integer overflow in \"tsn + 9223372036854775807\" at row 0 (9223372036854775807 milliseconds)"},
		{"to_millis(tss) + 0", "1000, -1000, null, 2000"},
		{"i * 1000000000000000000", "eval error: column 1: integer overflow in \"i * 1000000000000000000\" at row 3 (10 * 1000000000000000000)"},
		// Rows that do not use a failing value do not fail.
		{"if(i < 5, i * 1000000000000000000, -1)", "1000000000000000000, -1, -7000000000000000000, -1"},
		{"if(i >= 5, -1, i * 1000000000000000000)", "1000000000000000000, null, -7000000000000000000, -1"},
		{"i < 5 and i * 1000000000000000000 > 0", "true, null, false, false"},
		{"i >= 5 or i * 1000000000000000000 > 0", "true, null, false, true"},
		{"coalesce(i, j * 9223372036854775807)", "1, 0, -7, 10"},
		{"if(false, 9223372036854775807 + 1, 0)", "0, 0, 0, 0"},
		{"false and 9223372036854775807 + 1 > 0", "false, false, false, false"},
		{"if(j == 0, 0, 9223372036854775807 / j * 3)", "eval error: column 15: integer overflow in \"9223372036854775807 / j * 3\" at row 0 (4611686018427387903 * 3)"},
		{"if(j > 2, 9223372036854775807 / j * 3, 0)", "0, 0, 9223372036854775806, 0"},
	})
}

func TestComparisons(t *testing.T) {
	t.Parallel()
	runEvalCases(t, []evalCase{
		{"i > 0", "true, null, false, true"},
		{"i == 10", "false, null, false, true"},
		{"i = 10", "false, null, false, true"},
		{"i <> 1", "false, null, true, true"},
		{"i != 1", "false, null, true, true"},
		{"0 < i", "true, null, false, true"},
		{"i >= j", "false, null, false, null"},
		{"i < f", "true, null, null, false"},
		{"f >= -2.5", "true, true, null, true"},
		{"i32 <= 7", "false, true, null, true"},
		{"1 < 1.5", "true, true, true, true"},
		{"9007199254740993 == 9007199254740992.0", "true, true, true, true"}, // as float64
		{"9007199254740993 == 9007199254740992", "false, false, false, false"},
		{"s == 'DE'", "true, false, null, false"},
		{"'DE' == s", "true, false, null, false"},
		{"s < 'a'", "true, false, null, false"},
		{"'a' > s", "true, false, null, false"},
		{"s >= 'fr'", "false, true, null, true"},
		{"s != ls", "true, null, null, true"},
		{"ls == 'x'", "true, null, false, false"},
		{"ls <= 'x'", "true, null, false, true"},
		{"b == true", "true, false, null, true"},
		{"b != false", "true, false, null, true"},
		{"b == b", "true, true, null, true"},
		{"ts == tsn", "true, false, null, true"},
		{"ts > tsn", "false, false, null, false"},
		{"ts < tsn", "false, true, null, false"},
		{"tss == ts", "true, false, null, false"},
		{"tss > ts", "false, false, null, true"},
		{"ts >= tss", "true, true, null, false"},
		{"ts > 1000", "false, false, null, true"},
		{"1000 <= ts", "true, false, null, true"},
		{"tss > 1500", "false, false, null, true"},
		{"tss == 1000", "true, false, null, false"},
		{"ts > '1970-01-01T00:00:01Z'", "false, false, null, true"},
		{"ts >= '1970-01-01T00:00:01Z'", "true, false, null, true"},
		{"'1970-01-01T00:00:01Z' <= ts", "true, false, null, true"},
		{"ts == '1970-01-01T00:00:01.5Z'", "false, false, null, true"},
		{"ts > '1970-01-01T01:00:00+01:00'", "true, false, null, true"},
		{"tss < '1970-01-01T00:00:01.5Z'", "true, true, null, false"},
		{"tss <= '1970-01-01T00:00:01.5Z'", "true, true, null, false"},
		{"tss > '1970-01-01T00:00:01.5Z'", "false, false, null, true"},
		{"tss >= '1970-01-01T00:00:01.5Z'", "false, false, null, true"},
		{"tss == '1970-01-01T00:00:01.5Z'", "false, false, null, false"},
		{"tss != '1970-01-01T00:00:01.5Z'", "true, true, null, true"},
		{"tss == '1970-01-01T00:00:02Z'", "false, false, null, true"},
		{"tsn > '1970-01-01T00:00:00.999999999Z'", "true, false, null, true"},
		{"ts > '3000-01-01T00:00:00Z'", "false, false, null, false"},
		{"tsn < '3000-01-01T00:00:00Z'", "true, true, null, true"},
		{"tsn > '0001-01-01T00:00:00Z'", "true, true, null, true"},
		{"tsn == '3000-01-01T00:00:00Z'", "false, false, null, false"},
		{"ts == null", "null, null, null, null"},
		{"i == null", "null, null, null, null"},
		{"null == null", "null, null, null, null"},
		{"null < 'x'", "null, null, null, null"},
	})
}

func TestLogicAndNulls(t *testing.T) {
	t.Parallel()
	runEvalCases(t, []evalCase{
		{"not b", "false, true, null, false"},
		{"!b", "false, true, null, false"},
		{"not not b", "true, false, null, true"},
		{"not null", "null, null, null, null"},
		{"b and i > 0", "true, false, false, true"},
		{"b && i > 0", "true, false, false, true"},
		{"b or i > 0", "true, null, null, true"},
		{"b || i > 0", "true, null, null, true"},
		{"i is null", "false, true, false, false"},
		{"i is not null", "true, false, true, true"},
		{"i IS NOT NULL AND s Is Null", "false, false, true, false"},
		{"null is null", "true, true, true, true"},
		{"1 is null", "false, false, false, false"},
		{"`order id` is null", "false, false, false, false"},
		{"i + null is null", "true, true, true, true"},
		{"i in (1, 10)", "true, null, false, true"},
		{"i not in (1, 10)", "false, null, true, false"},
		{"i in (1, null)", "true, null, null, null"},
		{"i not in (1, null)", "false, null, null, null"},
		{"i in (1.0, -7)", "true, null, true, false"},
		{"i in (1.5)", "false, null, false, false"},
		{"i in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10)", "true, null, false, true"},
		{"i in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, null)", "true, null, null, true"},
		{"f in (1.5, 0)", "true, false, null, true"},
		{"f in (-2.5)", "false, true, null, false"},
		{"s in ('DE', 'fr')", "true, true, null, false"},
		{"s not in ('DE')", "false, true, null, true"},
		{"ls in ('', 'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'x')", "true, null, false, true"},
		{"b in (true)", "true, false, null, true"},
		{"b not in (false, true)", "false, false, null, false"},
		{"ts in (1000, '1970-01-01T00:00:01.5Z')", "true, false, null, true"},
		{"tss in (1000, 1500)", "true, false, null, false"},
		{"tsn in (-1, '1970-01-01T00:00:01Z')", "true, false, null, false"},
		{"null in (1)", "null, null, null, null"},
		{"1 in (1)", "true, true, true, true"},
		{"i + 1 in (2, 11)", "true, null, false, true"},
		{"not i in (1)", "false, null, true, true"},
	})
}

// kleene is the reference three-valued logic; nil is null.
func kleene(and bool, p, q *bool) *bool {
	d := !and // the deciding value
	if (p != nil && *p == d) || (q != nil && *q == d) {
		return &d
	}
	if p == nil || q == nil {
		return nil
	}
	v := !d
	return &v
}

func TestThreeValuedLogic(t *testing.T) {
	t.Parallel()
	tr, fa := true, false
	vals := []*bool{&tr, &fa, nil}
	lit := func(v *bool) string {
		switch {
		case v == nil:
			return "null"
		case *v:
			return "true"
		}
		return "false"
	}
	for _, p := range vals {
		for _, q := range vals {
			for _, and := range []bool{true, false} {
				op := "or"
				if and {
					op = "and"
				}
				want := lit(kleene(and, p, q))
				want = want + ", " + want + ", " + want + ", " + want
				src := lit(p) + " " + op + " " + lit(q)
				runEvalCases(t, []evalCase{{src, want}})
			}
		}
	}
	// Columns with every combination, against each other and scalars.
	for _, and := range []bool{true, false} {
		op := " or "
		if and {
			op = " and "
		}
		for _, q := range vals {
			// b is true, false, null, true.
			var want []string
			for _, p := range []*bool{&tr, &fa, nil, &tr} {
				want = append(want, lit(kleene(and, p, q)))
			}
			w := want[0] + ", " + want[1] + ", " + want[2] + ", " + want[3]
			runEvalCases(t, []evalCase{{"b" + op + lit(q), w}, {lit(q) + op + "b", w}})
		}
		// b against (i > 0): true, null, false, true.
		var want []string
		bs := []*bool{&tr, &fa, nil, &tr}
		is := []*bool{&tr, nil, &fa, &tr}
		for r := range bs {
			want = append(want, lit(kleene(and, bs[r], is[r])))
		}
		w := want[0] + ", " + want[1] + ", " + want[2] + ", " + want[3]
		runEvalCases(t, []evalCase{{"b" + op + "i > 0", w}, {"i > 0" + op + "b", w}})
	}
}

func TestFunctions(t *testing.T) {
	t.Parallel()
	runEvalCases(t, []evalCase{
		{"lower(s)", `"de", "fr", null, "ünïcödé"`},
		{"LOWER(s)", `"de", "fr", null, "ünïcödé"`},
		{"upper(s)", `"DE", "FR", null, "ÜNÏCÖDÉ"`},
		{"upper(ls)", `"X", null, "ÜNÏ", ""`},
		{"lower(null)", "null, null, null, null"},
		{"length(s)", "2, 2, null, 7"},
		{"length(ls)", "1, null, 3, 0"},
		{"length('héllo')", "5, 5, 5, 5"},
		{"concat(s, '-', ls)", `"DE-x", "fr-", "-Ünï", "Ünïcödé-"`},
		{"concat(s)", `"DE", "fr", "", "Ünïcödé"`},
		{"concat(null)", `"", "", "", ""`},
		{"concat('a', 'b', 'c')", `"abc", "abc", "abc", "abc"`},
		{"starts_with(s, 'D')", "true, false, null, false"},
		{"ends_with(s, 'é')", "false, false, null, true"},
		{"contains(s, 'r')", "false, true, null, false"},
		{"contains(ls, s)", "false, null, null, false"},
		{"contains('xDEx', s)", "true, false, null, false"},
		{"starts_with(s, null)", "null, null, null, null"},
		{"abs(i)", "1, null, 7, 10"},
		{"abs(f)", "1.5, 2.5, null, 0"},
		{"abs(null)", "null, null, null, null"},
		{"floor(f)", "1, -3, null, 0"},
		{"ceil(f)", "2, -2, null, 0"},
		{"round(f)", "2, -3, null, 0"},
		{"round(-0.5)", "-1, -1, -1, -1"},
		{"round(i)", "1, null, -7, 10"},
		{"floor(i32)", "10, -3, null, 7"},
		{"ceil(u8)", "1, 2, null, 255"},
		{"coalesce(i, j)", "1, 0, -7, 10"},
		{"coalesce(j, i)", "2, 0, 3, 10"},
		{"coalesce(f, i)", "1.5, -2.5, -7, 0"},
		{"coalesce(null, i, 0)", "1, 0, -7, 10"},
		{"coalesce(i, null)", "1, null, -7, 10"},
		{"coalesce(s, ls, 'none')", `"DE", "fr", "Ünï", "Ünïcödé"`},
		{"coalesce(ls, 'none')", `"x", "none", "Ünï", ""`},
		{"coalesce(b, false)", "true, false, false, true"},
		{"coalesce(null)", "null, null, null, null"},
		{"coalesce(null, null)", "null, null, null, null"},
		{"coalesce(ts, tsn)", "t1000000000, t-1000000, null, t1500000000"},
		{"coalesce(tss, ts)", "t1000, t-1000, null, t2000"},
		{"coalesce(1, i)", "1, 1, 1, 1"},
		{"if(b, i, j)", "1, 0, 3, 10"},
		{"IF(b, 'yes', 'no')", `"yes", "no", "no", "yes"`},
		{"if(b, i, f)", "1, -2.5, null, 10"},
		{"if(i > 0, 'pos', null)", `"pos", null, null, "pos"`},
		{"if(true, i, j)", "1, null, -7, 10"},
		{"if(null, 1, 2)", "2, 2, 2, 2"},
		{"if(b, null, null)", "null, null, null, null"},
		{"if(b, ts, tss)", "t1000, t-1000, null, t1500"},
		{"if(i > 100, 1, 2)", "2, 2, 2, 2"},
		{"if(`order id` > 0, 1, 2)", "1, 1, 1, 1"},
		{"to_string(i)", `"1", null, "-7", "10"`},
		{"to_string(f)", `"1.5", "-2.5", null, "0"`},
		{"to_string(f32)", `"0.5", null, "2", "-1"`},
		{"to_string(1e21)", `"1e+21", "1e+21", "1e+21", "1e+21"`},
		{"to_string(0.0000001)", `"1e-7", "1e-7", "1e-7", "1e-7"`},
		{"to_string(123456789.0)", `"123456789", "123456789", "123456789", "123456789"`},
		{"to_string(0.1)", `"0.1", "0.1", "0.1", "0.1"`},
		{"to_string(1/0.0)", `"+Inf", "+Inf", "+Inf", "+Inf"`},
		{"to_string(b)", `"true", "false", null, "true"`},
		{"to_string(ts)", `"1970-01-01T00:00:01Z", "1969-12-31T23:59:59.999Z", null, "1970-01-01T00:00:01.5Z"`},
		{"to_string(tsn)", `"1970-01-01T00:00:01Z", "1969-12-31T23:59:59.999999999Z", null, "1970-01-01T00:00:01.5Z"`},
		{"to_string(tss)", `"1970-01-01T00:00:01Z", "1969-12-31T23:59:59Z", null, "1970-01-01T00:00:02Z"`},
		{"to_string(s)", `"DE", "fr", null, "Ünïcödé"`},
		{"to_string(null)", "null, null, null, null"},
		{"to_int(f)", "1, -2, null, 0"},
		{"to_int(-2.9)", "-2, -2, -2, -2"},
		{"to_int('42')", "42, 42, 42, 42"},
		{"to_int('-42')", "-42, -42, -42, -42"},
		{"to_int(' 42')", "null, null, null, null"},
		{"to_int('4.2')", "null, null, null, null"},
		{"to_int(s)", "null, null, null, null"},
		{"to_int(1e19)", "null, null, null, null"},
		{"to_int(-1e19)", "null, null, null, null"},
		{"to_int(0/0.0)", "null, null, null, null"},
		{"to_int(b)", "1, 0, null, 1"},
		{"to_int(i)", "1, null, -7, 10"},
		{"to_float(i)", "1, null, -7, 10"},
		{"to_float('1.5')", "1.5, 1.5, 1.5, 1.5"},
		{"to_float('x')", "null, null, null, null"},
		{"to_float(ls)", "null, null, null, null"},
		{"to_float(b)", "1, 0, null, 1"},
		{"to_millis(ts)", "1000, -1, null, 1500"},
		{"to_millis(tsn)", "1000, -1, null, 1500"},
		{"to_millis(tsn - 1)", "999, -2, null, 1499"},
		{"to_millis(tss)", "1000, -1000, null, 2000"},
		{"to_millis(null)", "null, null, null, null"},
	})
}
