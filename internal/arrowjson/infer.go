package arrowjson

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
)

type tkind uint8

const (
	tUnknown tkind = iota // only nulls (or nothing) seen
	tBool
	tInt
	tFloat
	tStr
	tList
	tStruct
)

// typ is the type inferred for one field (or list element) over all rows.
type typ struct {
	k tkind
	// nullElem records a JSON null seen as an element of an array; an element
	// type with nothing else known becomes Utf8, as arrow-json infers for
	// [null] (an empty array gives Null).
	nullElem bool
	elem     *typ
	names    []string
	fields   []*typ
	index    map[string]int
}

func (t *typ) name() string {
	switch t.k {
	case tBool:
		return "boolean"
	case tInt, tFloat:
		return "number"
	case tStr:
		return "string"
	case tList:
		return "array"
	case tStruct:
		return "object"
	}
	return "null"
}

// field returns the struct field called name, adding it when absent.
func (t *typ) field(name string) *typ {
	if i, ok := t.index[name]; ok {
		return t.fields[i]
	}
	if t.index == nil {
		t.index = make(map[string]int)
	}
	f := &typ{}
	t.index[name] = len(t.names)
	t.names = append(t.names, name)
	t.fields = append(t.fields, f)
	return f
}

// inferErr reports a value whose JSON type conflicts with the type inferred
// from earlier values of the same field.
type inferErr struct {
	path, found, want string
}

func (e *inferErr) Error() string {
	return fmt.Sprintf("field %q: found %s, incompatible with the %s seen before", e.path, e.found, e.want)
}

// merge widens t to admit v; path names the field for errors.
func (t *typ) merge(v *node, path string) error {
	switch v.k {
	case kNull:
		return nil
	case kBool:
		return t.scalar(tBool, v, path)
	case kStr:
		return t.scalar(tStr, v, path)
	case kInt:
		if t.k == tFloat {
			return nil
		}
		return t.scalar(tInt, v, path)
	case kFloat:
		if t.k == tInt {
			t.k = tFloat
			return nil
		}
		return t.scalar(tFloat, v, path)
	case kArr:
		if t.k == tUnknown {
			t.k, t.elem = tList, &typ{}
		}
		if t.k != tList {
			return &inferErr{path, v.describe(), t.name()}
		}
		for i := range v.arr {
			e := &v.arr[i]
			if e.k == kNull {
				t.elem.nullElem = true
			}
			if err := t.elem.merge(e, path+"[]"); err != nil {
				return err
			}
		}
		return nil
	}
	if t.k == tUnknown {
		t.k = tStruct
	}
	if t.k != tStruct {
		return &inferErr{path, v.describe(), t.name()}
	}
	for i, k := range v.keys {
		if err := t.field(k).merge(&v.vals[i], path+"."+k); err != nil {
			return err
		}
	}
	return nil
}

func (t *typ) scalar(k tkind, v *node, path string) error {
	if t.k == tUnknown {
		t.k = k
	}
	if t.k != k {
		return &inferErr{path, v.describe(), t.name()}
	}
	return nil
}

// arrow returns the Arrow type of t: Int64, Float64, Utf8, Boolean, Null,
// List (element field "item", nullable) or Struct (nullable fields).
func (t *typ) arrow() arrow.DataType {
	switch t.k {
	case tBool:
		return arrow.FixedWidthTypes.Boolean
	case tInt:
		return arrow.PrimitiveTypes.Int64
	case tFloat:
		return arrow.PrimitiveTypes.Float64
	case tStr:
		return arrow.BinaryTypes.String
	case tList:
		return arrow.ListOf(t.elem.arrow())
	case tStruct:
		return arrow.StructOf(t.arrowFields()...)
	}
	if t.nullElem {
		return arrow.BinaryTypes.String
	}
	return arrow.Null
}

func (t *typ) arrowFields() []arrow.Field {
	fs := make([]arrow.Field, len(t.names))
	for i, n := range t.names {
		fs[i] = arrow.Field{Name: n, Type: t.fields[i].arrow(), Nullable: true}
	}
	return fs
}
