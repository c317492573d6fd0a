//go:build cgo

package main

// The Kafka connector wraps librdkafka through cgo. A build without cgo
// still has every other connector; Kafka specs then fail validation with
// "unknown input type".
import _ "github.com/arkflow-rs/arkflow-go/connectors/kafka"
