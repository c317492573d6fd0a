package typed

import (
	"fmt"
	"reflect"
	"strings"
	"time"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
)

// kind is what a field holds, once names, pointers and sql.Null wrappers
// are looked through. It picks the encoder and the decoders.
type kind uint8

const (
	kInt8 kind = iota + 1
	kInt16
	kInt32
	kInt64
	kInt // Go int: an int64 column on every platform
	kUint8
	kUint16
	kUint32
	kUint64
	kUint // Go uint: a uint64 column on every platform
	kFloat32
	kFloat64
	kBool
	kString
	kBytes
	kTime
	kDuration
)

// nullMode is how a field says null.
type nullMode uint8

const (
	notNull  nullMode = iota // a plain value: never null
	nullPtr                  // *V: nil is null
	nullFlag                 // sql.NullX / sql.Null[V]: Valid false is null
)

// field is one column of T: where its value sits in a row and how it maps.
type field struct {
	path    string       // Go field path for messages: "Click.Base.ID"
	goType  reflect.Type // the field's declared type, for messages
	name    string       // column name
	off     uintptr      // offset of the field in T
	valOff  uintptr      // nullFlag: offset of the value inside the field
	flagOff uintptr      // nullFlag: offset of Valid inside the field
	kind    kind
	null    nullMode
	unit    arrow.TimeUnit // kTime and kDuration
	dtype   arrow.DataType
	enc     encodeFn
}

// where names the field and its Go type in messages, as in
// "Click.Geo (main.Geo)".
func (f *field) where() string { return fmt.Sprintf("%s (%s)", f.path, f.goType) }

var (
	timeType     = reflect.TypeFor[time.Time]()
	durationType = reflect.TypeFor[time.Duration]()
)

// unitNames are the tag's unit= values.
var unitNames = map[string]arrow.TimeUnit{
	"s": arrow.Second, "ms": arrow.Millisecond, "us": arrow.Microsecond, "ns": arrow.Nanosecond,
}

// candidate is a field found while walking T, before embedded-field
// dominance is resolved.
type candidate struct {
	path   string
	goType reflect.Type
	name   string
	depth  int
	off    uintptr
	unit   string // the tag's unit=, "" if none
}

// plan walks struct type t and returns its columns in declaration order;
// skipped reports whether some field of t has no column.
func plan(t reflect.Type) (fields []*field, skipped bool, err error) {
	if t.Kind() != reflect.Struct {
		return nil, false, fmt.Errorf("typed: rows must be structs, not %s", t)
	}
	root := t.Name()
	if root == "" {
		root = "struct"
	}
	var cands []candidate
	if err := walk(t, root, 0, 0, &cands, &skipped); err != nil {
		return nil, false, err
	}

	// Resolve names as encoding/json does: a shallower field hides deeper
	// ones of the same name (as Go's own selectors do); two at the same
	// depth are refused rather than both dropped.
	best := make(map[string]int, len(cands)) // name -> index of the winner in cands
	for i, c := range cands {
		j, ok := best[c.name]
		switch {
		case !ok || c.depth < cands[j].depth:
			best[c.name] = i
		case c.depth == cands[j].depth:
			return nil, false, fmt.Errorf("typed: %s and %s both map to column %q; rename one with an arkflow:\"name\" tag or skip one with arkflow:\"-\"",
				cands[j].path, c.path, c.name)
		}
	}
	for i, c := range cands {
		if best[c.name] != i {
			skipped = true // hidden by a shallower field
			continue
		}
		f, err := resolve(c)
		if err != nil {
			return nil, false, err
		}
		fields = append(fields, f)
	}
	if len(fields) == 0 {
		return nil, false, fmt.Errorf("typed: %s has no columns: it has no exported fields, or all are tagged arkflow:\"-\"", t)
	}
	return fields, skipped, nil
}

