package main

// The MQTT connector is pure Go (eclipse/paho.mqtt.golang): every build of
// the command has it.
import _ "github.com/arkflow-rs/arkflow-go/connectors/mqtt"
