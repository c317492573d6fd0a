package suggest

import "testing"

func TestDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"abc", "", 3},
		{"", "abc", 3},
		{"kitten", "sitting", 3},
		{"paralelism", "parallelism", 1},
		{"usr", "user", 1},
		{"teh", "the", 1}, // one transposition
		{"ca", "abc", 3},  // optimal string alignment: no edit of a transposed pair
		{"größe", "grösse", 2},
	} {
		if got := distance([]rune(tc.a), []rune(tc.b)); got != tc.want {
			t.Errorf("distance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.want)
		}
		if got := distance([]rune(tc.b), []rune(tc.a)); got != tc.want {
			t.Errorf("distance(%q, %q) = %d, want %d", tc.b, tc.a, got, tc.want)
		}
	}
}

func TestClosest(t *testing.T) {
	fields := []string{"id", "version", "max_parallelism", "parallelism", "operators", "edges", "sources", "sinks", "state", "durability", "checkpoint", "recovery"}
	for _, tc := range []struct {
		name       string
		candidates []string
		want       string
	}{
		{"paralelism", fields, "parallelism"},
		{"Parallelism", fields, "parallelism"}, // case first
		{"opertors", fields, "operators"},
		{"sink", fields, "sinks"},
		{"checkpoints", fields, "checkpoint"},
		{"ts", []string{"user", "TS"}, "TS"},
		{"usr", []string{"user", "amount"}, "user"},
		{"amout", []string{"user", "amount"}, "amount"},
		{"outt", []string{"in", "out"}, "out"},
		// Too far, or too short to tell.
		{"colour", fields, ""},
		{"x", []string{"y", "xy"}, ""},
		{"ab", []string{"cd"}, ""},
		{"zzzzzz", fields, ""},
		{"anything", nil, ""},
		// The name itself is not a suggestion, but a case variant is.
		{"id", []string{"id"}, ""},
		{"id", []string{"id", "ID"}, "ID"},
		// Ties go to the earlier candidate.
		{"cat", []string{"bat", "hat"}, "bat"},
	} {
		if got := Closest(tc.name, tc.candidates); got != tc.want {
			t.Errorf("Closest(%q, %q) = %q, want %q", tc.name, tc.candidates, got, tc.want)
		}
	}
}

func TestHint(t *testing.T) {
	if got, want := Hint("paralelism", []string{"parallelism"}), `; did you mean "parallelism"?`; got != want {
		t.Errorf("Hint = %q, want %q", got, want)
	}
	if got := Hint("colour", []string{"parallelism"}); got != "" {
		t.Errorf("Hint with nothing close = %q, want empty", got)
	}
}

func TestUnknownColumn(t *testing.T) {
	for _, tc := range []struct {
		name    string
		columns []string
		want    string
	}{
		{"ts", []string{"user", "TS"}, `unknown column "ts" (columns: user, TS); did you mean "TS"? Column names are case-sensitive`},
		{"usr", []string{"user", "TS"}, `unknown column "usr" (columns: user, TS); did you mean "user"?`},
		{"price", []string{"user", "TS"}, `unknown column "price" (columns: user, TS)`},
		{"x", nil, `unknown column "x" (columns: )`},
	} {
		if got := UnknownColumn(tc.name, tc.columns); got != tc.want {
			t.Errorf("UnknownColumn(%q, %q) =\n%s\nwant\n%s", tc.name, tc.columns, got, tc.want)
		}
	}
}
