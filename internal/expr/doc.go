// Package expr is a small expression language evaluated column-at-a-time
// over Arrow record batches. Job specs use it for filters
//
//	{"expr": "amount > 10 and country == 'DE'"}
//
// and computed columns
//
//	{"set": [{"name": "cents", "expr": "amount * 100"}]}
//
// Compile parses and type-checks an expression against a schema once;
// Expr.Eval then computes a result array per batch and Expr.EvalMask a
// filter mask. A compiled Expr is immutable and safe for concurrent use.
//
// # Grammar
//
// Keywords (and, or, not, is, null, in, true, false) are case-insensitive,
// as are function names. Column names are case-sensitive.
//
//	expr    := or
//	or      := and (("or" | "||") and)*
//	and     := not (("and" | "&&") not)*
//	not     := ("not" | "!") not | cmp
//	cmp     := add [ ("==" | "=" | "!=" | "<>" | "<" | "<=" | ">" | ">=") add
//	                 | "is" ["not"] "null"
//	                 | ["not"] "in" "(" literal ("," literal)* ")" ]
//	add     := mul (("+" | "-") mul)*
//	mul     := unary (("*" | "/" | "%") unary)*
//	unary   := "-" unary | primary
//	primary := integer | float | string | "true" | "false" | "null"
//	         | identifier | `quoted identifier`
//	         | function "(" [expr ("," expr)*] ")" | "(" expr ")"
//
// Integers are decimal int64 literals (a leading minus belongs to the
// literal, so -9223372036854775808 is valid). Floats are written 1.5, 1.,
// .5, 1e3 or 2.5E-3. Strings are enclosed in single or double quotes; the
// quote itself is written twice inside, and there are no backslash
// escapes. An identifier is [A-Za-z_][A-Za-z0-9_]*; any other column name,
// or one spelled like a keyword, is written in backquotes, doubling a
// backquote inside. An identifier followed by "(" names a function.
//
//	name == 'it''s'  and  `order id` > 3  and  `null` is not null
//
// IN lists hold literals only (numbers may be negative). Comparisons do
// not chain: a < b < c is an error. Nesting is limited to 500 levels;
// chains of and/or do not count.
//
// # Types
//
// Values have one of the types int64, float64, string, bool, timestamp,
// or null (the type of the null literal). Columns map to them as follows;
// a reference to a column of any other type is a compile error.
//
//	Int8, Int16, Int32, Int64, Uint8, Uint16, Uint32  int64
//	Uint64                                            int64; a value above MaxInt64 is an Eval error
//	Float32, Float64                                  float64
//	String, LargeString                               string
//	Boolean                                           bool
//	Timestamp (any unit, any time zone)               timestamp
//
// An expression that is just a column reference evaluates to the column
// itself, with its original Arrow type. Other expressions produce Int64,
// Float64, String (never LargeString), Boolean or Timestamp arrays, or a
// Null array if the expression is always null by type (like null + null).
//
// Arithmetic:
//
//   - int64 + - * / % int64 gives int64. Division truncates toward zero
//     and x % y has the sign of x. Division or modulo by zero gives null
//     for that row. Overflow (including MinInt64 / -1 and -MinInt64) is
//     an Eval error naming the subexpression and row.
//   - If either operand is float64 (the other int64 or float64), the
//     operation is done in float64 with IEEE 754 semantics: x/0 is ±Inf
//     or NaN, % is math.Mod.
//   - string + string concatenates.
//   - timestamp + int64, int64 + timestamp and timestamp - int64 shift the
//     timestamp by the given number of milliseconds, keeping its unit and
//     time zone. For second-unit timestamps the amount is truncated toward
//     zero to whole seconds; for micro- and nanosecond units, overflow is
//     an Eval error.
//   - timestamp - timestamp gives the difference in milliseconds as int64,
//     truncated toward zero (so a - b == -(b - a)), across units.
//   - Unary minus applies to int64 and float64.
//
// Anything else, such as string + int64, is a compile error.
//
// Comparisons (== = != <> < <= > >=) give bool and accept:
//
//   - numbers with numbers; int64 against float64 compares as float64;
//   - strings with strings, in byte order;
//   - bools with bools, for == and != only;
//   - timestamps with timestamps, comparing instants exactly, also across
//     units; timestamps with int64, read as milliseconds since the Unix
//     epoch; and timestamps with a string literal, parsed at compile time
//     as RFC 3339 (2024-01-02T15:04:05Z, 2024-01-02T15:04:05.5+01:00).
//
// x [not] in (literals) accepts literals that compare with x by the same
// rules (string literals for a timestamp x are RFC 3339 instants).
//
// "and", "or" and "not" take bool operands.
//
// # Nulls
//
// Nulls follow SQL. Arithmetic, comparisons and most functions give null
// if an operand is null; x == null is null, so test with "x is null". The
// null literal adapts to the other operand's type (next to a timestamp in
// + and -, it is an int64 amount, so ts - null is a timestamp).
// "and" and "or" are three-valued: "false and null" is false, "true or
// null" is true, while "true and null" and "false or null" are null;
// "not null" is null.
// "is null" and "is not null" are never null. x in (...) is null if x is
// null, or if x matches no literal and the list contains null; "not in"
// negates that, keeping null. EvalMask treats null as false.
//
// # Functions
//
//	lower(s), upper(s)   string -> string (Unicode case mapping)
//	length(s)            string -> int64, the number of UTF-8 characters
//	concat(s, ...)       strings -> string; null arguments count as the
//	                     empty string, so the result is never null
//	starts_with(s, p), ends_with(s, p), contains(s, p)
//	                     strings -> bool
//	abs(x), floor(x), ceil(x), round(x)
//	                     int64 -> int64 (unchanged, except abs, which fails
//	                     on MinInt64), float64 -> float64; round rounds
//	                     half away from zero
//	coalesce(a, b, ...)  the first non-null argument, per row
//	if(c, a, b)          a where c is true, b where c is false or null
//	to_string(x)         any type -> string: numbers in the shortest form
//	                     that reads back to the same value (exponent form
//	                     below 1e-6 and from 1e21), bools as true/false,
//	                     timestamps as RFC 3339 in UTC with as many
//	                     fractional digits as needed
//	to_int(x)            float64 truncated toward zero (null if NaN, ±Inf
//	                     or out of range), string parsed as a decimal
//	                     integer (null if it does not parse), bool as 0/1
//	to_float(x)          int64, bool as 0/1, string parsed with
//	                     strconv.ParseFloat (null if it does not parse)
//	to_millis(ts)        timestamp -> int64 milliseconds since the epoch,
//	                     rounded toward negative infinity for finer units
//
// The arguments of coalesce, and the two branches of if, must be of one
// type family: int64 and float64 mix (giving float64), timestamps of
// different units mix (giving the finest unit and the first timestamp's
// time zone), null mixes with anything; any other mix is a compile error.
//
// All other functions give null when an argument is null. Wrong argument
// counts and types are compile errors naming the function.
//
// # Evaluation
//
// Expressions are evaluated one operator at a time over whole columns held
// in Go slices, with literals kept as scalars; Int64, Float64, Timestamp
// and String columns are read without copying. Subexpressions made only of
// literals are folded at compile time.
//
// Errors at evaluation time (integer overflow, a Uint64 value beyond
// int64) are reported only for rows whose value can affect the result.
// The right side of "and"/"or" does not fail for rows the left side has
// already decided, a branch of if does not fail for rows that take the
// other branch, and later arguments of coalesce do not fail for rows an
// earlier argument has filled, so guards like
//
//	if(x < 1000000, x * 1000000000000, 0)
//
// work.
package expr
