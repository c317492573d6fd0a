package hub

import (
	"encoding/json"
	"regexp"
)

// secretRef is a ${secret:NAME} reference in a spec, which the Hub
// resolves from its own environment when it distributes the spec.
var secretRef = regexp.MustCompile(`\$\{secret:([A-Za-z_][A-Za-z0-9_]*)\}`)

// resolveSecrets replaces every ${secret:NAME} in the JSON text b with the
// value lookup gives NAME, escaped for a JSON string, and returns the
// names lookup does not know. The Hub stores specs with the references
// and resolves them only when it hands a start command to an Agent, so
// secrets never reach its database. env: and file: references are left
// to the node.
func resolveSecrets(b []byte, lookup func(string) (string, bool)) ([]byte, []string) {
	var missing []string
	out := secretRef.ReplaceAllFunc(b, func(m []byte) []byte {
		name := string(secretRef.FindSubmatch(m)[1])
		v, ok := lookup(name)
		if !ok {
			missing = append(missing, name)
			return m
		}
		q, _ := json.Marshal(v)
		return q[1 : len(q)-1]
	})
	return out, missing
}
