package websocket

import (
	"encoding/json"
	"strings"
	"testing"
)

// Every bad config is refused with an error naming the key.
func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct{ config, want string }{
		{`{}`, "url: is required"},
		{`{"url":"http://x/feed"}`, `url: scheme "http"`},
		{`{"url":"ws://"}`, "has no host"},
		{`{"url":"ws://x","tls":{"ca":"ca.pem"}}`, "tls: is for wss:// URLs"},
		{`{"url":"wss://x","tls":{"client_cert":"c.pem"}}`, "tls: client_cert and client_key go together"},
		{`{"url":"ws://x","format":"json"}`, "schema: is required with format"},
		{`{"url":"ws://x","format":"raw","schema":[{"name":"a","type":"string"}]}`, "schema: must be absent"},
		{`{"url":"ws://x","format":"xml"}`, `format: must be "json" or "raw"`},
		{`{"url":"ws://x","schema":[{"name":"a","type":"uuid"}]}`, "schema[0].type"},
		{`{"url":"ws://x","timeout":0}`, "timeout: must be > 0"},
		{`{"url":"ws://x","batch_size":-1}`, "batch_size: must be > 0"},
		{`{"url":"ws://x","max_message_bytes":0}`, "max_message_bytes: must be > 0"},
		{`{"url":"ws://x","reconnect":{"initial_ms":0}}`, "reconnect.initial_ms: must be > 0"},
		{`{"url":"ws://x","reconnect":{"initial_ms":500,"max_ms":100}}`, "reconnect.max_ms: must be ≥ reconnect.initial_ms"},
		{`{"url":"ws://x","headers":{"a b":"c"}}`, "headers:"},
		{`{"url":"ws://x","urls":["ws://y"]}`, "urls"},
		{`{"url":"ws://x","batch_size":"many"}`, "batch_size"},
	} {
		_, err := buildRaw([]byte(tc.config))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.config, err, tc.want)
		}
	}
}

// The defaults, and a config that round-trips through JSON.
func TestConfigDefaults(t *testing.T) {
	in, err := buildRaw([]byte(`{"url":"wss://feed.example.com/x","headers":{"Authorization":"Bearer t"},"timeout":3}`))
	if err != nil {
		t.Fatal(err)
	}
	c := in.cfg
	if c.Format != FormatRaw || c.BatchSize != DefaultBatchSize || c.MaxMessageBytes != DefaultMaxMessageBytes || c.Timeout != 3 ||
		c.Reconnect.InitialMS != DefaultReconnectInitialMS || c.Reconnect.MaxMS != DefaultReconnectMaxMS {
		t.Errorf("defaults: %+v %+v", c, *c.Reconnect)
	}
	b, _ := json.Marshal(c)
	again, err := buildRaw(b)
	if err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if b2, _ := json.Marshal(again.cfg); string(b2) != string(b) {
		t.Errorf("round trip: %s, then %s", b, b2)
	}
	if in.Partitions() != 1 || in.Schema().NumFields() != 5 {
		t.Errorf("partitions %d, schema %s", in.Partitions(), in.Schema())
	}
}
