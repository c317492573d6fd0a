package statestore

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

func TestKeyEncodingRoundTrip(t *testing.T) {
	t.Parallel()
	keys := []Key{
		{Job: "j", Operator: "o", KeyGroup: 0, User: []byte("u")},
		{Job: "job-1", Operator: "window", Namespace: "w:1000", KeyGroup: 65535, User: nil},
		{Job: "j", Operator: "o", Namespace: strings.Repeat("n", 65535), KeyGroup: 7, User: []byte{0, 0xFF}},
	}
	for _, k := range keys {
		enc, err := keyEncode(nil, k)
		if err != nil {
			t.Fatal(err)
		}
		if len(enc) != keyEncodedLen(&k) {
			t.Fatalf("keyEncodedLen = %d, encoded %d", keyEncodedLen(&k), len(enc))
		}
		var got Key
		if err := keyDecode(enc, &got); err != nil {
			t.Fatal(err)
		}
		if got.Job != k.Job || got.Operator != k.Operator || got.Namespace != k.Namespace || got.KeyGroup != k.KeyGroup || !bytes.Equal(got.User, k.User) {
			t.Fatalf("round trip: %+v -> %+v", k, got)
		}
		opLen, g, err := keySplit(enc)
		if err != nil || g != k.KeyGroup {
			t.Fatalf("keySplit: %d %d %v", opLen, g, err)
		}
		p, _ := keyOperatorPrefix(k.Job, k.Operator)
		if !bytes.Equal(enc[:opLen], p) {
			t.Fatalf("operator prefix mismatch")
		}
	}
}

func TestKeyEncodingErrors(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 65536)
	bad := []Key{
		{Job: long, Operator: "o"},
		{Job: "j", Operator: long},
		{Job: "j", Operator: "o", Namespace: long},
		{Job: "j", Operator: "o", KeyGroup: -1},
		{Job: "j", Operator: "o", KeyGroup: 65536},
		{Job: "", Operator: "o"},
		{Job: "j", Operator: ""},
	}
	for _, k := range bad {
		if _, err := keyEncode(nil, k); err == nil {
			t.Errorf("keyEncode(%.40v) succeeded", k)
		}
	}
	for _, enc := range [][]byte{nil, {0x02, 0, 1, 'j'}, {0x01, 0, 5, 'j'}, {0x01, 0, 1, 'j', 0, 1, 'o', 0}} {
		var k Key
		if err := keyDecode(enc, &k); err == nil {
			t.Errorf("keyDecode(%x) succeeded", enc)
		}
	}
}

// Inside an operator, encoded keys sort by key group first, so a group
// range is contiguous.
func TestKeyOrderByGroup(t *testing.T) {
	t.Parallel()
	var encs [][]byte
	for _, k := range []Key{
		{Job: "j", Operator: "o", Namespace: "zzz", KeyGroup: 1, User: []byte("a")},
		{Job: "j", Operator: "o", Namespace: "a", KeyGroup: 2, User: []byte("a")},
		{Job: "j", Operator: "o", Namespace: "", KeyGroup: 300, User: []byte("0")},
		{Job: "j", Operator: "o", Namespace: "", KeyGroup: 0, User: []byte("\xff\xff")},
	} {
		enc, _ := keyEncode(nil, k)
		encs = append(encs, enc)
	}
	slices.SortFunc(encs, bytes.Compare)
	var groups []int
	for _, e := range encs {
		_, g, _ := keySplit(e)
		groups = append(groups, g)
	}
	if !slices.Equal(groups, []int{0, 1, 2, 300}) {
		t.Fatalf("groups in key order: %v", groups)
	}
}

func TestKeyPrefixEnd(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want []byte }{
		{[]byte{1, 2}, []byte{1, 3}},
		{[]byte{1, 0xFF}, []byte{2}},
		{[]byte{0xFF, 0xFF}, nil},
	} {
		if got := keyPrefixEnd(c.in); !bytes.Equal(got, c.want) {
			t.Errorf("keyPrefixEnd(%x) = %x, want %x", c.in, got, c.want)
		}
	}
}
