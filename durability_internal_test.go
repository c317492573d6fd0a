package arkflow

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/arkflow-rs/arkflow-go/internal/durable"
)

// Every key of the spec's durability block can be set from Go: the
// builder's Durability hand-writes the block, so a key added to
// durable.Config without a field here fails this test (issue 18: the
// builder had lost no_recycle).
func TestDurabilityCoversEverySpecKey(t *testing.T) {
	full := Durability{Path: "p", Sync: "always", SyncInterval: 1e6, ParkLease: 1e6, DrainTimeout: 1e6, SegmentBytes: 1, Retain: true, NoRecycle: true,
		ObjectStore: &WALObjectStore{NodeID: "n", StreamID: "s", Prefix: "x", Bucket: "b", Endpoint: "e", Region: "r", AccessKeyID: "a", SecretAccessKey: "k", AllowHTTP: true}}
	var got map[string]any
	if err := json.Unmarshal(full.spec(), &got); err != nil {
		t.Fatal(err)
	}
	var walk func(prefix string, typ reflect.Type, m map[string]any)
	walk = func(prefix string, typ reflect.Type, m map[string]any) {
		for typ.Kind() == reflect.Pointer {
			typ = typ.Elem()
		}
		for i := range typ.NumField() {
			f := typ.Field(i)
			key, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if key == "" || key == "-" || key == "enabled" || key == "type" {
				continue // enabled: a block's presence; type: set with the backend
			}
			v, ok := m[key]
			if !ok {
				t.Errorf("durability.%s%s cannot be set through arkflow.Durability", prefix, key)
				continue
			}
			if sub, ok := v.(map[string]any); ok {
				walk(prefix+key+".", f.Type, sub)
			}
		}
	}
	walk("", reflect.TypeOf(durable.Config{}), got)
	// And the block decodes as the spec decoder reads it.
	var cfg durable.Config
	if err := json.Unmarshal(full.spec(), &cfg); err != nil || !cfg.NoRecycle || cfg.Backend == nil || cfg.Backend.S3 == nil || !cfg.Backend.S3.AllowHTTP {
		t.Fatalf("the block does not decode into durable.Config: %v %+v", err, cfg)
	}
}
