package hubhttp

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net/http"
)

// TokenBytes is the entropy of a session or node token: 128 bits.
const TokenBytes = 16

// NewToken returns a fresh session or node token: TokenBytes of
// crypto/rand as 32 lowercase hex digits. Store only HashSecret(token).
func NewToken() string {
	var b [TokenBytes]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand, Go >= 1.24)
	return hex.EncodeToString(b[:])
}

// String returns h as 64 lowercase hex digits, the form to store.
func (h SecretHash) String() string { return hex.EncodeToString(h[:]) }

// ParseSecretHash parses the form String returns.
func ParseSecretHash(s string) (SecretHash, error) {
	var h SecretHash
	if len(s) != 2*len(h) {
		return h, errors.New("hubhttp: secret hash is not 64 hex digits")
	}
	if _, err := hex.Decode(h[:], []byte(s)); err != nil {
		return h, errors.New("hubhttp: secret hash is not 64 hex digits")
	}
	return h, nil
}

// MatchAny reports which of hashes presented matches, comparing with all
// of them in constant time (no early exit), or -1. Use it for a set of
// node tokens.
func MatchAny(hashes []SecretHash, presented string) int {
	p := HashSecret(presented)
	found := -1
	for i := range hashes {
		if hashEqual(hashes[i], p) && found < 0 {
			found = i
		}
	}
	return found
}

// AgentCredentials are an Agent's node id and session token, and where
// the token came from.
type AgentCredentials struct {
	NodeID       string
	SessionToken string
	// FromHeader is true when the token came from Authorization: Bearer,
	// false when it came where ArkFlow v1 sends it (body or query).
	FromHeader bool
}

// SessionCredentials picks an Agent's credentials. The token comes from
// "Authorization: Bearer" if present, else from v1Token, the value v1
// sends (the body's session_token, or the query's for GET
// /agent/commands and command results). If both are present they must
// be equal. nodeID is the body's or query's node_id. A missing token or
// a header and v1 token that disagree is 401; a missing node_id is 422.
func SessionCredentials(r *http.Request, nodeID, v1Token string) (AgentCredentials, *Error) {
	c := AgentCredentials{NodeID: nodeID}
	if h, ok := BearerToken(r); ok {
		if v1Token != "" && !hashEqual(HashSecret(h), HashSecret(v1Token)) {
			return AgentCredentials{}, Unauthorized("Authorization header and session_token disagree")
		}
		c.SessionToken, c.FromHeader = h, true
	} else {
		if r.Header.Get("Authorization") != "" {
			return AgentCredentials{}, Unauthorized("Authorization header is not a bearer token")
		}
		if len(v1Token) > maxPresentedSecret {
			return AgentCredentials{}, Unauthorized("session_token is too long")
		}
		c.SessionToken = v1Token
	}
	if c.SessionToken == "" {
		return AgentCredentials{}, Unauthorized("session token required")
	}
	if c.NodeID == "" {
		return AgentCredentials{}, ValidationFailed("node_id", "node_id must not be empty")
	}
	return c, nil
}

// QuerySessionCredentials is SessionCredentials with node_id and
// session_token read from the query string, where v1 sends them for GET
// /agent/commands and POST /agent/commands/{id}/result.
func QuerySessionCredentials(r *http.Request) (AgentCredentials, *Error) {
	q := r.URL.Query()
	return SessionCredentials(r, q.Get("node_id"), q.Get("session_token"))
}
