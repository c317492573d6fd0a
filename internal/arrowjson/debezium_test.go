package arrowjson

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// meta are the columns DecodeDebezium adds after the business fields.
var meta = []arrow.Field{f("op", utf8T), f("ts_ms", i64), f("source_db", utf8T),
	f("source_table", utf8T), f("before", utf8T), f("source", utf8T)}

func withMeta(business ...arrow.Field) []arrow.Field {
	return append(business, meta...)
}

func TestDecodeDebezium(t *testing.T) {
	cases := []struct {
		name   string
		events []string
		fields []arrow.Field
		want   string
	}{
		{
			name:   "create",
			events: []string{`{"before":null,"after":{"id":1,"name":"alice"},"op":"c","ts_ms":1700000000000,"source":{"db":"shop","table":"users"}}`},
			fields: withMeta(f("id", i64), f("name", utf8T)),
			want:   `[{"id":1,"name":"alice","op":"c","ts_ms":1700000000000,"source_db":"shop","source_table":"users","before":"null","source":"{\"db\":\"shop\",\"table\":\"users\"}"}]`,
		},
		{
			name:   "update: after wins, before kept as text",
			events: []string{`{"before":{"id":1,"name":"alice"},"after":{"id":1,"name":"ALICE"},"op":"u","ts_ms":2,"source":{"db":"shop","table":"users"}}`},
			fields: withMeta(f("id", i64), f("name", utf8T)),
			want:   `[{"id":1,"name":"ALICE","op":"u","ts_ms":2,"source_db":"shop","source_table":"users","before":"{\"id\":1,\"name\":\"alice\"}","source":"{\"db\":\"shop\",\"table\":\"users\"}"}]`,
		},
		{
			name: "delete uses before, snapshot read, mixed in one batch",
			events: []string{
				`{"before":{"id":1,"name":"a"},"after":null,"op":"d","ts_ms":3,"source":{"db":"s","table":"t"}}`,
				`{"before":null,"after":{"id":2,"name":"b"},"op":"r","ts_ms":4,"source":{"db":"s","table":"t"}}`,
			},
			fields: withMeta(f("id", i64), f("name", utf8T)),
			want: `[{"id":1,"name":"a","op":"d","ts_ms":3,"source_db":"s","source_table":"t","before":"{\"id\":1,\"name\":\"a\"}","source":"{\"db\":\"s\",\"table\":\"t\"}"},
			        {"id":2,"name":"b","op":"r","ts_ms":4,"source_db":"s","source_table":"t","before":"null","source":"{\"db\":\"s\",\"table\":\"t\"}"}]`,
		},
		{
			name:   "missing source and ts_ms",
			events: []string{`{"after":{"id":3},"op":"c"}`},
			fields: []arrow.Field{f("id", i64), f("op", utf8T), f("ts_ms", arrow.Null), f("source_db", arrow.Null),
				f("source_table", arrow.Null), f("before", utf8T), f("source", utf8T)},
			want: `[{"id":3,"op":"c","before":"null","source":"null"}]`,
		},
		{
			name: "schema/payload wrapper is unwrapped; empty values (tombstones) are skipped",
			events: []string{
				`{"schema":{"type":"struct"},"payload":{"before":null,"after":{"id":5},"op":"c","ts_ms":5,"source":{"db":"d","table":"t"}}}`,
				``,
			},
			fields: withMeta(f("id", i64)),
			want:   `[{"id":5,"op":"c","ts_ms":5,"source_db":"d","source_table":"t","before":"null","source":"{\"db\":\"d\",\"table\":\"t\"}"}]`,
		},
		{
			// serde_json re-serialises numbers: integers as such (also beyond
			// i64 up to u64), other numbers as zmij writes f64, strings with
			// its escapes, keys in order, duplicate keys last-wins.
			name:   "before text as serde_json writes it",
			events: []string{`{"before":{"f":1E2,"g":1e20,"h":1.5e-7,"i":18446744073709551615,"j":-0,"k":"a\"\n/é","l":[true,null],"f":2.50},"after":null,"op":"d","ts_ms":1}`},
			fields: []arrow.Field{f("f", f64), f("g", f64), f("h", f64), f("i", f64), f("j", f64), f("k", utf8T),
				f("l", arrow.ListOf(boo)), f("op", utf8T), f("ts_ms", i64), f("source_db", arrow.Null),
				f("source_table", arrow.Null), f("before", utf8T), f("source", utf8T)},
			want: `[{"f":2.5,"g":1e20,"h":1.5e-7,"i":18446744073709551615,"j":-0.0,"k":"a\"\n/é","l":[true,null],"op":"d","ts_ms":1,"before":"{\"f\":2.5,\"g\":1e+20,\"h\":1.5e-7,\"i\":18446744073709551615,\"j\":-0.0,\"k\":\"a\\\"\\n/é\",\"l\":[true,null]}","source":"null"}]`,
		},
		{
			name:   "a business field named like a metadata column is replaced in place",
			events: []string{`{"after":{"op":"business","x":1},"op":"u","ts_ms":9}`},
			fields: []arrow.Field{f("op", utf8T), f("x", i64), f("ts_ms", i64), f("source_db", arrow.Null), f("source_table", arrow.Null), f("before", utf8T), f("source", utf8T)},
			want:   `[{"op":"u","x":1,"ts_ms":9,"before":"null","source":"null"}]`,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
			defer mem.AssertSize(t, 0)
			got, err := decodeDebezium(mem, values(c.events...))
			if err != nil {
				t.Fatal(err)
			}
			defer got.Release()
			checkRecord(t, mem, got, c.fields, c.want)
		})
	}
}

func TestDecodeDebeziumErrors(t *testing.T) {
	cases := []struct {
		events []string
		want   string
	}{
		{[]string{`not json`}, `row 0: invalid JSON at offset 0: unexpected character 'n'`},
		{[]string{`{"op":"c"}`, `[1]`}, `row 1: expected a Debezium envelope (a JSON object), found an array`},
		{[]string{`{"after":{"a":1},"op":"c"}`, `{"after":{"a":"x"},"op":"c"}`}, `row 1: field "a": found a string, incompatible with the number seen before`},
	}
	for _, c := range cases {
		mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
		got, err := decodeDebezium(mem, values(c.events...))
		if err == nil || err.Error() != c.want || got != nil {
			t.Errorf("%q: got %v, %v; want error %s", c.events, got, err, c.want)
		}
		mem.AssertSize(t, 0)
	}
}

// The float forms serde_json 1.0.151 writes through zmij (zmij tests and
// src/lib.rs: plain for decimal exponents -5..=15, else a signed exponent).
func TestSerdeFloat(t *testing.T) {
	for v, want := range map[float64]string{
		1: "1.0", 0.1: "0.1", 43210.1: "43210.1", 1e15: "1000000000000000.0", 1e16: "1e+16",
		1.5e16: "1.5e+16", 0.00001: "0.00001", 0.000001: "1e-6", 6.62607015e-34: "6.62607015e-34",
		5e-324: "5e-324", -5942736479622170.0: "-5942736479622170.0", 5.444310685350916e+14: "544431068535091.6",
	} {
		if got := string(appendSerdeFloat(nil, v)); got != want {
			t.Errorf("%v: got %s, want %s", v, got, want)
		}
	}
}
