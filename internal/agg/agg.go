// Package agg implements the aggregate functions of aggregate and window
// operators over Arrow columns: count, sum, min, max, avg, first, last.
//
// Accumulators are columnar: one slice per aggregate, indexed by a dense
// group ID that the caller assigns (a key, or a key and a window). Update
// folds a whole batch into the groups of its rows with one tight loop per
// aggregate, so a batch costs one pass per aggregate rather than one map
// lookup per row and aggregate.
//
// Types: count is Int64; sum, min and max of integer columns are
// Int64, of Float64 columns Float64, of Float32 columns Float32 (accumulated
// in float64); avg is Float64; min and max of timestamps keep the timestamp
// type; first and last keep the input type. Nulls are ignored by every
// function; a group that saw no non-null value outputs null (never a
// sentinel such as 0 or MaxInt64).
//
// NaN: sum and avg follow IEEE-754 (a NaN input makes the result NaN). min
// and max ignore NaN unless every non-null value of the group is NaN, in
// which case the result is NaN. Integer sums that overflow int64 are an
// error naming the aggregate.
package agg

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/arkflow-rs/arkflow-go/internal/suggest"
	"github.com/arkflow-rs/arkflow-go/job"
)

// Function names.
const (
	Count = "count"
	Sum   = "sum"
	Min   = "min"
	Max   = "max"
	Avg   = "avg"
	First = "first"
	Last  = "last"
)

// Functions lists the supported function names.
var Functions = []string{Count, Sum, Min, Max, Avg, First, Last}

// Spec is one aggregate as written in a spec: {function, field, as}.
type Spec = job.Aggregate

// kinds of value storage
type vkind int

const (
	vInt vkind = iota
	vFloat
	vString
	vBool
)

type compiled struct {
	fn     string
	col    int // -1: count rows
	in     arrow.DataType
	out    arrow.DataType
	kind   vkind // storage of min/max/first/last/sum
	f32    bool
	name   string
	source string
}

// Set is a compiled list of aggregates for one input schema.
type Set struct {
	aggs   []compiled
	fields []arrow.Field
}

// Check reports the problems of an aggregate list that do not depend on
// the input schema: unknown functions, missing fields, duplicate names.
func Check(specs []Spec, path string) error {
	var errs []error
	add := func(i int, field, format string, args ...any) {
		errs = append(errs, &job.FieldError{Path: fmt.Sprintf("%s[%d].%s", path, i, field), Reason: fmt.Sprintf(format, args...)})
	}
	if len(specs) == 0 {
		errs = append(errs, &job.FieldError{Path: path, Reason: "needs at least one aggregate"})
	}
	names := map[string]int{}
	for i, sp := range specs {
		known := false
		for _, f := range Functions {
			known = known || f == sp.Function
		}
		if !known {
			add(i, "function", "unknown aggregate function %q (known: %s)", sp.Function, strings.Join(Functions, ", "))
			continue
		}
		if j, dup := names[sp.OutputName()]; dup {
			add(i, "as", "duplicate output column %q (also %s[%d])", sp.OutputName(), path, j)
		}
		names[sp.OutputName()] = i
		if sp.Field == "" && sp.Function != Count {
			add(i, "field", "%s needs a field", sp.Function)
		}
	}
	if len(errs) > 0 {
		return joinErrors(errs)
	}
	return nil
}

