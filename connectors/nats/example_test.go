package nats_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/nats"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/window"
)

// JetStream → per-user totals every minute → JetStream, over TLS with a
// credentials file, with checkpoints: every order counted once, and
// results a restart writes again stored once by the output stream
// (compile-only: it needs a server).
func Example() {
	conn := func() (string, *nats.Auth, *nats.TLS) {
		return "tls://nats.example.com:4222", &nats.Auth{CredsFile: "/etc/nats/orders.creds"}, &nats.TLS{CA: "/etc/nats/ca.pem"}
	}
	url, auth, tls := conn()
	j, err := arkflow.NewJob("order-totals").
		Source("orders", nats.SourceConfig{
			URL: url, Auth: auth, TLS: tls,
			Mode:   nats.SourceMode{Type: nats.ModeJetStream, Stream: "ORDERS", ConsumerName: "order-totals", Subjects: []string{"orders.eu", "orders.us"}},
			Schema: connectors.Schema{{Name: "user", Type: "string"}, {Name: "amount", Type: "int64"}},
		}).
		KeyBy("user").
		Window("per-minute", window.Tumbling(time.Minute, job.Count("n"), job.Sum("amount", "total"))).
		Sink("totals", nats.SinkConfig{
			URL: url, Auth: auth, TLS: tls,
			Mode:        nats.SinkMode{Type: nats.ModeJetStream, Subject: "totals.per-minute"},
			MsgIDFields: []string{"user", window.ColumnStart},
		}).
		State(job.State{Backend: "badger"}).
		Checkpoint(job.Checkpoint{IntervalMS: 10_000}).
		Build(arkflow.WithDataDir("./data"))
	if err != nil {
		log.Fatal(err)
	}
	if err := j.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
}

// A source config is the spec's config of input_type nats, field for
// field.
func ExampleSourceConfig() {
	cfg := nats.SourceConfig{
		URL:    "nats://localhost:4222",
		Mode:   nats.SourceMode{Type: nats.ModeRegular, Subject: "clicks.web", QueueGroup: "counters"},
		Auth:   &nats.Auth{Username: "ark", Password: "secret"},
		Schema: connectors.Schema{{Name: "user", Type: "string"}},
	}
	b, _ := json.Marshal(cfg)
	fmt.Println(string(b))
	// Output:
	// {"url":"nats://localhost:4222","mode":{"type":"regular","subject":"clicks.web","queue_group":"counters"},"auth":{"username":"ark","password":"secret"},"schema":[{"name":"user","type":"string"}]}
}

// Rows out of a window carry no source position: a JetStream sink needs
// msg_id_fields to name what identifies them, and validation says so.
func ExampleSinkConfig() {
	build := func(sink nats.SinkConfig) error {
		_, err := arkflow.NewJob("totals").
			Source("clicks", nats.SourceConfig{
				URL:    "nats://localhost:4222",
				Mode:   nats.SourceMode{Type: nats.ModeJetStream, Stream: "CLICKS", ConsumerName: "totals"},
				Schema: connectors.Schema{{Name: "user", Type: "string"}},
			}).
			KeyBy("user").
			Window("per-minute", window.Tumbling(time.Minute, job.Count("n"))).
			Sink("out", sink).
			Build()
		return err
	}
	sink := nats.SinkConfig{URL: "nats://localhost:4222", Mode: nats.SinkMode{Type: nats.ModeJetStream, Subject: "totals"}}
	err := build(sink)
	fmt.Println(strings.Contains(err.Error(), "msg_id_fields: is required"))
	sink.MsgIDFields = []string{"user", window.ColumnStart}
	fmt.Println(build(sink))
	// Output:
	// true
	// <nil>
}
