// Package hubwire is the JSON wire format shared by the Hub and hubclient:
// the request, response and command bodies of ArkFlow v1's Hub protocol
// (operator API, agent API and the [v1] job endpoints), plus a few named
// extensions.
//
// Field names, snake_case spelling and optionality follow ArkFlow v1
// exactly, so an ArkFlow v1 Agent can talk to our Hub and our Agent can
// talk to a v1 Hub. Every extension is an optional field that is omitted
// when unset; a v1 peer (serde without deny_unknown_fields) ignores it.
// Each extension field is marked "Extension:" in its comment.
//
// Slices that v1 declares as required arrays are always encoded as [] and
// never as null, because a Rust Vec field does not accept null. Spec and
// plan blobs are carried as json.RawMessage and never interpreted here.
//
// The package also holds the small protocol rules both sides must apply the
// same way: the "generation-N" ETag/If-Match form, capability names, and
// whether a node report is fresh.
package hubwire
