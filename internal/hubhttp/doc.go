// Package hubhttp is the HTTP plumbing every Hub route shares: the error
// envelope, the correlation id, operator authentication and roles, the
// session and node tokens of Agents, the request helpers (If-Match
// generations, Idempotency-Key, paging, JSON bodies) and the health
// routes. It imports only the standard library.
//
// The wire conventions are ArkFlow v1's (reference §A.0, §A.1): an error
// is {code, message, field?, stream_id?, correlation_id?, details?};
// X-Correlation-ID is echoed or generated and set on every response;
// If-Match "generation-N" carries the expected generation and ETag the
// new one; ?page and ?page_size page a list.
//
// Where ArkFlow is unsafe this package is not compatible on purpose:
//   - With no operator token configured every request is 401; only the
//     explicit InsecureNoAuth option lets every request through, and it is
//     logged as a warning (ArkFlow treats everyone as admin).
//   - A malformed token entry is a configuration error naming the entry
//     (by position and id, never by secret); ArkFlow silently uses the
//     whole malformed string as an admin secret.
//   - Session tokens are 128 random bits, stored only as their SHA-256 and
//     compared in constant time (ArkFlow's are node-session-N).
//   - Generated correlation ids are random, not a process counter.
//   - Every error is an envelope, including 413 and 415, which ArkFlow
//     answers as plain text.
//
// A Hub's handler is typically
//
//	Correlation(Recover(logger)(mux))
//
// with each operator route wrapped in auth.Require(action, resource) and
// RegisterHealth on the same mux. Agent routes do not use Require: they
// call SessionCredentials (or QuerySessionCredentials) and check the
// token against the stored SecretHash of the session.
//
// JSON bodies: DecodeJSON ignores unknown fields, as ArkFlow's serde
// does, so a v1 Agent or client that sends fields we do not model keeps
// working; DecodeJSONStrict refuses them (422 naming the field) for
// operator mutations where a misspelt field would otherwise be dropped
// silently.
package hubhttp
