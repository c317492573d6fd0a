package typed

import (
	"fmt"
	"math"
	"strings"
	"time"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/arkflow-rs/arkflow-go/internal/suggest"
)

// The decoders mirror the encoders: one loop per column that reads the
// column's buffers and stores each value at its field's offset in the
// destination rows. Which decoder a field gets depends on the column's
// type, so it is chosen per schema (bind), not per value.
//
// Decoded values never alias the record batch's memory, which the caller
// may release and its allocator reuse: the strings (or byte slices) of one
// column are copied with one allocation and share it, and the values of a
// pointer field point into one array per column.

// decodeFn stores the n values of col into field f of the rows at base,
// stride bytes apart.
type decodeFn func(f *field, col arrow.Array, base unsafe.Pointer, n int, stride uintptr) error

// binding is how the columns of one schema map to T's fields.
type binding struct {
	schema *arrow.Schema
	cols   []int      // column index of each field
	decs   []decodeFn // decoder of each field
}

// bind matches schema's columns to fields by name: an exact match first,
// else the one column whose name equals the field's ignoring case.
func bind(fields []*field, schema *arrow.Schema) (*binding, error) {
	b := &binding{schema: schema, cols: make([]int, len(fields)), decs: make([]decodeFn, len(fields))}
	for i, f := range fields {
		idx := schema.FieldIndices(f.name)
		if len(idx) == 0 {
			for j, af := range schema.Fields() {
				if strings.EqualFold(af.Name, f.name) {
					idx = append(idx, j)
				}
			}
		}
		switch len(idx) {
		case 0:
			return nil, fmt.Errorf("typed: %s: the batch has no column %q (its columns: %s)%s", f.where(), f.name, columnList(schema), columnHint(f.name, schema))
		case 1:
		default:
			names := make([]string, len(idx))
			for k, j := range idx {
				names[k] = fmt.Sprintf("%q", schema.Field(j).Name)
			}
			return nil, fmt.Errorf("typed: %s: columns %s all match %q; rename them or tag the field with the exact name", f.where(), strings.Join(names, ", "), f.name)
		}
		col := schema.Field(idx[0])
		dec := decoderFor(f, col.Type)
		if dec == nil {
			return nil, fmt.Errorf("typed: %s: column %q is %s, which cannot be stored in %s", f.where(), col.Name, col.Type, f.goType)
		}
		b.cols[i], b.decs[i] = idx[0], dec
	}
	return b, nil
}

// columnHint is `; did you mean "X"?` for the column of s that name
// probably misspells, or "".
func columnHint(name string, s *arrow.Schema) string {
	names := make([]string, s.NumFields())
	for i, f := range s.Fields() {
		names[i] = f.Name
	}
	return suggest.Hint(name, names)
}

func columnList(s *arrow.Schema) string {
	if s.NumFields() == 0 {
		return "none"
	}
	names := make([]string, s.NumFields())
	for i, f := range s.Fields() {
		names[i] = f.Name
	}
	return strings.Join(names, ", ")
}

// decoderFor returns the decoder that stores a column of type dt in f, or
// nil when the column's values cannot all be stored there without loss.
func decoderFor(f *field, dt arrow.DataType) decodeFn {
	id := dt.ID()
	switch f.kind {
	case kInt8, kInt16, kInt32, kInt64, kInt, kUint8, kUint16, kUint32, kUint64, kUint:
		return intDecoder(f.kind, id)
	case kFloat32:
		if id == arrow.FLOAT32 {
			return decNum[float32, float32]
		}
	case kFloat64:
		switch id {
		case arrow.FLOAT64:
			return decNum[float64, float64]
		case arrow.FLOAT32:
			return decNum[float32, float64]
		}
	case kBool:
		if id == arrow.BOOL {
			return decBool
		}
	case kString, kBytes:
		return varlenDecoder(f.kind, dt)
	case kTime:
		if id == arrow.TIMESTAMP {
			return decTime
		}
	case kDuration:
		if id == arrow.DURATION {
			return decDuration
		}
	}
	return nil
}

