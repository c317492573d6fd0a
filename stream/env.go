package stream

import (
	"os"
	"strings"

	"github.com/arkflow-rs/arkflow-go/internal/config"
)

// expandEnv replaces ${VAR} and ${VAR:-default} in every string value of
// v (not in keys) from the environment; $${ is a literal ${. An unset
// variable without a default is a problem at the string's path.
func expandEnv(path string, v any, errs *config.Problems) any {
	switch x := v.(type) {
	case string:
		s, err := expandString(x)
		if err != "" {
			errs.Add(path, "%s", err)
			return x
		}
		return s
	case map[string]any:
		for k, e := range x {
			x[k] = expandEnv(config.Join(path, k), e, errs)
		}
		return x
	case []any:
		for i, e := range x {
			x[i] = expandEnv(config.Index(path, i), e, errs)
		}
		return x
	default:
		return v
	}
}

// expandString expands one string; the second result is the problem, if
// any.
func expandString(s string) (string, string) {
	if !strings.Contains(s, "${") {
		return s, ""
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), ""
		}
		if i > 0 && s[i-1] == '$' {
			b.WriteString(s[:i-1] + "${")
			s = s[i+2:]
			continue
		}
		b.WriteString(s[:i])
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", "unterminated ${ (write $${ for a literal ${)"
		}
		expr := s[i+2 : i+end]
		name, def, hasDef := strings.Cut(expr, ":-")
		if !validEnvName(name) {
			return "", "${" + expr + "}: " + quoteName(name) + " is not an environment variable name (letters, digits and _, not starting with a digit)"
		}
		val, ok := os.LookupEnv(name)
		switch {
		case ok && (val != "" || !hasDef):
			b.WriteString(val)
		case hasDef:
			b.WriteString(def)
		default:
			return "", "environment variable " + name + " is not set (give a default with ${" + name + ":-default})"
		}
		s = s[i+end+1:]
	}
}

func quoteName(n string) string { return "\"" + n + "\"" }

func validEnvName(n string) bool {
	if n == "" {
		return false
	}
	for i, r := range n {
		switch {
		case r == '_', r >= 'A' && r <= 'Z', r >= 'a' && r <= 'z':
		case r >= '0' && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
