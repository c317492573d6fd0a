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

func requestHash(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only store-defined request structs get here
	}
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