// intDecoder allows what is lossless: a column of the same signedness and
// no wider than the field, an unsigned column into a wider signed field,
// and a timestamp or duration column's raw int64 into an int64 field. Go's
// int and uint take 64-bit columns (what they encode to) on every
// platform, range-checked where they are 32 bits wide.
func intDecoder(k kind, id arrow.Type) decodeFn {
	switch k {
	case kInt8:
		if id == arrow.INT8 {
			return decNum[int8, int8]
		}
	case kInt16:
		switch id {
		case arrow.INT8:
			return decNum[int8, int16]
		case arrow.INT16:
			return decNum[int16, int16]
		case arrow.UINT8:
			return decNum[uint8, int16]
		}
	case kInt32:
		switch id {
		case arrow.INT8:
			return decNum[int8, int32]
		case arrow.INT16:
			return decNum[int16, int32]
		case arrow.INT32:
			return decNum[int32, int32]
		case arrow.UINT8:
			return decNum[uint8, int32]
		case arrow.UINT16:
			return decNum[uint16, int32]
		}
	case kInt64:
		return signed64[int64](id)
	case kInt:
		return signed64[int](id)
	case kUint8:
		if id == arrow.UINT8 {
			return decNum[uint8, uint8]
		}
	case kUint16:
		switch id {
		case arrow.UINT8:
			return decNum[uint8, uint16]
		case arrow.UINT16:
			return decNum[uint16, uint16]
		}
	case kUint32:
		switch id {
		case arrow.UINT8:
			return decNum[uint8, uint32]
		case arrow.UINT16:
			return decNum[uint16, uint32]
		case arrow.UINT32:
			return decNum[uint32, uint32]
		}
	case kUint64:
		return unsigned64[uint64](id)
	case kUint:
		return unsigned64[uint](id)
	}
	return nil
}

func signed64[F ~int | ~int64](id arrow.Type) decodeFn {
	switch id {
	case arrow.INT8:
		return decNum[int8, F]
	case arrow.INT16:
		return decNum[int16, F]
	case arrow.INT32:
		return decNum[int32, F]
	case arrow.INT64, arrow.TIMESTAMP, arrow.DURATION:
		return decNum[int64, F]
	case arrow.UINT8:
		return decNum[uint8, F]
	case arrow.UINT16:
		return decNum[uint16, F]
	case arrow.UINT32:
		return decNum[uint32, F]
	}
	return nil
}

func unsigned64[F ~uint | ~uint64](id arrow.Type) decodeFn {
	switch id {
	case arrow.UINT8:
		return decNum[uint8, F]
	case arrow.UINT16:
		return decNum[uint16, F]
	case arrow.UINT32:
		return decNum[uint32, F]
	case arrow.UINT64:
		return decNum[uint64, F]
	}
	return nil
}

// varlenDecoder accepts utf8, large_utf8 and utf8_view columns, and
// dictionaries of them, into strings; []byte fields take binary columns of
// the same three layouts too.
func varlenDecoder(k kind, dt arrow.DataType) decodeFn {
	id := dt.ID()
	if d, ok := dt.(*arrow.DictionaryType); ok {
		if !varlenFits(k, d.ValueType.ID()) {
			return nil
		}
		return decVarlenDict
	}
	if !varlenFits(k, id) {
		return nil
	}
	switch id {
	case arrow.STRING, arrow.BINARY:
		return decVarlen[int32]
	case arrow.LARGE_STRING, arrow.LARGE_BINARY:
		return decVarlen[int64]
	}
	return decVarlenView
}

func varlenFits(k kind, id arrow.Type) bool {
	switch id {
	case arrow.STRING, arrow.LARGE_STRING, arrow.STRING_VIEW:
		return true
	case arrow.BINARY, arrow.LARGE_BINARY, arrow.BINARY_VIEW:
		return k == kBytes
	}
	return false
}

// validity reads an array's validity bitmap.
type validity struct {
	bits []byte
	off  int
}

// validityOf returns col's validity bitmap; a column with nulls but
// without a bitmap reads as all null, so that the counts of valid values
// the decoders size their arrays by stay true.
func validityOf(col arrow.Array) validity {
	if col.NullN() == 0 {
		return validity{}
	}
	d := col.Data()
	if b := d.Buffers()[0]; b != nil && b.Len()*8 >= d.Offset()+col.Len() {
		return validity{bits: b.Bytes(), off: d.Offset()}
	}
	return validity{bits: make([]byte, (col.Len()+7)/8)}
}

func (v validity) valid(i int) bool {
	if v.bits == nil {
		return true
	}
	i += v.off
	return v.bits[i>>3]&(1<<(i&7)) != 0
}

