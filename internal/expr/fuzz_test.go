package expr

import (
	"errors"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

var fuzzSeeds = []string{
	"i + j * 2 > f and s == 'DE' or b is null",
	"amount > 10 and country == 'DE'",
	"if(b, i, f) + coalesce(j, 0) - abs(i32) % 3",
	"concat(s, '-', to_string(ts), to_string(f32)) in ('a', null)",
	"ts - tsn > 1000 or tss >= '2024-01-01T00:00:00Z' and ts < 17e11",
	"not (i in (1, 2, null)) || !(s not in ('x')) && length(lower(ls)) <> 3",
	"to_millis(ts) / 0 + to_int(s) * to_float('1.5') + round(-0.5)",
	"-9223372036854775808 - i + 9223372036854775807 * u64",
	"`order id` is not null and starts_with(upper(s), 'Ü')",
	"coalesce(ts, tsn, tss) == ts + 1",
	"if(i > 5, i * 1000000000000000000, -1)",
	"'it''s' + \"q\"\"q\" == s",
	"((((1))))", "- - -f", "null", "null == null", "1 / 0", "9223372036854775807 + 1",
	"lst", "i > 1 )", "lower(", "`", "'", "1e", ".5e-3", "1.", "ts > 'x'",
}

// FuzzCompile compiles arbitrary input against a fixed schema and, when
// that succeeds, evaluates it on a small record with nulls, with and
// without constant folding. It must never panic, errors must be *Error
// with a position inside the input, results must have the declared type
// and length, and folding must not change results.
func FuzzCompile(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s)
	}
	mem := memory.NewGoAllocator()
	full := testRecord(f, mem)
	recs := []arrow.RecordBatch{full, full.NewSlice(1, 4), full.NewSlice(2, 2)}
	f.Fuzz(func(t *testing.T, src string) {
		e, err := Compile(src, testSchema)
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("Compile(%q): error %v is %T, want *Error", src, err, err)
			}
			if ce.Pos < 0 || ce.Pos > utf8.RuneCountInString(src)+1 {
				t.Fatalf("Compile(%q): position %d outside the input", src, ce.Pos)
			}
			return
		}
		if e.String() != src {
			t.Fatalf("String() = %q, want %q", e.String(), src)
		}
		unfolded, uerr := compile(src, testSchema, false)
		for _, rec := range recs {
			got, gerr := fuzzEval(t, e, rec)
			if uerr != nil {
				continue // e.g. a timestamp compared with a folded string
			}
			want, werr := fuzzEval(t, unfolded, rec)
			if (gerr == nil) != (werr == nil) || (gerr != nil && gerr.Error() != werr.Error()) || got != want {
				t.Fatalf("%q: folded and unfolded results differ:\n folded   %s (%v)\n unfolded %s (%v)", src, got, gerr, want, werr)
			}
		}
	})
}

func fuzzEval(t *testing.T, e *Expr, rec arrow.RecordBatch) (string, error) {
	out, err := e.Eval(rec)
	if err != nil {
		var ee *Error
		if !errors.As(err, &ee) {
			t.Fatalf("Eval(%q): error %v is %T, want *Error", e.String(), err, err)
		}
		return "", err
	}
	defer out.Release()
	if out.Len() != int(rec.NumRows()) {
		t.Fatalf("Eval(%q): %d rows, want %d", e.String(), out.Len(), rec.NumRows())
	}
	if !arrow.TypeEqual(out.DataType(), e.Type()) {
		t.Fatalf("Eval(%q): type %s, Type() says %s", e.String(), out.DataType(), e.Type())
	}
	got := render(out)
	if e.Type().ID() == arrow.BOOL {
		mask, err := e.EvalMask(rec)
		if err != nil {
			t.Fatalf("EvalMask(%q) failed after Eval succeeded: %v", e.String(), err)
		}
		for i, m := range mask {
			if m != (out.IsValid(i) && out.(interface{ Value(int) bool }).Value(i)) {
				t.Fatalf("EvalMask(%q)[%d] = %v disagrees with Eval", e.String(), i, m)
			}
		}
	}
	return got, nil
}

