package main

// The NATS connector (core subjects and JetStream) is pure Go: every build
// of the command has it.
import _ "github.com/arkflow-rs/arkflow-go/connectors/nats"
