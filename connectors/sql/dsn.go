package sql

// This file holds the connection strings: PostgreSQL's, with the ssl
// block merged into it, and SQLite's.

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
)

// sslParam is one field of the ssl block and its connection string
// parameter.
type sslParam struct{ key, param, value string }

// params lists the ssl block's fields with their connection string
// parameters, in a fixed order.
func (s *SSL) params() []sslParam {
	return []sslParam{
		{"ssl_mode", "sslmode", s.SSLMode},
		{"root_cert", "sslrootcert", s.RootCert},
		{"client_cert", "sslcert", s.ClientCert},
		{"client_key", "sslkey", s.ClientKey},
	}
}

// isURL reports whether a PostgreSQL connection string is a URL (else it
// is key=value pairs).
func isURL(uri string) bool {
	return strings.HasPrefix(uri, "postgres://") || strings.HasPrefix(uri, "postgresql://")
}

// checkURI checks the syntax of a connection string, without reading any
// file it names (certificates, a passfile): validation has no side
// effects and may run on another machine than the job.
func checkURI(uri string) error {
	_, err := uriParams(uri)
	return err
}

// uriParams returns the parameters of a connection string: a URL's query,
// or the key=value pairs.
func uriParams(uri string) (map[string]string, error) {
	if isURL(uri) {
		u, err := url.Parse(uri)
		if err != nil {
			return nil, fmt.Errorf("is not a valid URL: %v", err)
		}
		q, err := url.ParseQuery(u.RawQuery)
		if err != nil {
			return nil, fmt.Errorf("has an invalid query: %v", err)
		}
		out := map[string]string{}
		for k, v := range q {
			out[k] = v[len(v)-1]
		}
		return out, nil
	}
	if strings.Contains(uri, "://") {
		return nil, errors.New("must be a postgres:// or postgresql:// URL, or key=value pairs")
	}
	return parseKeywords(uri)
}

// parseKeywords parses libpq's key=value connection string: pairs
// separated by spaces, a value optionally in single quotes, in which \'
// and \\ stand for ' and \.
func parseKeywords(s string) (map[string]string, error) {
	out := map[string]string{}
	i := 0
	for {
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		if i == len(s) {
			return out, nil
		}
		start := i
		for i < len(s) && s[i] != '=' && !isSpace(s[i]) {
			i++
		}
		key := s[start:i]
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		if i == len(s) || s[i] != '=' || key == "" {
			return nil, fmt.Errorf("is not key=value pairs: %q has no value", key)
		}
		i++
		for i < len(s) && isSpace(s[i]) {
			i++
		}
		val, n, err := keywordValue(s[i:])
		if err != nil {
			return nil, fmt.Errorf("value of %s: %v", key, err)
		}
		out[key] = val
		i += n
	}
}

// keywordValue reads one value at the start of s and returns it with the
// bytes it took.
func keywordValue(s string) (string, int, error) {
	var b strings.Builder
	if !strings.HasPrefix(s, "'") {
		i := 0
		for i < len(s) && !isSpace(s[i]) {
			if s[i] == '\\' && i+1 < len(s) {
				i++
			}
			b.WriteByte(s[i])
			i++
		}
		return b.String(), i, nil
	}
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			if i+1 < len(s) {
				i++
			}
			b.WriteByte(s[i])
		case '\'':
			return b.String(), i + 1, nil
		default:
			b.WriteByte(s[i])
		}
	}
	return "", 0, errors.New("unterminated quoted value")
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'
}

// quoteKeyword quotes a value for a key=value connection string.
func quoteKeyword(v string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}

// pgConnString returns the connection string of a postgres DB, with the
// ssl block's parameters added.
func pgConnString(d DB) (string, error) {
	if d.SSL == nil {
		return d.URI, nil
	}
	var set []sslParam
	for _, p := range d.SSL.params() {
		if p.value != "" {
			set = append(set, p)
		}
	}
	if !isURL(d.URI) {
		var b strings.Builder
		b.WriteString(d.URI)
		for _, p := range set {
			fmt.Fprintf(&b, " %s=%s", p.param, quoteKeyword(p.value))
		}
		return b.String(), nil
	}
	u, err := url.Parse(d.URI)
	if err != nil {
		return "", err
	}
	q := u.Query()
	for _, p := range set {
		q.Set(p.param, p.value)
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// sqliteDSN is modernc's data source name of a database file: the path
// (checked to hold no '?'), waiting up to 10 s for a lock another
// connection holds before SQLITE_BUSY (which a write retries).
func sqliteDSN(path string) string {
	return path + "?_pragma=busy_timeout(10000)"
}
