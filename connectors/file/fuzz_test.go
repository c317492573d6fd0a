package file

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/arkflow-rs/arkflow-go/connectors"
)

// fuzzRead reads a file of the given format in batches of 3 rows. It
// returns the rows' first columns (nil when the file has no column), or
// the error, which must name the file.
func fuzzRead(t *testing.T, format string, data []byte) ([]arrow.Array, int, error) {
	path := filepath.Join(t.TempDir(), "in."+format)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	err := func() error {
		in := mustInput(t, arkCfg(format, path, `"batch_size": 3`)).(*Input)
		return in.SchemaErr()
	}()
	named := func(err error) error {
		if !strings.Contains(err.Error(), fmt.Sprintf("file %q", path)) {
			t.Fatalf("error does not name the file: %v", err)
		}
		return err
	}
	if err != nil {
		return nil, 0, named(err)
	}
	in := mustInput(t, arkCfg(format, path, `"batch_size": 3`)).(*Input)
	src, err := in.newSource(connectors.TaskInfo{OperatorID: "src", Parallelism: 1})
	if err != nil {
		return nil, 0, named(err)
	}
	defer src.Close(context.Background())
	if err := src.Connect(context.Background()); err != nil {
		return nil, 0, named(err)
	}
	var firsts []arrow.Array
	rows := 0
	for {
		b, err := src.Read(context.Background())
		if errors.Is(err, connectors.ErrEndOfInput) {
			return firsts, rows, nil
		}
		if err != nil {
			return nil, 0, named(err)
		}
		n := int(b.Record.NumRows())
		if n < 1 || n > 3 {
			t.Fatalf("a batch of %d rows", n)
		}
		if off := b.Record.Column(int(b.Record.NumCols()) - 1).(*array.Int64); off.Value(0) != int64(rows) {
			t.Fatalf("first offset %d after %d rows", off.Value(0), rows)
		}
		rows += n
		if b.Record.NumCols() > 3 {
			c := b.Record.Column(0)
			c.Retain()
			firsts = append(firsts, c)
		}
		b.Record.Release()
	}
}

func FuzzCSVInput(f *testing.F) {
	for _, s := range []string{
		"a,b\n1,2\n3,4\n",
		"id,name,price,ok\n1,x,1.5,true\n2,,2,FALSE\n-3,\"q,\"\"r\",1e3,\n",
		"a\n\n\n1\n",
		"\ufeffa;b\n1;2\n",
		"a,b\n1,\"x\n",
		"a,a\n1,2\n",
		"x\n9223372036854775808\n-1\n",
		"x\n.5\n5.\n1e\n-\n",
		"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		firsts, n, err := fuzzRead(t, "csv", data)
		if err != nil {
			return
		}
		r := csv.NewReader(bytes.NewReader(data))
		recs, err := r.ReadAll()
		if err != nil || len(recs) == 0 {
			t.Fatalf("read %d rows of a file encoding/csv cannot read: %v", n, err)
		}
		recs = recs[1:]
		if n != len(recs) {
			t.Fatalf("read %d rows, encoding/csv reads %d", n, len(recs))
		}
		i := 0
		for _, c := range firsts {
			for k := range c.Len() {
				checkCSVValue(t, c, k, recs[i][0])
				i++
			}
			c.Release()
		}
	})
}

// checkCSVValue checks a value read from csv against its text.
func checkCSVValue(t *testing.T, c arrow.Array, k int, text string) {
	if text == "" {
		if !c.IsNull(k) {
			t.Fatalf("empty field read as %s", c.ValueStr(k))
		}
		return
	}
	ok := false
	switch c := c.(type) {
	case *array.String:
		ok = c.Value(k) == text
	case *array.Int64:
		v, err := strconv.ParseInt(text, 10, 64)
		ok = err == nil && v == c.Value(k)
	case *array.Float64:
		v, _ := strconv.ParseFloat(text, 64)
		ok = v == c.Value(k) || v != v
	case *array.Boolean:
		ok = strings.EqualFold(text, strconv.FormatBool(c.Value(k)))
	}
	if !ok {
		t.Fatalf("field %q read as %s (%s)", text, c.ValueStr(k), c.DataType())
	}
}

func FuzzJSONInput(f *testing.F) {
	for _, s := range []string{
		`{"a":1,"b":"x"}` + "\n" + `{"a":2.5}` + "\n",
		`{"a":{"b":[1,2]}}` + "\n\n" + `{"a":null}` + "\n",
		`{"a":1}` + "\n" + `{"a":"x"}` + "\n",
		"{bad\n",
		"[1]\n",
		`{"a":true}` + "\r\n" + `{"c":1}`,
		"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		firsts, n, err := fuzzRead(t, "json", data)
		if err != nil {
			return
		}
		want := 0
		for _, l := range bytes.Split(data, []byte("\n")) {
			if len(bytes.TrimSpace(l)) > 0 {
				want++
			}
		}
		if n != want {
			t.Fatalf("read %d rows of %d non-blank lines", n, want)
		}
		for _, c := range firsts {
			c.Release()
		}
	})
}
