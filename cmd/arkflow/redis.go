package main

// The Redis connector (streams, lists, pub/sub) is pure Go: every build of
// the command has it.
import _ "github.com/arkflow-rs/arkflow-go/connectors/redis"