// Compile resolves aggregates against the input schema. path is where the
// list sits in the spec (e.g. "config.aggregates"); every problem is
// reported at once.
func Compile(specs []Spec, in *arrow.Schema, path string) (*Set, error) {
	var errs []error
	add := func(i int, field, format string, args ...any) {
		errs = append(errs, &job.FieldError{Path: fmt.Sprintf("%s[%d].%s", path, i, field), Reason: fmt.Sprintf(format, args...)})
	}
	if len(specs) == 0 {
		errs = append(errs, &job.FieldError{Path: path, Reason: "needs at least one aggregate"})
	}
	s := &Set{}
	names := map[string]int{}
	for i, sp := range specs {
		c := compiled{fn: sp.Function, col: -1, name: sp.OutputName(), source: sp.Field}
		known := false
		for _, f := range Functions {
			known = known || f == sp.Function
		}
		if !known {
			add(i, "function", "unknown aggregate function %q (known: %s)", sp.Function, strings.Join(Functions, ", "))
			continue
		}
		if j, dup := names[c.name]; dup {
			add(i, "as", "duplicate output column %q (also %s[%d])", c.name, path, j)
		}
		names[c.name] = i
		if sp.Field == "" {
			if sp.Function != Count {
				add(i, "field", "%s needs a field", sp.Function)
				continue
			}
			c.out = arrow.PrimitiveTypes.Int64
			s.aggs = append(s.aggs, c)
			continue
		}
		idx := in.FieldIndices(sp.Field)
		if len(idx) == 0 {
			add(i, "field", "%s", suggest.UnknownColumn(sp.Field, columnNames(in)))
			continue
		}
		c.col = idx[0]
		c.in = in.Field(c.col).Type
		var ok bool
		c.out, c.kind, c.f32, ok = outputType(sp.Function, c.in)
		if !ok {
			add(i, "field", "%s cannot aggregate column %q of type %s (it needs a numeric column%s)", sp.Function, sp.Field, c.in, timestampNote(sp.Function))
			continue
		}
		s.aggs = append(s.aggs, c)
	}
	if len(errs) > 0 {
		return nil, joinErrors(errs)
	}
	for _, c := range s.aggs {
		s.fields = append(s.fields, arrow.Field{Name: c.name, Type: c.out, Nullable: true})
	}
	return s, nil
}

func timestampNote(fn string) string {
	switch fn {
	case Min, Max:
		return " or a timestamp"
	case First, Last:
		return ", string, bool or timestamp"
	}
	return ""
}

func columnNames(s *arrow.Schema) []string {
	names := make([]string, 0, s.NumFields())
	for _, f := range s.Fields() {
		names = append(names, f.Name)
	}
	return names
}

type multiError []error

func (m multiError) Error() string {
	parts := make([]string, len(m))
	for i, e := range m {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "\n")
}
func (m multiError) Unwrap() []error { return m }

func joinErrors(errs []error) error { return multiError(errs) }

func isInt(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32:
		return true
	}
	return false
}

func outputType(fn string, in arrow.DataType) (out arrow.DataType, k vkind, f32 bool, ok bool) {
	i64, f64 := arrow.PrimitiveTypes.Int64, arrow.PrimitiveTypes.Float64
	switch fn {
	case Count:
		return i64, vInt, false, true
	case Avg:
		if isInt(in) || in.ID() == arrow.FLOAT32 || in.ID() == arrow.FLOAT64 {
			return f64, vFloat, false, true
		}
	case Sum, Min, Max:
		switch {
		case isInt(in):
			return i64, vInt, false, true
		case in.ID() == arrow.FLOAT64:
			return f64, vFloat, false, true
		case in.ID() == arrow.FLOAT32:
			return arrow.PrimitiveTypes.Float32, vFloat, true, true
		case in.ID() == arrow.TIMESTAMP && fn != Sum:
			return in, vInt, false, true
		}
	case First, Last:
		switch {
		case isInt(in):
			return in, vInt, false, true
		case in.ID() == arrow.FLOAT64:
			return f64, vFloat, false, true
		case in.ID() == arrow.FLOAT32:
			return arrow.PrimitiveTypes.Float32, vFloat, true, true
		case in.ID() == arrow.TIMESTAMP:
			return in, vInt, false, true
		case in.ID() == arrow.STRING:
			return in, vString, false, true
		case in.ID() == arrow.BOOL:
			return in, vBool, false, true
		}
	}
	return nil, 0, false, false
}

// Fields returns the output columns, one per aggregate, in spec order.
func (s *Set) Fields() []arrow.Field { return s.fields }

