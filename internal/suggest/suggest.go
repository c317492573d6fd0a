// Package suggest finds the name a user probably meant when they wrote one
// that does not exist (a misspelt field, column or operator), for the "did
// you mean …?" part of validation errors.
package suggest

import (
	"strconv"
	"strings"
)

// Closest returns the candidate that name most likely misspells, or ""
// when none is close enough.
//
// A candidate equal to name ignoring case wins outright ("ts" → "TS").
// Otherwise the candidate at the smallest edit distance, compared without
// case, wins if that distance is at most max(1, len(name)/3) and smaller
// than the lengths of both (so that "x" does not suggest "y"). The
// distance counts insertions, deletions, substitutions and transpositions
// of adjacent characters, each as one edit. Ties go to the earlier
// candidate; a candidate equal to name is never suggested.
func Closest(name string, candidates []string) string {
	for _, c := range candidates {
		if c != name && strings.EqualFold(c, name) {
			return c
		}
	}
	a := []rune(strings.ToLower(name))
	limit := max(1, len(a)/3)
	best, bestDist := "", limit+1
	for _, c := range candidates {
		if c == name {
			continue
		}
		b := []rune(strings.ToLower(c))
		d := distance(a, b)
		if d < bestDist && d < len(a) && d < len(b) {
			best, bestDist = c, d
		}
	}
	return best
}

// Hint returns `; did you mean "X"?` for the Closest candidate, or "" when
// there is none: the suffix of an "unknown …" message.
func Hint(name string, candidates []string) string {
	if c := Closest(name, candidates); c != "" {
		return "; did you mean " + strconv.Quote(c) + "?"
	}
	return ""
}

// UnknownColumn is the one message for a column that is not among the
// columns of the rows at that point of a job: `unknown column "ts"
// (columns: user, TS); did you mean "TS"? Column names are
// case-sensitive`, the last sentence only when the names differ in case
// alone.
func UnknownColumn(name string, columns []string) string {
	msg := "unknown column " + strconv.Quote(name) + " (columns: " + strings.Join(columns, ", ") + ")"
	c := Closest(name, columns)
	if c == "" {
		return msg
	}
	msg += "; did you mean " + strconv.Quote(c) + "?"
	if strings.EqualFold(c, name) {
		msg += " Column names are case-sensitive"
	}
	return msg
}

// distance is the optimal string alignment distance between a and b: the
// Levenshtein distance plus transpositions of adjacent characters, where
// no substring is edited twice.
func distance(a, b []rune) int {
	// Three rows of the dynamic-programming table: two back, one back,
	// and the one being filled.
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
