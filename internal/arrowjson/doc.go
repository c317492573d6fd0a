// Package arrowjson converts between JSON payloads and Arrow records.
package arrowjson
