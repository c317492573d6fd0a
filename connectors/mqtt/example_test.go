package mqtt_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"time"

	"github.com/arkflow-rs/arkflow-go"
	"github.com/arkflow-rs/arkflow-go/connectors"
	"github.com/arkflow-rs/arkflow-go/connectors/mqtt"
	"github.com/arkflow-rs/arkflow-go/job"
	"github.com/arkflow-rs/arkflow-go/window"
)

// Sensor readings at QoS 1 → per-device averages every minute → one
// topic per device, over TLS, with a write-ahead log in front of the
// source and checkpoints: every reading the broker handed over is counted
// once, across crashes (compile-only: it needs a broker).
func Example() {
	tls := &mqtt.TLS{CA: "/etc/mqtt/ca.pem", ClientCert: "/etc/mqtt/client.pem", ClientKey: "/etc/mqtt/client-key.pem"}
	j, err := arkflow.NewJob("sensor-averages").
		Source("readings", mqtt.SourceConfig{
			Host: "broker.example.com", Port: 8883, ClientID: "sensor-averages", TLS: tls,
			Topics: []string{"sensors/+/temperature"},
			Schema: connectors.Schema{{Name: "device", Type: "string"}, {Name: "celsius", Type: "float64"}},
		}, arkflow.Durable(job.Durability{})).
		KeyBy("device").
		Window("per-minute", window.Tumbling(time.Minute, job.Avg("celsius", "avg"))).
		Sink("averages", mqtt.SinkConfig{
			Host: "broker.example.com", Port: 8883, ClientID: "sensor-averages-out", TLS: tls,
			Topic: mqtt.Topic{Expr: "concat('averages/', device)"},
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

// A source config is the spec's config of input_type mqtt, field for
// field.
func ExampleSourceConfig() {
	qos := 1
	cfg := mqtt.SourceConfig{
		Host: "localhost", ClientID: "clicks-job", Topics: []string{"clicks/#", "views/#"}, QoS: &qos,
		Schema: connectors.Schema{{Name: "user", Type: "string"}},
	}
	b, _ := json.Marshal(cfg)
	fmt.Println(string(b))
	// Output:
	// {"host":"localhost","client_id":"clicks-job","topics":["clicks/#","views/#"],"qos":1,"schema":[{"name":"user","type":"string"}]}
}

// A topic expression is checked against the rows when the job is built:
// it must give a string.
func ExampleTopic() {
	build := func(topic mqtt.Topic) error {
		_, err := arkflow.NewJob("relay").
			Source("in", mqtt.SourceConfig{Host: "localhost", ClientID: "relay", Topics: []string{"in/#"},
				Schema: connectors.Schema{{Name: "device", Type: "string"}, {Name: "n", Type: "int64"}}}).
			Sink("out", mqtt.SinkConfig{Host: "localhost", ClientID: "relay-out", Topic: topic}).
			Build()
		return err
	}
	fmt.Println(build(mqtt.Topic{Expr: "n"}) != nil)
	fmt.Println(build(mqtt.Topic{Expr: "concat('out/', device)"}))
	// Output:
	// true
	// <nil>
}