// walk appends the candidate columns of struct t, found at offset base and
// embedding depth depth, to out, and sets skipped if it skips a field.
func walk(t reflect.Type, path string, base uintptr, depth int, out *[]candidate, skipped *bool) error {
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		fpath := path + "." + sf.Name
		tag := sf.Tag.Get("arkflow")
		if tag == "-" {
			*skipped = true
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if sf.Anonymous {
			ft := sf.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			// As encoding/json: an unexported embedded non-struct is
			// skipped; an embedded struct, exported or not, has its
			// exported fields promoted unless the tag names it.
			if !sf.IsExported() && ft.Kind() != reflect.Struct {
				*skipped = true
				continue
			}
			if name == "" && ft.Kind() == reflect.Struct && !isScalarStruct(ft) {
				if sf.Type.Kind() == reflect.Pointer {
					return fmt.Errorf("typed: %s (%s): embedded pointers to structs are not supported; embed %s by value or tag it arkflow:\"-\"",
						fpath, sf.Type, ft)
				}
				if opts != "" {
					return fmt.Errorf("typed: %s (%s): tag options on an embedded struct have no effect; put them on its fields", fpath, sf.Type)
				}
				if err := walk(ft, fpath, base+sf.Offset, depth+1, out, skipped); err != nil {
					return err
				}
				continue
			}
		} else if !sf.IsExported() {
			*skipped = true
			continue
		}
		c := candidate{path: fpath, goType: sf.Type, name: name, depth: depth, off: base + sf.Offset}
		if c.name == "" {
			c.name = sf.Name
		}
		for opts != "" {
			var opt string
			opt, opts, _ = strings.Cut(opts, ",")
			switch {
			case strings.HasPrefix(opt, "unit="):
				c.unit = strings.TrimPrefix(opt, "unit=")
				if _, ok := unitNames[c.unit]; !ok {
					return fmt.Errorf("typed: %s (%s): unit=%q is not one of s, ms, us, ns", fpath, sf.Type, c.unit)
				}
			case opt == "":
			default:
				return fmt.Errorf("typed: %s (%s): unknown tag option %q (the options: unit=s|ms|us|ns)", fpath, sf.Type, opt)
			}
		}
		*out = append(*out, c)
	}
	return nil
}

// isScalarStruct reports whether struct type t is a column by itself:
// time.Time and the database/sql Null types.
func isScalarStruct(t reflect.Type) bool {
	if t == timeType {
		return true
	}
	_, _, _, ok := sqlNull(t)
	return ok
}

// sqlNull recognises database/sql's NullString, NullInt64, ..., NullTime
// and Null[V]: two fields, a value and Valid bool.
func sqlNull(t reflect.Type) (val reflect.Type, valOff, flagOff uintptr, ok bool) {
	if t.Kind() != reflect.Struct || t.PkgPath() != "database/sql" || !strings.HasPrefix(t.Name(), "Null") || t.NumField() != 2 {
		return nil, 0, 0, false
	}
	v, flag := t.Field(0), t.Field(1)
	if flag.Name != "Valid" || flag.Type.Kind() != reflect.Bool {
		return nil, 0, 0, false
	}
	return v.Type, v.Offset, flag.Offset, true
}

// resolve maps one candidate to its column, or refuses its type.
func resolve(c candidate) (*field, error) {
	f := &field{path: c.path, goType: c.goType, name: c.name, off: c.off}
	t := c.goType
	switch {
	case t.Kind() == reflect.Pointer:
		f.null = nullPtr
		t = t.Elem()
	default:
		if v, valOff, flagOff, ok := sqlNull(t); ok {
			f.null, f.valOff, f.flagOff = nullFlag, valOff, flagOff
			t = v
		}
	}
	k, why := scalar(t)
	if why != "" {
		return nil, fmt.Errorf("typed: %s: %s", f.where(), why)
	}
	f.kind = k
	if c.unit != "" && k != kTime && k != kDuration {
		return nil, fmt.Errorf("typed: %s: unit= applies only to time.Time and time.Duration fields", f.where())
	}
	f.unit = arrow.Millisecond
	if c.unit != "" {
		f.unit = unitNames[c.unit]
	}
	f.dtype = arrowType(k, f.unit)
	f.enc = encoderFor(k)
	return f, nil
}