// Len is the number of aggregates.
func (s *Set) Len() int { return len(s.aggs) }

// State holds the accumulators of every group for one Set.
type State struct {
	set    *Set
	groups int
	accs   []accumulator
}

type accumulator struct {
	n   []int64   // count; non-null count for avg; 1 when set for first/last/min/max
	i   []int64   // int sums, min/max of ints and timestamps, first/last ints
	f   []float64 // float sums, min/max, first/last floats
	s   []string  // first/last strings
	b   []bool    // first/last bools
	nan []bool    // min/max: saw NaN
}

// NewState returns empty accumulators.
func (s *Set) NewState() *State {
	return &State{set: s, accs: make([]accumulator, len(s.aggs))}
}

// Groups is the number of groups.
func (st *State) Groups() int { return st.groups }

// Grow makes room for groups up to n (new groups start empty).
func (st *State) Grow(n int) {
	if n <= st.groups {
		return
	}
	for k := range st.accs {
		a := &st.accs[k]
		c := st.set.aggs[k]
		a.n = growTo(a.n, n)
		switch {
		case c.fn == Count:
		case c.fn == Avg || c.kind == vFloat:
			a.f = growTo(a.f, n)
			if c.fn == Min || c.fn == Max {
				a.nan = growTo(a.nan, n)
			}
		case c.kind == vInt:
			a.i = growTo(a.i, n)
		case c.kind == vString:
			a.s = growTo(a.s, n)
		case c.kind == vBool:
			a.b = growTo(a.b, n)
		}
	}
	st.groups = n
}

func growTo[T any](s []T, n int) []T {
	if n <= len(s) {
		return s
	}
	if n <= cap(s) {
		var zero T
		old := len(s)
		s = s[:n]
		for i := old; i < n; i++ {
			s[i] = zero
		}
		return s
	}
	ns := make([]T, n, max(n, 2*cap(s)))
	copy(ns, s)
	return ns
}

// Reset clears group g so it can be reused.
func (st *State) Reset(g int) {
	for k := range st.accs {
		a := &st.accs[k]
		a.n[g] = 0
		if a.i != nil {
			a.i[g] = 0
		}
		if a.f != nil {
			a.f[g] = 0
		}
		if a.s != nil {
			a.s[g] = ""
		}
		if a.b != nil {
			a.b[g] = false
		}
		if a.nan != nil {
			a.nan[g] = false
		}
	}
}

// Merge folds group src into group dst (session windows merging): counts
// and sums add, min and max compare, avg adds sum and count; first keeps
// dst's value when it has one and last takes src's when it has one, so
// merging sessions in start order keeps arrival order within each. src is
// left unchanged; the caller resets or frees it.
func (st *State) Merge(dst, src int) error {
	for k, c := range st.set.aggs {
		a := &st.accs[k]
		if a.n[src] == 0 && (a.nan == nil || !a.nan[src]) {
			continue
		}
		switch {
		case c.fn == Count || c.fn == Avg:
			a.n[dst] += a.n[src]
			if c.fn == Avg {
				a.f[dst] += a.f[src]
			}
		case c.fn == First:
			if a.n[dst] == 0 {
				copySlot(a, dst, src)
			}
		case c.fn == Last:
			copySlot(a, dst, src)
		case c.fn == Sum && c.kind == vInt:
			sum, overflow := addInt(a.i[dst], a.i[src])
			if overflow {
				return fmt.Errorf("aggregate %q: sum of column %q overflows int64", c.name, c.source)
			}
			a.i[dst], a.n[dst] = sum, 1
		case c.fn == Sum:
			a.f[dst] += a.f[src]
			a.n[dst] = 1
		case c.kind == vInt: // min, max of ints and timestamps
			if a.n[dst] == 0 || (c.fn == Min && a.i[src] < a.i[dst]) || (c.fn == Max && a.i[src] > a.i[dst]) {
				a.i[dst] = a.i[src]
			}
			a.n[dst] = 1
		default: // min, max of floats
			if a.nan[src] {
				a.nan[dst] = true
			}
			if a.n[src] > 0 {
				if a.n[dst] == 0 || (c.fn == Min && a.f[src] < a.f[dst]) || (c.fn == Max && a.f[src] > a.f[dst]) {
					a.f[dst] = a.f[src]
				}
				a.n[dst] = 1
			}
		}
	}
	return nil
}

