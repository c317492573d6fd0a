package job

import (
	"encoding/json"
	"fmt"
	"math"

	yaml "go.yaml.in/yaml/v3"
)

// yamlToJSON converts a YAML document to JSON with YAML 1.2's core schema:
// only true and false are booleans. YAML 1.1 (what sigs.k8s.io/yaml's
// converter implements) also reads y, n, yes, no, on and off as booleans,
// so a schema field written `name: n` would arrive as false.
func yamlToJSON(data []byte) ([]byte, error) {
	var v any
	if err := yaml.Unmarshal(data, &v); err != nil {
		return nil, err
	}
	v, err := jsonValue(v, "")
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// jsonValue turns what yaml.v3 decodes into values encoding/json accepts.
func jsonValue(v any, path string) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			c, err := jsonValue(e, path+"."+k)
			if err != nil {
				return nil, err
			}
			x[k] = c
		}
		return x, nil
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			ks := fmt.Sprint(k)
			c, err := jsonValue(e, path+"."+ks)
			if err != nil {
				return nil, err
			}
			m[ks] = c
		}
		return m, nil
	case []any:
		for i, e := range x {
			c, err := jsonValue(e, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			x[i] = c
		}
		return x, nil
	case float64:
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("%s: %v is not a JSON number", trimDot(path), x)
		}
		return x, nil
	default:
		return x, nil
	}
}

func trimDot(p string) string {
	if len(p) > 0 && p[0] == '.' {
		return p[1:]
	}
	return p
}
