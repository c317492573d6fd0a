package main

// The WebSocket input is pure Go: every build of the command has it.
import _ "github.com/arkflow-rs/arkflow-go/connectors/websocket"