// TestRandomExpressions checks the FuzzCompile invariants on expressions
// generated from the grammar, which reach the evaluator far more often
// than byte-level fuzzing does.
func TestRandomExpressions(t *testing.T) {
	t.Parallel()
	n := 15000
	if testing.Short() {
		n = 1500
	}
	mem := memory.NewGoAllocator()
	full := testRecord(t, mem)
	defer full.Release()
	sliced := full.NewSlice(1, 4)
	defer sliced.Release()
	rng := rand.New(rand.NewPCG(1, 2))
	compiled := 0
	for range n {
		src := genExpr(rng, 5)
		e, err := Compile(src, testSchema)
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("Compile(%q): error %v is %T, want *Error", src, err, err)
			}
			continue
		}
		compiled++
		unfolded, uerr := compile(src, testSchema, false)
		for _, rec := range []arrow.RecordBatch{full, sliced} {
			got, gerr := fuzzEval(t, e, rec)
			if uerr != nil {
				continue
			}
			want, werr := fuzzEval(t, unfolded, rec)
			if (gerr == nil) != (werr == nil) || (gerr != nil && gerr.Error() != werr.Error()) || got != want {
				t.Fatalf("%q: folded and unfolded results differ:\n folded   %s (%v)\n unfolded %s (%v)", src, got, gerr, want, werr)
			}
		}
	}
	t.Logf("%d of %d generated expressions compiled", compiled, n)
	if compiled < n/10 {
		t.Errorf("only %d of %d generated expressions compiled", compiled, n)
	}
}

var (
	genColumns = []string{"i", "j", "f", "f32", "i32", "u8", "u64", "s", "ls", "b", "ts", "tsn", "tss", "`order id`"}
	genLits    = []string{"0", "1", "-1", "2", "10", "1000", "9223372036854775807", "-9223372036854775808",
		"1.5", "-0.0", "0.0", "1e300", "'DE'", "''", "'Ünï'", "'1970-01-01T00:00:01Z'", "'42'", "'x'",
		"true", "false", "null"}
	genBinary = []string{"+", "-", "*", "/", "%", "==", "!=", "<", "<=", ">", ">=", "and", "or"}
	genFuncs  = map[string]int{"lower": 1, "upper": 1, "length": 1, "concat": 3, "starts_with": 2,
		"ends_with": 2, "contains": 2, "abs": 1, "floor": 1, "ceil": 1, "round": 1, "coalesce": 2,
		"if": 3, "to_string": 1, "to_int": 1, "to_float": 1, "to_millis": 1}
	genFuncNames = func() []string {
		var names []string
		for n := range genFuncs {
			names = append(names, n)
		}
		sort.Strings(names)
		return names
	}()
)

func genExpr(rng *rand.Rand, depth int) string {
	if depth == 0 || rng.IntN(4) == 0 {
		if rng.IntN(2) == 0 {
			return genColumns[rng.IntN(len(genColumns))]
		}
		return genLits[rng.IntN(len(genLits))]
	}
	switch rng.IntN(7) {
	case 0, 1, 2:
		return "(" + genExpr(rng, depth-1) + " " + genBinary[rng.IntN(len(genBinary))] + " " + genExpr(rng, depth-1) + ")"
	case 3:
		return []string{"-", "not ", "!"}[rng.IntN(3)] + genExpr(rng, depth-1)
	case 4:
		return genExpr(rng, depth-1) + []string{" is null", " is not null"}[rng.IntN(2)]
	case 5:
		var lits []string
		for range 1 + rng.IntN(3) {
			lits = append(lits, genLits[rng.IntN(len(genLits))])
		}
		return "(" + genExpr(rng, depth-1) + []string{" in (", " not in ("}[rng.IntN(2)] + strings.Join(lits, ", ") + "))"
	}
	name := genFuncNames[rng.IntN(len(genFuncNames))]
	args := make([]string, genFuncs[name])
	for i := range args {
		args[i] = genExpr(rng, depth-1)
	}
	return name + "(" + strings.Join(args, ", ") + ")"
}