// nullError reports the first null of col, which f cannot hold.
func nullError(f *field, col arrow.Array) error {
	row := 0
	for row < col.Len() && !col.IsNull(row) {
		row++
	}
	return fmt.Errorf("typed: %s: row %d is null; make the field a pointer or a database/sql Null type to accept nulls", f.where(), row)
}

// fixedValues views the n values of a fixed-width column as []C.
func fixedValues[C any](f *field, col arrow.Array, n int) ([]C, error) {
	d := col.Data()
	bufs := d.Buffers()
	if len(bufs) < 2 || bufs[1] == nil {
		return nil, malformed(f, col)
	}
	b := bufs[1].Bytes()
	if len(b)/int(unsafe.Sizeof(*new(C))) < d.Offset()+n {
		return nil, malformed(f, col)
	}
	all := unsafe.Slice((*C)(unsafe.Pointer(unsafe.SliceData(b))), d.Offset()+n)
	return all[d.Offset():], nil
}

func malformed(f *field, col arrow.Array) error {
	return fmt.Errorf("typed: %s: the %s column's buffers are too short for its %d rows", f.where(), col.DataType(), col.Len())
}

// slots stores the values of a nullable field, one row after the other.
type slots[F any] struct {
	f       *field
	backing []F // nullPtr: where the non-null values go, one array for the column
}

func newSlots[F any](f *field, nonNull int) slots[F] {
	s := slots[F]{f: f}
	if f.null == nullPtr {
		s.backing = make([]F, nonNull)
	}
	return s
}

func (s *slots[F]) set(row unsafe.Pointer, v F) {
	p := unsafe.Add(row, s.f.off)
	switch s.f.null {
	case nullPtr:
		s.backing[0] = v
		*(*unsafe.Pointer)(p) = unsafe.Pointer(&s.backing[0])
		s.backing = s.backing[1:]
	case nullFlag:
		*(*F)(unsafe.Add(p, s.f.valOff)) = v
		*(*bool)(unsafe.Add(p, s.f.flagOff)) = true
	default:
		*(*F)(p) = v
	}
}

func (s *slots[F]) setNull(row unsafe.Pointer) {
	p := unsafe.Add(row, s.f.off)
	switch s.f.null {
	case nullPtr:
		*(*unsafe.Pointer)(p) = nil
	case nullFlag:
		var zero F
		*(*F)(unsafe.Add(p, s.f.valOff)) = zero
		*(*bool)(unsafe.Add(p, s.f.flagOff)) = false
	}
}

// decNum stores a column of C in fields of F. The only narrowing it is
// given is Go's int or uint from a 64-bit column on a 32-bit platform,
// which it range-checks.
func decNum[C, F number](f *field, col arrow.Array, base unsafe.Pointer, n int, stride uintptr) error {
	vals, err := fixedValues[C](f, col, n)
	if err != nil {
		return err
	}
	nulls := col.NullN()
	if f.null == notNull && nulls > 0 {
		return nullError(f, col)
	}
	narrow := unsafe.Sizeof(F(0)) < unsafe.Sizeof(C(0))
	switch {
	case narrow:
		valid := validityOf(col)
		s := newSlots[F](f, n-nulls)
		for i, v := range vals {
			row := unsafe.Add(base, uintptr(i)*stride)
			if !valid.valid(i) {
				s.setNull(row)
				continue
			}
			if C(F(v)) != v {
				return fmt.Errorf("typed: %s: row %d: %v does not fit in %d bits", f.where(), i, v, 8*unsafe.Sizeof(F(0)))
			}
			s.set(row, F(v))
		}
	case f.null == notNull:
		for i, v := range vals {
			*(*F)(unsafe.Add(base, uintptr(i)*stride+f.off)) = F(v)
		}
	case f.null == nullPtr:
		// The hot nullable case gets its own loop: one array holds the
		// column's values, and each row points into it.
		backing := make([]F, n-nulls)
		valid := validityOf(col)
		j := 0
		for i, v := range vals {
			p := (*unsafe.Pointer)(unsafe.Add(base, uintptr(i)*stride+f.off))
			if valid.valid(i) {
				backing[j] = F(v)
				*p = unsafe.Pointer(&backing[j])
				j++
			} else {
				*p = nil
			}
		}
	default:
		valid := validityOf(col)
		s := newSlots[F](f, n-nulls)
		for i, v := range vals {
			row := unsafe.Add(base, uintptr(i)*stride)
			if valid.valid(i) {
				s.set(row, F(v))
			} else {
				s.setNull(row)
			}
		}
	}
	return nil
}