func copySlot(a *accumulator, dst, src int) {
	if a.n[src] == 0 {
		return
	}
	a.n[dst] = 1
	switch {
	case a.i != nil:
		a.i[dst] = a.i[src]
	case a.f != nil:
		a.f[dst] = a.f[src]
	case a.s != nil:
		a.s[dst] = a.s[src]
	case a.b != nil:
		a.b[dst] = a.b[src]
	}
}

// Update folds rows of rec into groups: row r goes to group gid[r]; rows
// with gid < 0 are skipped. Groups must exist (Grow).
func (st *State) Update(rec arrow.RecordBatch, gid []int32) error {
	for k, c := range st.set.aggs {
		a := &st.accs[k]
		if c.col < 0 {
			for _, g := range gid {
				if g >= 0 {
					a.n[g]++
				}
			}
			continue
		}
		if err := update(a, c, rec.Column(c.col), gid); err != nil {
			return err
		}
	}
	return nil
}

func update(a *accumulator, c compiled, col arrow.Array, gid []int32) error {
	nulls := col.NullN() > 0
	switch c.fn {
	case Count:
		for r, g := range gid {
			if g >= 0 && (!nulls || col.IsValid(r)) {
				a.n[g]++
			}
		}
		return nil
	case First, Last:
		return updateFirstLast(a, c, col, gid)
	}
	if c.kind == vInt || c.fn == Avg && isInt(col.DataType()) {
		vals, err := intValues(col)
		if err != nil {
			return err
		}
		switch c.fn {
		case Sum:
			for r, g := range gid {
				if g < 0 || nulls && col.IsNull(r) {
					continue
				}
				s, overflow := addInt(a.i[g], vals(r))
				if overflow {
					return fmt.Errorf("aggregate %q: sum of column %q overflows int64", c.name, c.source)
				}
				a.i[g] = s
				a.n[g] = 1
			}
		case Min, Max:
			less := c.fn == Min
			for r, g := range gid {
				if g < 0 || nulls && col.IsNull(r) {
					continue
				}
				v := vals(r)
				if a.n[g] == 0 || (less && v < a.i[g]) || (!less && v > a.i[g]) {
					a.i[g] = v
				}
				a.n[g] = 1
			}
		case Avg:
			for r, g := range gid {
				if g < 0 || nulls && col.IsNull(r) {
					continue
				}
				a.f[g] += float64(vals(r))
				a.n[g]++
			}
		}
		return nil
	}
	vals, err := floatValues(col)
	if err != nil {
		return err
	}
	switch c.fn {
	case Sum:
		for r, g := range gid {
			if g < 0 || nulls && col.IsNull(r) {
				continue
			}
			a.f[g] += vals(r)
			a.n[g] = 1
		}
	case Avg:
		for r, g := range gid {
			if g < 0 || nulls && col.IsNull(r) {
				continue
			}
			a.f[g] += vals(r)
			a.n[g]++
		}
	case Min, Max:
		less := c.fn == Min
		for r, g := range gid {
			if g < 0 || nulls && col.IsNull(r) {
				continue
			}
			v := vals(r)
			if math.IsNaN(v) {
				a.nan[g] = true
				continue
			}
			if a.n[g] == 0 || (less && v < a.f[g]) || (!less && v > a.f[g]) {
				a.f[g] = v
			}
			a.n[g] = 1
		}
	}
	return nil
}

