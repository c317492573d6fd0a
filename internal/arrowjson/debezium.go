package arrowjson

import (
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// DecodeDebezium decodes Debezium change events, one JSON envelope a value
// (values[i] is row i), into one row each, as ArkFlow's debezium_json codec
// flattens them: the fields of "after" (of "before" when "after" is not an
// object, as for deletes) as columns, followed by op, ts_ms, source_db and
// source_table (source.db and source.table), before and source (the compact
// JSON text of those members, "null" when null or missing). A metadata name
// that is also a business field replaces it in place. An envelope wrapped
// as {"schema": …, "payload": {…}} is unwrapped; an empty value (a Kafka
// tombstone) is skipped. Types are inferred over all rows as Decode infers
// them: op, source_db and source_table are Utf8 and ts_ms Int64 for
// Debezium's events (Null when absent from every row); before and source
// are always Utf8. Errors name the row; the caller releases the result.
func DecodeDebezium(values [][]byte) (arrow.RecordBatch, error) {
	return decodeDebezium(memory.DefaultAllocator, values)
}

func decodeDebezium(mem memory.Allocator, values [][]byte) (arrow.RecordBatch, error) {
	var objs []node
	var rows []int
	for i, v := range values {
		if len(v) == 0 {
			continue
		}
		env, err := parseValue(v)
		if err != nil {
			return nil, fmt.Errorf("row %d: %w", i, err)
		}
		if env.k != kObj {
			return nil, fmt.Errorf("row %d: expected a Debezium envelope (a JSON object), found %s", i, env.describe())
		}
		if p := env.get("payload"); p != nil && p.k == kObj && env.get("op") == nil {
			env = *p
		}
		objs = append(objs, flattenEnvelope(&env))
		rows = append(rows, i)
	}
	return buildRecord(mem, objs, rows, nil)
}

// get returns the member key of object n, nil when absent.
func (n *node) get(key string) *node {
	for i, k := range n.keys {
		if k == key {
			return &n.vals[i]
		}
	}
	return nil
}

// set replaces the member key of object n in place, or appends it.
func (n *node) set(key string, v node) {
	for i, k := range n.keys {
		if k == key {
			n.vals[i] = v
			return
		}
	}
	n.keys = append(n.keys, key)
	n.vals = append(n.vals, v)
}

// flattenEnvelope builds the row object of one envelope.
func flattenEnvelope(env *node) node {
	orNull := func(v *node) node {
		if v == nil {
			return node{}
		}
		return *v
	}
	before, after, source := orNull(env.get("before")), orNull(env.get("after")), orNull(env.get("source"))
	row := node{k: kObj}
	business := &after
	if after.k != kObj {
		business = &before
	}
	if business.k == kObj {
		row.keys = append(row.keys, business.keys...)
		row.vals = append(row.vals, business.vals...)
	}
	var db, table node
	if source.k == kObj {
		db, table = orNull(source.get("db")), orNull(source.get("table"))
	}
	row.set("op", orNull(env.get("op")))
	row.set("ts_ms", orNull(env.get("ts_ms")))
	row.set("source_db", db)
	row.set("source_table", table)
	row.set("before", node{k: kStr, s: string(appendSerde(nil, &before))})
	row.set("source", node{k: kStr, s: string(appendSerde(nil, &source))})
	return row
}

// appendSerde appends n as serde_json's compact serialiser writes a parsed
// serde_json Value (serde_json/src/ser.rs): keys in order, integers that
// serde_json holds as i64 or u64 as integers, other numbers through
// appendSerdeFloat, strings escaped by appendString.
func appendSerde(out []byte, n *node) []byte {
	switch n.k {
	case kNull:
		return append(out, "null"...)
	case kBool:
		return strconv.AppendBool(out, n.b)
	case kInt:
		return strconv.AppendInt(out, n.i, 10)
	case kFloat:
		if u, err := strconv.ParseUint(n.s, 10, 64); err == nil {
			return strconv.AppendUint(out, u, 10)
		}
		return appendSerdeFloat(out, n.f)
	case kStr:
		return appendString(out, n.s)
	case kArr:
		out = append(out, '[')
		for i := range n.arr {
			if i > 0 {
				out = append(out, ',')
			}
			out = appendSerde(out, &n.arr[i])
		}
		return append(out, ']')
	}
	out = append(out, '{')
	for i, k := range n.keys {
		if i > 0 {
			out = append(out, ',')
		}
		out = appendString(out, k)
		out = append(out, ':')
		out = appendSerde(out, &n.vals[i])
	}
	return append(out, '}')
}