func decBool(f *field, col arrow.Array, base unsafe.Pointer, n int, stride uintptr) error {
	nulls := col.NullN()
	if f.null == notNull && nulls > 0 {
		return nullError(f, col)
	}
	d := col.Data()
	if len(d.Buffers()) < 2 || d.Buffers()[1] == nil || d.Buffers()[1].Len()*8 < d.Offset()+n {
		return malformed(f, col)
	}
	bits, off := d.Buffers()[1].Bytes(), d.Offset()
	if f.null == notNull {
		for i := 0; i < n; i++ {
			j := off + i
			*(*bool)(unsafe.Add(base, uintptr(i)*stride+f.off)) = bits[j>>3]>>(j&7)&1 != 0
		}
		return nil
	}
	valid := validityOf(col)
	s := newSlots[bool](f, n-nulls)
	for i := 0; i < n; i++ {
		row := unsafe.Add(base, uintptr(i)*stride)
		if j := off + i; valid.valid(i) {
			s.set(row, bits[j>>3]>>(j&7)&1 != 0)
		} else {
			s.setNull(row)
		}
	}
	return nil
}

// decVarlen decodes utf8/binary (O int32) and their large forms (O int64)
// into strings or []byte: the column's bytes are copied once, and each
// value is a slice of the copy.
func decVarlen[O int32 | int64](f *field, col arrow.Array, base unsafe.Pointer, n int, stride uintptr) error {
	nulls := col.NullN()
	if f.null == notNull && nulls > 0 {
		return nullError(f, col)
	}
	offs, err := fixedValues[O](f, col, n+1)
	if err != nil {
		return err
	}
	var data []byte
	if b := col.Data().Buffers()[2]; b != nil {
		data = b.Bytes()
	}
	lo, hi := offs[0], offs[n]
	if lo < 0 || hi < lo || int64(hi) > int64(len(data)) {
		return malformed(f, col)
	}
	// append, unlike make and copy, does not zero the bytes it copies over.
	buf := append([]byte(nil), data[lo:hi]...)
	all := unsafe.String(unsafe.SliceData(buf), len(buf)) // buf is never written again
	bytes := f.kind == kBytes
	if f.null == notNull {
		for i := 0; i < n; i++ {
			a, b := offs[i]-lo, offs[i+1]-lo
			if a > b || b > O(len(buf)) {
				return malformed(f, col)
			}
			p := unsafe.Add(base, uintptr(i)*stride+f.off)
			if bytes {
				*(*[]byte)(p) = buf[a:b:b]
			} else {
				*(*string)(p) = all[a:b]
			}
		}
		return nil
	}
	valid := validityOf(col)
	if bytes {
		s := newSlots[[]byte](f, n-nulls)
		for i := 0; i < n; i++ {
			row := unsafe.Add(base, uintptr(i)*stride)
			a, b := offs[i]-lo, offs[i+1]-lo
			switch {
			case !valid.valid(i):
				s.setNull(row)
			case a > b || b > O(len(buf)):
				return malformed(f, col)
			default:
				s.set(row, buf[a:b:b])
			}
		}
		return nil
	}
	s := newSlots[string](f, n-nulls)
	for i := 0; i < n; i++ {
		row := unsafe.Add(base, uintptr(i)*stride)
		a, b := offs[i]-lo, offs[i+1]-lo
		switch {
		case !valid.valid(i):
			s.setNull(row)
		case a > b || b > O(len(buf)):
			return malformed(f, col)
		default:
			s.set(row, all[a:b])
		}
	}
	return nil
}

// varlenValues reads the values of a utf8 or binary column of any layout
// as strings that alias the column; it is the slower path for view and
// dictionary columns.
func varlenValues(col arrow.Array) func(i int) string {
	switch a := col.(type) {
	case *array.String:
		return a.Value
	case *array.LargeString:
		return a.Value
	case *array.StringView:
		return a.Value
	case interface{ Value(int) []byte }: // Binary, LargeBinary, BinaryView
		return func(i int) string {
			b := a.Value(i)
			return unsafe.String(unsafe.SliceData(b), len(b))
		}
	}
	return nil
}

func decVarlenView(f *field, col arrow.Array, base unsafe.Pointer, n int, stride uintptr) error {
	value := varlenValues(col)
	if value == nil {
		return malformed(f, col)
	}
	return decVarlenFunc(f, col, base, n, stride, col.IsNull, value)
}

