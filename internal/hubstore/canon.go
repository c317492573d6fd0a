package hubstore

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
)

// canonicalJSON re-encodes a JSON document with sorted object keys, no
// insignificant whitespace and numbers kept verbatim, so that two
// spellings of the same spec get the same digest.
func canonicalJSON(b []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, invalidf("spec is not JSON: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, invalidf("spec has data after the JSON document")
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, invalidf("spec: %v", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// checkJSON rejects a malformed JSON value (empty means absent), so that
// nothing the store hands back as json.RawMessage breaks an encoder.
func checkJSON(what string, b []byte) error {
	if len(b) != 0 && !json.Valid(b) {
		return invalidf("%s is not JSON", what)
	}
	return nil
}

// SpecDigest returns the content address of a spec: "sha256:" and the hex
// SHA-256 of its canonical JSON. It is the version id.
func SpecDigest(spec []byte) (string, []byte, error) {
	c, err := canonicalJSON(spec)
	if err != nil {
		return "", nil, err
	}
	h := sha256.Sum256(c)
	return "sha256:" + hex.EncodeToString(h[:]), c, nil
}

// requestHash fingerprints a request for Idempotency-Key comparison. It
// fails only on a malformed json.RawMessage inside the request.
func requestHash(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", invalidf("request: %v", err)
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:]), nil
}
