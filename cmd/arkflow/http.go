package main

// The HTTP connector (a server input and a client output) is pure Go
// (net/http): every build of the command has it.
import _ "github.com/arkflow-rs/arkflow-go/connectors/http"
