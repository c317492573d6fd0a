package sql

// This file writes the statements: quoted identifiers, the INSERT (or
// UPSERT) of the output, the input's query, and the binding of
// select_sql's placeholders to the database's own parameters.

import (
	"fmt"
	"strconv"
	"strings"
)

// quoteIdent quotes one identifier for PostgreSQL and SQLite alike.
func quoteIdent(name string) string {
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

// quoteTable quotes "table" or "schema.table".
func quoteTable(name string) string {
	parts := strings.Split(name, ".")
	for i, p := range parts {
		parts[i] = quoteIdent(p)
	}
	return strings.Join(parts, ".")
}

// insertSQL is the output's statement for one row of the given columns:
// INSERT, or with keys INSERT … ON CONFLICT (keys) DO UPDATE SET every
// other column to the new row's value (DO NOTHING when every column is a
// key).
func insertSQL(dbType, table string, cols, keys []string) string {
	var b strings.Builder
	b.WriteString("INSERT INTO ")
	b.WriteString(quoteTable(table))
	b.WriteString(" (")
	for i, c := range cols {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(quoteIdent(c))
	}
	b.WriteString(") VALUES (")
	for i := range cols {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(param(dbType, i+1))
	}
	b.WriteString(")")
	if len(keys) == 0 {
		return b.String()
	}
	b.WriteString(" ON CONFLICT (")
	isKey := map[string]bool{}
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(quoteIdent(k))
		isKey[k] = true
	}
	b.WriteString(") DO ")
	first := true
	for _, c := range cols {
		if isKey[c] {
			continue
		}
		if first {
			b.WriteString("UPDATE SET ")
			first = false
		} else {
			b.WriteString(", ")
		}
		b.WriteString(quoteIdent(c) + " = EXCLUDED." + quoteIdent(c))
	}
	if first {
		b.WriteString("NOTHING")
	}
	return b.String()
}

// param is the n-th (1-based) positional parameter.
func param(dbType string, n int) string {
	if dbType == SQLite {
		return "?" + strconv.Itoa(n)
	}
	return "$" + strconv.Itoa(n)
}

// tableQuery is the input's query of a table: the declared columns after
// :last, of the partition :partition when there are several, in tracking
// order, at most :limit.
func tableQuery(cfg *SourceConfig, cols []string) string {
	var b strings.Builder
	b.WriteString("SELECT ")
	for i, c := range cols {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(quoteIdent(c))
	}
	track := quoteIdent(cfg.TrackingColumn)
	fmt.Fprintf(&b, " FROM %s WHERE %s > %s", quoteTable(cfg.TableName), track, phLast)
	if cfg.Partitions > 1 {
		// ((v % n) + n) % n is the non-negative remainder in both
		// databases (% keeps the dividend's sign).
		pc, n := quoteIdent(cfg.PartitionColumn), cfg.Partitions
		fmt.Fprintf(&b, " AND ((%s %% %d) + %d) %% %d = %s", pc, n, n, n, phPartition)
	}
	fmt.Fprintf(&b, " ORDER BY %s LIMIT %s", track, phLimit)
	return b.String()
}

// bindQuery replaces the placeholders :last, :limit and :partition of q
// with the database's positional parameters, numbered in the order of
// their first use (PostgreSQL infers each parameter's type from where it
// is used, so none may be left out). It returns the query and the
// placeholders by parameter number (order[0] is parameter 1). Text in
// quotes, dollar quotes and comments is left alone, as is "::" (a
// PostgreSQL cast) and any other ":name".
func bindQuery(q, dbType string) (string, []string, error) {
	var b strings.Builder
	var order []string
	for i := 0; i < len(q); {
		n, err := skipLiteral(q[i:])
		if err != nil {
			return "", nil, err
		}
		if n > 0 {
			b.WriteString(q[i : i+n])
			i += n
			continue
		}
		c := q[i]
		if c == ':' && (i == 0 || q[i-1] != ':') && i+1 < len(q) && isIdentStart(q[i+1]) {
			j := i + 1
			for j < len(q) && isIdentChar(q[j]) {
				j++
			}
			name := q[i:j]
			if name == phLast || name == phLimit || name == phPartition {
				k := indexOf(order, name)
				if k < 0 {
					order = append(order, name)
					k = len(order) - 1
				}
				b.WriteString(param(dbType, k+1))
				i = j
				continue
			}
		}
		b.WriteByte(c)
		i++
	}
	return b.String(), order, nil
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

// skipLiteral returns the length of the quoted text or comment at the
// start of s (0 when there is none), or an error when it never ends.
func skipLiteral(s string) (int, error) {
	switch {
	case strings.HasPrefix(s, "'"), strings.HasPrefix(s, `"`):
		// '' (or "") inside is an escaped quote: the scan just goes on.
		q := s[0]
		for i := 1; i < len(s); i++ {
			if s[i] == q {
				if i+1 < len(s) && s[i+1] == q {
					i++
					continue
				}
				return i + 1, nil
			}
		}
		return 0, fmt.Errorf("unterminated %c quote", q)
	case strings.HasPrefix(s, "--"):
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			return i + 1, nil
		}
		return len(s), nil
	case strings.HasPrefix(s, "/*"):
		if i := strings.Index(s[2:], "*/"); i >= 0 {
			return i + 4, nil
		}
		return 0, fmt.Errorf("unterminated /* comment")
	case strings.HasPrefix(s, "$"):
		// A dollar quote: $tag$ … $tag$ (the tag may be empty). $1 is a
		// parameter, not a quote.
		j := 1
		for j < len(s) && isIdentChar(s[j]) && !(j == 1 && s[j] >= '0' && s[j] <= '9') {
			j++
		}
		if j < len(s) && s[j] == '$' {
			tag := s[:j+1]
			if k := strings.Index(s[j+1:], tag); k >= 0 {
				return j + 1 + k + len(tag), nil
			}
			return 0, fmt.Errorf("unterminated dollar quote %s", tag)
		}
	}
	return 0, nil
}

func isIdentStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isIdentChar(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }
