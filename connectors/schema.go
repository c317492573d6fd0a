package connectors

import (
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
)

// Field declares one column of a connector's rows, as written in specs:
// {name, type, unit?, nullable?}.
type Field struct {
	Name string `json:"name"`
	// Type is one of int64, float32, float64, string, bool, timestamp.
	Type string `json:"type"`
	// Unit is the timestamp unit: s, ms (default), us or ns.
	Unit string `json:"unit,omitempty"`
	// Nullable says whether the column may hold nulls (default true).
	Nullable *bool `json:"nullable,omitempty"`
}

// FieldTypes lists the types a Field may declare.
var FieldTypes = []string{"int64", "float32", "float64", "string", "bool", "timestamp"}

// Schema is a declared list of fields.
type Schema []Field

// Arrow converts the declared schema, reporting every problem with its path
// (relative to path, e.g. "schema").
func (s Schema) Arrow(path string) (*arrow.Schema, error) {
	var f Fields
	fields := make([]arrow.Field, 0, len(s))
	seen := map[string]int{}
	if len(s) == 0 {
		f.Add(path, "must declare at least one field")
	}
	for i, fd := range s {
		at := fmt.Sprintf("%s[%d]", path, i)
		if fd.Name == "" {
			f.Add(at+".name", "is required")
		} else if strings.HasPrefix(fd.Name, MetaPrefix) {
			f.Add(at+".name", "names starting with %q are reserved for source metadata (got %q)", MetaPrefix, fd.Name)
		} else if j, dup := seen[fd.Name]; dup {
			f.Add(at+".name", "duplicate field %q (also %s[%d])", fd.Name, path, j)
		} else {
			seen[fd.Name] = i
		}
		dt, err := DataType(fd.Type, fd.Unit)
		if err != nil {
			f.Merge(at, err)
			continue
		}
		nullable := fd.Nullable == nil || *fd.Nullable
		fields = append(fields, arrow.Field{Name: fd.Name, Type: dt, Nullable: nullable})
	}
	if err := f.Err(); err != nil {
		return nil, err
	}
	return arrow.NewSchema(fields, nil), nil
}

// DataType returns the Arrow type of a declared type name and unit. Errors
// name the field "type" or "unit".
func DataType(typ, unit string) (arrow.DataType, error) {
	if unit != "" && typ != "timestamp" {
		return nil, FieldError("unit", "only timestamp fields have a unit (type is %q)", typ)
	}
	switch typ {
	case "int64":
		return arrow.PrimitiveTypes.Int64, nil
	case "float32":
		return arrow.PrimitiveTypes.Float32, nil
	case "float64":
		return arrow.PrimitiveTypes.Float64, nil
	case "string":
		return arrow.BinaryTypes.String, nil
	case "bool":
		return arrow.FixedWidthTypes.Boolean, nil
	case "timestamp":
		u, ok := timeUnits[unit]
		if !ok {
			return nil, FieldError("unit", "must be one of s, ms, us, ns (got %q)", unit)
		}
		return &arrow.TimestampType{Unit: u, TimeZone: "UTC"}, nil
	default:
		return nil, FieldError("type", "must be one of %s (got %q)", strings.Join(FieldTypes, ", "), typ)
	}
}

var timeUnits = map[string]arrow.TimeUnit{"": arrow.Millisecond, "s": arrow.Second, "ms": arrow.Millisecond, "us": arrow.Microsecond, "ns": arrow.Nanosecond}

// FromArrow declares an Arrow schema as Fields, for components built in Go
// that must describe their rows in a spec. Types outside FieldTypes are an
// error naming the column.
func FromArrow(s *arrow.Schema) (Schema, error) {
	var out Schema
	for _, f := range s.Fields() {
		if IsMeta(f.Name) {
			continue
		}
		fd := Field{Name: f.Name}
		switch t := f.Type.(type) {
		case *arrow.Int64Type:
			fd.Type = "int64"
		case *arrow.Float32Type:
			fd.Type = "float32"
		case *arrow.Float64Type:
			fd.Type = "float64"
		case *arrow.StringType:
			fd.Type = "string"
		case *arrow.BooleanType:
			fd.Type = "bool"
		case *arrow.TimestampType:
			fd.Type = "timestamp"
			fd.Unit = map[arrow.TimeUnit]string{arrow.Second: "s", arrow.Millisecond: "ms", arrow.Microsecond: "us", arrow.Nanosecond: "ns"}[t.Unit]
		default:
			return nil, fmt.Errorf("column %q: type %s cannot be declared in a spec (use one of %s)", f.Name, f.Type, strings.Join(FieldTypes, ", "))
		}
		if !f.Nullable {
			no := false
			fd.Nullable = &no
		}
		out = append(out, fd)
	}
	return out, nil
}
