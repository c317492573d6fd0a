// Package arrowjson converts between JSON payloads and Arrow records as
// ArkFlow's json_to_arrow and arrow_to_json processors and its json and
// debezium_json codecs do. ArkFlow is built on arrow-rs and arrow-json 58.4
// and serde_json 1.0.151 (with preserve_order); this package gives the same
// output wherever ArkFlow succeeds on a well-formed batch, and differs where
// ArkFlow has a defect (listed below).
//
// # JSON to Arrow (Decode, DecodeValues; json_to_arrow, json codec input)
//
// Each JSON object of a payload is a row (a payload may hold several,
// newline-delimited, as ArkFlow reads them). The schema is inferred over all
// rows of the batch: fields in order of first appearance (nested objects
// likewise), every field nullable.
//
//   - An integer literal (no fraction or exponent) within int64 is Int64;
//     any other number is Float64, including -0 and integers beyond int64
//     (serde_json classifies them so). Int64 and Float64 values of one field
//     give Float64; integers are then converted (exact up to 2^53).
//   - A string is Utf8, true/false Boolean, an object Struct, an array a
//     List (element field "item") of the element type inferred over all
//     elements of all rows.
//   - A field that is null (or missing) in every row is of type Null; an
//     array element type with only nulls is Utf8 ([null] gives List<Utf8>,
//     as arrow-json infers), with no elements at all Null.
//   - A missing key or JSON null is a null value. When a key occurs twice in
//     one object the last value wins.
//   - A field with values of incompatible JSON types (a string and a number,
//     a scalar and an array, ...) is an error naming the row and the field.
//   - include keeps only the named top-level fields; other fields are not
//     type-checked.
//
// # Arrow to JSON (Encode, AppendValue; arrow_to_json, json codec output)
//
// Rows are written as arrow-json's LineDelimitedWriter writes them with
// default options, one compact object a row without the newline: keys in
// column order, null values omitted (also inside structs and maps; null
// list elements are null). Integers in decimal; floats as lexical-core
// writes them ("10.0", "0.1", "1.0e10", "1.5e-7"), NaN and ±Inf as null;
// Boolean true/false; strings escaped as serde_json does; binary as lowercase
// hex in a string; Struct as an object; List, LargeList, FixedSizeList and
// list views as arrays; Map with string keys as an object; Dictionary as its
// value; Decimal unquoted ("123.45"); Date32 "2024-01-31"; Date64 and
// Timestamp without zone "2024-01-31T12:00:00.001"; Timestamp with zone
// RFC 3339 in that zone ("2024-01-31T12:00:00Z", "…+05:30"); Time32/64
// "12:00:00.500". Fractions take 3, 6 or 9 digits, the fewest that are exact.
//
// # Debezium (DecodeDebezium; debezium_json codec input)
//
// See DecodeDebezium for the columns. The debezium_json codec's output side
// is Encode.
//
// # Differences from ArkFlow
//
//	ArkFlow                                      arrowjson
//	schema from the first row only; later        schema from all rows; int and
//	rows must fit it: a new key is dropped,      float widen to Float64, nulls
//	1.5 in an Int64 field is truncated to 1,     take the other rows' type, new
//	"2" in an Int64 field parses, a value in     keys become columns, string
//	a Null field fails                           vs number is an error
//	payloads joined with "\n": a pretty-         a payload holds JSON values
//	printed payload fails, one payload may       one after another (one, or
//	hold several objects, an empty payload       several a line), whitespace
//	is skipped                                   anywhere; a blank one none
//	errors do not name the row                   errors name row and field
//	value column must be Binary                  Binary, LargeBinary,
//	                                             BinaryView or any string type
//	fields_to_include: json_to_arrow orders      schema order (first
//	columns by hash-set iteration (random)       appearance) always
//	fields_to_include: [] keeps no column        an empty include keeps all
//	array of objects with a null element,        accepted: a null element
//	or a null then an object, fails              of a List<Struct>
//	arrow_to_json on a batch with __value__      the old __value__ is replaced
//	adds a second __value__ column               (it is still encoded)
//	debezium: {"schema","payload"} wrapper       unwrapped
//	not unwrapped (all columns null)
//	debezium: a non-object envelope gives a      an error naming the row
//	row of nulls; an empty value fails           empty value skipped
//	writer: an unrepresentable temporal value    an error naming row and
//	(time of day beyond 24h) is written as an    column
//	error text
//	a timestamp beyond chrono's ±262143 years    formatted like the others
//	is written as an error text
//	Duration, Interval and run-end encoded       an error naming the column
//	columns written
//	null entries of a dictionary's values        null
//	written as their placeholder value
//
// Values nested more than 128 arrays or objects deep are an error, as in
// serde_json. Time zones given by IANA name need the system time zone
// database.
package arrowjson