func updateFirstLast(a *accumulator, c compiled, col arrow.Array, gid []int32) error {
	first := c.fn == First
	take := func(g int32) bool { return !first || a.n[g] == 0 }
	nulls := col.NullN() > 0
	switch c.kind {
	case vInt:
		vals, err := intValues(col)
		if err != nil {
			return err
		}
		for r, g := range gid {
			if g >= 0 && !(nulls && col.IsNull(r)) && take(g) {
				a.i[g], a.n[g] = vals(r), 1
			}
		}
	case vFloat:
		vals, err := floatValues(col)
		if err != nil {
			return err
		}
		for r, g := range gid {
			if g >= 0 && !(nulls && col.IsNull(r)) && take(g) {
				a.f[g], a.n[g] = vals(r), 1
			}
		}
	case vString:
		sa := col.(*array.String)
		for r, g := range gid {
			if g >= 0 && !(nulls && col.IsNull(r)) && take(g) {
				// Clone: the value points into the batch's buffer.
				a.s[g], a.n[g] = strings.Clone(sa.Value(r)), 1
			}
		}
	case vBool:
		ba := col.(*array.Boolean)
		for r, g := range gid {
			if g >= 0 && !(nulls && col.IsNull(r)) && take(g) {
				a.b[g], a.n[g] = ba.Value(r), 1
			}
		}
	}
	return nil
}

func addInt(a, b int64) (int64, bool) {
	s := a + b
	return s, (a > 0 && b > 0 && s < 0) || (a < 0 && b < 0 && s >= 0)
}

func intValues(col arrow.Array) (func(int) int64, error) {
	switch a := col.(type) {
	case *array.Int64:
		v := a.Int64Values()
		return func(i int) int64 { return v[i] }, nil
	case *array.Int32:
		v := a.Int32Values()
		return func(i int) int64 { return int64(v[i]) }, nil
	case *array.Int16:
		v := a.Int16Values()
		return func(i int) int64 { return int64(v[i]) }, nil
	case *array.Int8:
		v := a.Int8Values()
		return func(i int) int64 { return int64(v[i]) }, nil
	case *array.Uint32:
		v := a.Uint32Values()
		return func(i int) int64 { return int64(v[i]) }, nil
	case *array.Uint16:
		v := a.Uint16Values()
		return func(i int) int64 { return int64(v[i]) }, nil
	case *array.Uint8:
		v := a.Uint8Values()
		return func(i int) int64 { return int64(v[i]) }, nil
	case *array.Timestamp:
		v := a.TimestampValues()
		return func(i int) int64 { return int64(v[i]) }, nil
	}
	return nil, fmt.Errorf("column type %s is not an integer", col.DataType())
}

func floatValues(col arrow.Array) (func(int) float64, error) {
	switch a := col.(type) {
	case *array.Float64:
		v := a.Float64Values()
		return func(i int) float64 { return v[i] }, nil
	case *array.Float32:
		v := a.Float32Values()
		return func(i int) float64 { return float64(v[i]) }, nil
	}
	if iv, err := intValues(col); err == nil {
		return func(i int) float64 { return float64(iv(i)) }, nil
	}
	return nil, fmt.Errorf("column type %s is not numeric", col.DataType())
}