// scalar returns the kind of a value type, or why it is refused.
func scalar(t reflect.Type) (kind, string) {
	switch t {
	case timeType:
		return kTime, ""
	case durationType:
		return kDuration, ""
	}
	const skip = `; tag it arkflow:"-" to skip it`
	switch t.Kind() {
	case reflect.Int:
		return kInt, ""
	case reflect.Int8:
		return kInt8, ""
	case reflect.Int16:
		return kInt16, ""
	case reflect.Int32:
		return kInt32, ""
	case reflect.Int64:
		return kInt64, ""
	case reflect.Uint:
		return kUint, ""
	case reflect.Uint8:
		return kUint8, ""
	case reflect.Uint16:
		return kUint16, ""
	case reflect.Uint32:
		return kUint32, ""
	case reflect.Uint64:
		return kUint64, ""
	case reflect.Float32:
		return kFloat32, ""
	case reflect.Float64:
		return kFloat64, ""
	case reflect.Bool:
		return kBool, ""
	case reflect.String:
		return kString, ""
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return kBytes, ""
		}
		return 0, "slices are not supported (only []byte)" + skip
	case reflect.Struct:
		if _, _, _, ok := sqlNull(t); ok {
			return 0, "a pointer to a database/sql Null type is doubly nullable; use the Null type by value"
		}
		return 0, `nested structs are not supported; flatten it or tag it arkflow:"-"`
	case reflect.Pointer:
		return 0, "pointers to pointers are not supported" + skip
	case reflect.Array:
		return 0, "arrays are not supported (only []byte)" + skip
	case reflect.Map:
		return 0, "maps are not supported" + skip
	case reflect.Chan:
		return 0, "channels are not supported" + skip
	case reflect.Func:
		return 0, "funcs are not supported" + skip
	case reflect.Interface:
		return 0, "interfaces are not supported" + skip
	default: // uintptr, complex, unsafe.Pointer
		return 0, t.Kind().String() + " is not supported" + skip
	}
}

// arrowType is the column type a kind encodes to.
func arrowType(k kind, unit arrow.TimeUnit) arrow.DataType {
	switch k {
	case kInt8:
		return arrow.PrimitiveTypes.Int8
	case kInt16:
		return arrow.PrimitiveTypes.Int16
	case kInt32:
		return arrow.PrimitiveTypes.Int32
	case kInt64, kInt:
		return arrow.PrimitiveTypes.Int64
	case kUint8:
		return arrow.PrimitiveTypes.Uint8
	case kUint16:
		return arrow.PrimitiveTypes.Uint16
	case kUint32:
		return arrow.PrimitiveTypes.Uint32
	case kUint64, kUint:
		return arrow.PrimitiveTypes.Uint64
	case kFloat32:
		return arrow.PrimitiveTypes.Float32
	case kFloat64:
		return arrow.PrimitiveTypes.Float64
	case kBool:
		return arrow.FixedWidthTypes.Boolean
	case kString:
		return arrow.BinaryTypes.String
	case kBytes:
		return arrow.BinaryTypes.Binary
	case kTime:
		return &arrow.TimestampType{Unit: unit, TimeZone: "UTC"}
	case kDuration:
		return &arrow.DurationType{Unit: unit}
	}
	panic("typed: unknown kind")
}

// perSecond is how many of unit make a second.
func perSecond(unit arrow.TimeUnit) int64 {
	switch unit {
	case arrow.Second:
		return 1
	case arrow.Millisecond:
		return 1e3
	case arrow.Microsecond:
		return 1e6
	default:
		return 1e9
	}
}

// intSize is the size of Go's int and uint on this platform.
const intSize = unsafe.Sizeof(int(0))
