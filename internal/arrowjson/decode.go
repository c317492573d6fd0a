package arrowjson

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// DefaultValueField is the column that holds raw payloads in ArkFlow's
// message batches, read by Decode when no field is named and written by
// AppendValue.
const DefaultValueField = "__value__"

// Decode parses the values of column field of rec (DefaultValueField when
// field is empty) as one JSON object each and returns a record of the parsed
// columns only, with the schema inferred over all rows (see the package
// documentation). The column may be Binary, LargeBinary, BinaryView, String,
// LargeString or StringView; null values are skipped, as ArkFlow skips
// them. include, when non-empty, keeps only the named top-level fields, in
// order of first appearance. Errors name the 0-based row of rec and the
// field; no record is returned with an error. The caller releases the
// result.
func Decode(rec arrow.RecordBatch, field string, include []string) (arrow.RecordBatch, error) {
	return decode(memory.DefaultAllocator, rec, field, include)
}

// DecodeValues is Decode for raw payloads: values[i] is row i.
func DecodeValues(values [][]byte, include []string) (arrow.RecordBatch, error) {
	rows := make([]int, len(values))
	for i := range rows {
		rows[i] = i
	}
	return decodeRows(memory.DefaultAllocator, values, rows, include)
}

func decode(mem memory.Allocator, rec arrow.RecordBatch, field string, include []string) (arrow.RecordBatch, error) {
	values, rows, err := columnValues(rec, field)
	if err != nil {
		return nil, err
	}
	return decodeRows(mem, values, rows, include)
}

// columnValues returns the non-null values of column field of rec with
// their row numbers.
func columnValues(rec arrow.RecordBatch, field string) ([][]byte, []int, error) {
	if field == "" {
		field = DefaultValueField
	}
	idx := rec.Schema().FieldIndices(field)
	if len(idx) == 0 {
		return nil, nil, fmt.Errorf("column %q not found", field)
	}
	col := rec.Column(idx[0])
	var get func(int) []byte
	switch a := col.(type) {
	case *array.Binary:
		get = a.Value
	case *array.LargeBinary:
		get = a.Value
	case *array.BinaryView:
		get = a.Value
	case *array.String:
		get = func(i int) []byte { return []byte(a.Value(i)) }
	case *array.LargeString:
		get = func(i int) []byte { return []byte(a.Value(i)) }
	case *array.StringView:
		get = func(i int) []byte { return []byte(a.Value(i)) }
	default:
		return nil, nil, fmt.Errorf("column %q: type %s is not binary or string", field, col.DataType())
	}
	var values [][]byte
	var rows []int
	for i := 0; i < col.Len(); i++ {
		if col.IsNull(i) {
			continue
		}
		values = append(values, get(i))
		rows = append(rows, i)
	}
	return values, rows, nil
}

// decodeRows parses values (values[i] is row rows[i] of the input) into
// objects, infers their schema and builds the record.
func decodeRows(mem memory.Allocator, values [][]byte, rows []int, include []string) (arrow.RecordBatch, error) {
	objs := make([]node, 0, len(values))
	objRows := make([]int, 0, len(values))
	sh := &shared{keys: map[string]string{}}
	for i, v := range values {
		ns, err := parseAll(sh, v)
		if err != nil {
			return nil, fmt.Errorf("row %d: %w", rows[i], err)
		}
		for k, n := range ns {
			if n.k != kObj {
				return nil, fmt.Errorf("row %d: expected a JSON object, found %s%s", rows[i], n.describe(), nth(k, len(ns)))
			}
		}
		objs = append(objs, ns...)
		for range ns {
			objRows = append(objRows, rows[i])
		}
	}
	return buildRecord(mem, objs, objRows, include)
}

// buildRecord infers the schema of objs over all of them and builds the
// record; rows numbers objs for errors.
func buildRecord(mem memory.Allocator, objs []node, rows []int, include []string) (arrow.RecordBatch, error) {
	var keep map[string]bool
	if len(include) > 0 {
		keep = make(map[string]bool, len(include))
		for _, name := range include {
			keep[name] = true
		}
	}
	root := &typ{k: tStruct}
	for i := range objs {
		o := &objs[i]
		for j, k := range o.keys {
			if keep != nil && !keep[k] {
				continue
			}
			if err := root.field(k).merge(&o.vals[j], k); err != nil {
				return nil, fmt.Errorf("row %d: %w", rows[i], err)
			}
		}
	}
	schema := arrow.NewSchema(root.arrowFields(), nil)
	builders := make([]array.Builder, len(root.fields))
	for i, f := range schema.Fields() {
		builders[i] = array.NewBuilder(mem, f.Type)
	}
	defer func() {
		for _, b := range builders {
			b.Release()
		}
	}()
	for i := range objs {
		slots := root.slots(&objs[i])
		for j, b := range builders {
			appendValue(b, root.fields[j], slots[j])
		}
	}
	cols := make([]arrow.Array, len(builders))
	for i, b := range builders {
		cols[i] = b.NewArray()
	}
	rec := array.NewRecordBatch(schema, cols, int64(len(objs)))
	for _, c := range cols {
		c.Release()
	}
	return rec, nil
}

// slots returns the values of obj for the fields of struct type t, in field
// order, nil where obj lacks the key.
func (t *typ) slots(obj *node) []*node {
	s := make([]*node, len(t.names))
	for i, k := range obj.keys {
		if j, ok := t.index[k]; ok {
			s[j] = &obj.vals[i]
		}
	}
	return s
}

// appendValue appends v (nil when missing) to b, built for type t; merge has
// checked that v fits t.
func appendValue(b array.Builder, t *typ, v *node) {
	if v == nil || v.k == kNull {
		b.AppendNull()
		return
	}
	switch t.k {
	case tBool:
		b.(*array.BooleanBuilder).Append(v.b)
	case tInt:
		b.(*array.Int64Builder).Append(v.i)
	case tFloat:
		f := v.f
		if v.k == kInt {
			f = float64(v.i)
		}
		b.(*array.Float64Builder).Append(f)
	case tStr:
		b.(*array.StringBuilder).Append(v.s)
	case tList:
		lb := b.(*array.ListBuilder)
		lb.Append(true)
		vb := lb.ValueBuilder()
		for i := range v.arr {
			appendValue(vb, t.elem, &v.arr[i])
		}
	case tStruct:
		sb := b.(*array.StructBuilder)
		sb.Append(true)
		for i, s := range t.slots(v) {
			appendValue(sb.FieldBuilder(i), t.fields[i], s)
		}
	default:
		b.AppendNull()
	}
}

// nth names the k-th of n values of one payload, when there are several.
func nth(k, n int) string {
	if n == 1 {
		return ""
	}
	return fmt.Sprintf(" (value %d of the payload's %d)", k+1, n)
}