// Build returns one output array per aggregate with the values of the given
// groups, in that order. The caller releases the arrays.
func (st *State) Build(groups []int32) []arrow.Array {
	mem := memory.DefaultAllocator
	out := make([]arrow.Array, len(st.set.aggs))
	for k, c := range st.set.aggs {
		a := &st.accs[k]
		b := array.NewBuilder(mem, c.out)
		b.Reserve(len(groups))
		for _, g := range groups {
			has := a.n[g] > 0
			switch {
			case c.fn == Count:
				b.(*array.Int64Builder).UnsafeAppend(a.n[g])
			case c.fn == Avg:
				if has {
					b.(*array.Float64Builder).UnsafeAppend(a.f[g] / float64(a.n[g]))
				} else {
					b.AppendNull()
				}
			case (c.fn == Min || c.fn == Max) && c.kind == vFloat && !has && a.nan[g]:
				appendFloat(b, c.f32, math.NaN())
			case !has:
				b.AppendNull()
			case c.kind == vInt:
				switch bb := b.(type) {
				case *array.Int64Builder:
					bb.UnsafeAppend(a.i[g])
				case *array.TimestampBuilder:
					bb.UnsafeAppend(arrow.Timestamp(a.i[g]))
				// first and last keep the input's integer type.
				case *array.Int32Builder:
					bb.UnsafeAppend(int32(a.i[g]))
				case *array.Int16Builder:
					bb.UnsafeAppend(int16(a.i[g]))
				case *array.Int8Builder:
					bb.UnsafeAppend(int8(a.i[g]))
				case *array.Uint32Builder:
					bb.UnsafeAppend(uint32(a.i[g]))
				case *array.Uint16Builder:
					bb.UnsafeAppend(uint16(a.i[g]))
				case *array.Uint8Builder:
					bb.UnsafeAppend(uint8(a.i[g]))
				}
			case c.kind == vFloat:
				appendFloat(b, c.f32, a.f[g])
			case c.kind == vString:
				b.(*array.StringBuilder).Append(a.s[g])
			case c.kind == vBool:
				b.(*array.BooleanBuilder).UnsafeAppend(a.b[g])
			}
		}
		out[k] = b.NewArray()
		b.Release()
	}
	return out
}

func appendFloat(b array.Builder, f32 bool, v float64) {
	if f32 {
		b.(*array.Float32Builder).UnsafeAppend(float32(v))
		return
	}
	b.(*array.Float64Builder).UnsafeAppend(v)
}

// Encode appends group g's accumulators to dst, for the state store: per
// aggregate its count, then its value slot (int, float, string or bool).
// Decode reads them back; the layout depends only on the aggregate list.
func (st *State) Encode(dst []byte, g int) []byte {
	for k := range st.set.aggs {
		a := &st.accs[k]
		dst = binary.AppendVarint(dst, a.n[g])
		switch {
		case a.f != nil:
			dst = binary.BigEndian.AppendUint64(dst, math.Float64bits(a.f[g]))
			if a.nan != nil {
				dst = append(dst, boolByte(a.nan[g]))
			}
		case a.i != nil:
			dst = binary.AppendVarint(dst, a.i[g])
		case a.s != nil:
			dst = binary.AppendUvarint(dst, uint64(len(a.s[g])))
			dst = append(dst, a.s[g]...)
		case a.b != nil:
			dst = append(dst, boolByte(a.b[g]))
		}
	}
	return dst
}

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// Decode restores group g's accumulators from Encode's bytes.
func (st *State) Decode(g int, src []byte) error {
	// The error is built only when needed: Decode runs once per key when a
	// running aggregate opens (a million times for a million keys).
	size := len(src)
	bad := func() error { return fmt.Errorf("agg: malformed accumulator state (%d bytes)", size) }
	for k := range st.set.aggs {
		a := &st.accs[k]
		n, w := binary.Varint(src)
		if w <= 0 {
			return bad()
		}
		a.n[g], src = n, src[w:]
		switch {
		case a.f != nil:
			if len(src) < 8 {
				return bad()
			}
			a.f[g], src = math.Float64frombits(binary.BigEndian.Uint64(src)), src[8:]
			if a.nan != nil {
				if len(src) < 1 {
					return bad()
				}
				a.nan[g], src = src[0] == 1, src[1:]
			}
		case a.i != nil:
			v, w := binary.Varint(src)
			if w <= 0 {
				return bad()
			}
			a.i[g], src = v, src[w:]
		case a.s != nil:
			l, w := binary.Uvarint(src)
			if w <= 0 || uint64(len(src)-w) < l {
				return bad()
			}
			a.s[g], src = string(src[w:w+int(l)]), src[w+int(l):]
		case a.b != nil:
			if len(src) < 1 {
				return bad()
			}
			a.b[g], src = src[0] == 1, src[1:]
		}
	}
	if len(src) != 0 {
		return bad()
	}
	return nil
}