func decVarlenDict(f *field, col arrow.Array, base unsafe.Pointer, n int, stride uintptr) error {
	d := col.(*array.Dictionary)
	dict := d.Dictionary()
	value := varlenValues(dict)
	if value == nil {
		return malformed(f, col)
	}
	isNull := func(i int) bool { return d.IsNull(i) || dict.IsNull(d.GetValueIndex(i)) }
	return decVarlenFunc(f, col, base, n, stride, isNull, func(i int) string { return value(d.GetValueIndex(i)) })
}

// decVarlenFunc copies the values that value returns into one allocation
// and stores slices of it, as decVarlen does.
func decVarlenFunc(f *field, col arrow.Array, base unsafe.Pointer, n int, stride uintptr, isNull func(int) bool, value func(int) string) error {
	total := 0
	for i := 0; i < n; i++ {
		if isNull(i) {
			if f.null == notNull {
				return fmt.Errorf("typed: %s: row %d is null; make the field a pointer or a database/sql Null type to accept nulls", f.where(), i)
			}
			continue
		}
		total += len(value(i))
	}
	buf := make([]byte, 0, total)
	all := unsafe.String(unsafe.SliceData(buf[:total]), total) // filled below, never written after
	if f.kind == kBytes {
		s := newSlots[[]byte](f, n)
		for i := 0; i < n; i++ {
			row := unsafe.Add(base, uintptr(i)*stride)
			if isNull(i) {
				s.setNull(row)
				continue
			}
			a := len(buf)
			buf = append(buf, value(i)...)
			s.set(row, buf[a:len(buf):len(buf)])
		}
		return nil
	}
	s := newSlots[string](f, n)
	for i := 0; i < n; i++ {
		row := unsafe.Add(base, uintptr(i)*stride)
		if isNull(i) {
			s.setNull(row)
			continue
		}
		a := len(buf)
		buf = append(buf, value(i)...)
		s.set(row, all[a:len(buf)])
	}
	return nil
}

func decTime(f *field, col arrow.Array, base unsafe.Pointer, n int, stride uintptr) error {
	vals, err := fixedValues[int64](f, col, n)
	if err != nil {
		return err
	}
	nulls := col.NullN()
	if f.null == notNull && nulls > 0 {
		return nullError(f, col)
	}
	unit := col.DataType().(*arrow.TimestampType).Unit
	if f.null == notNull && unit == arrow.Millisecond { // the default, and window bounds
		for i, v := range vals {
			*(*time.Time)(unsafe.Add(base, uintptr(i)*stride+f.off)) = time.UnixMilli(v).UTC()
		}
		return nil
	}
	valid := validityOf(col)
	s := newSlots[time.Time](f, n-nulls)
	for i, v := range vals {
		row := unsafe.Add(base, uintptr(i)*stride)
		if valid.valid(i) {
			s.set(row, fromUnits(v, unit))
		} else {
			s.setNull(row)
		}
	}
	return nil
}

// fromUnits is the UTC time v units after the Unix epoch.
func fromUnits(v int64, unit arrow.TimeUnit) time.Time {
	switch unit {
	case arrow.Second:
		return time.Unix(v, 0).UTC()
	case arrow.Millisecond:
		return time.UnixMilli(v).UTC()
	case arrow.Microsecond:
		return time.UnixMicro(v).UTC()
	}
	return time.Unix(0, v).UTC()
}

func decDuration(f *field, col arrow.Array, base unsafe.Pointer, n int, stride uintptr) error {
	vals, err := fixedValues[int64](f, col, n)
	if err != nil {
		return err
	}
	nulls := col.NullN()
	if f.null == notNull && nulls > 0 {
		return nullError(f, col)
	}
	unit := col.DataType().(*arrow.DurationType).Unit
	mul := int64(unit.Multiplier()) // nanoseconds per unit
	valid := validityOf(col)
	s := newSlots[time.Duration](f, n-nulls)
	for i, v := range vals {
		row := unsafe.Add(base, uintptr(i)*stride)
		if !valid.valid(i) {
			s.setNull(row)
			continue
		}
		if v > math.MaxInt64/mul || v < math.MinInt64/mul {
			return fmt.Errorf("typed: %s: row %d: %d%s does not fit in a time.Duration (±292 years)", f.where(), i, v, unit)
		}
		s.set(row, time.Duration(v*mul))
	}
	return nil
}
