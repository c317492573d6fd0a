package hubhttp

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
)

// Role is an operator role (reference §A.1).
type Role string

// The three roles.
const (
	RoleAdmin    Role = "admin"
	RoleOperator Role = "operator"
	RoleViewer   Role = "viewer"
)

// Action is what a route needs the principal to be allowed to do.
type Action string

// The actions of §A.1.
const (
	ActionRead           Action = "read"
	ActionOperate        Action = "operate"
	ActionConfigure      Action = "configure"
	ActionManageNodes    Action = "manage_nodes"
	ActionManageRollouts Action = "manage_rollouts"
	ActionReadAudit      Action = "read_audit"
)

// Valid reports whether r is one of the three roles.
func (r Role) Valid() bool { return r == RoleAdmin || r == RoleOperator || r == RoleViewer }

// Allows reports whether the role may perform a: admin everything;
// operator everything but read_audit; viewer read and read_audit.
func (r Role) Allows(a Action) bool {
	switch r {
	case RoleAdmin:
		return a.Valid()
	case RoleOperator:
		return a.Valid() && a != ActionReadAudit
	case RoleViewer:
		return a == ActionRead || a == ActionReadAudit
	}
	return false
}

// Valid reports whether a is one of the six actions.
func (a Action) Valid() bool {
	switch a {
	case ActionRead, ActionOperate, ActionConfigure, ActionManageNodes, ActionManageRollouts, ActionReadAudit:
		return true
	}
	return false
}

// Mutation reports whether a changes something; only mutations check
// scopes (§A.1: reads require only a valid principal).
func (a Action) Mutation() bool { return a != ActionRead && a != ActionReadAudit }

// title is ArkFlow's Debug spelling of the action, used in the 403
// message "Operator is not authorized for <Action>".
func (a Action) title() string {
	var b strings.Builder
	up := true
	for _, c := range string(a) {
		if c == '_' {
			up = true
			continue
		}
		if up && c >= 'a' && c <= 'z' {
			c -= 'a' - 'A'
		}
		up = false
		b.WriteRune(c)
	}
	return b.String()
}

// Resource types a scope may name. Stream ids are "{node}/{stream}".
const (
	ResourceNode          = "node"
	ResourceStream        = "stream"
	ResourceConfiguration = "configuration"
	ResourceOperation     = "operation"
	ResourceRollout       = "rollout"
	ResourceJob           = "job"
)

var resourceTypes = map[string]bool{
	ResourceNode: true, ResourceStream: true, ResourceConfiguration: true,
	ResourceOperation: true, ResourceRollout: true, ResourceJob: true,
}

// Resource is what a mutation acts on, for the scope check.
type Resource struct {
	Type string
	ID   string
}

// Scope restricts a principal's mutations to a resource type, or to one
// resource of it when ID is set.
type Scope struct {
	Type string
	ID   string
}

func (s Scope) String() string { return s.Type + "=" + s.ID }

// Principal is an authenticated operator.
type Principal struct {
	ID     string
	Role   Role
	Scopes []Scope
}

// Covers applies §A.1's scope rule: a principal without scopes covers
// everything; otherwise some scope must have res's type and no id or
// res's id, or be node=X (X not empty) with res a non-node resource whose
// id is X or starts with "X/". A Resource with an empty Type is covered
// only by an unscoped principal (fail closed).
func (p *Principal) Covers(res Resource) bool {
	if len(p.Scopes) == 0 {
		return true
	}
	if res.Type == "" {
		return false
	}
	for _, s := range p.Scopes {
		if s.Type == res.Type && (s.ID == "" || s.ID == res.ID) {
			return true
		}
		if s.Type == ResourceNode && s.ID != "" && res.Type != ResourceNode &&
			(res.ID == s.ID || strings.HasPrefix(res.ID, s.ID+"/")) {
			return true
		}
	}
	return false
}

// MinSecretLen is the shortest operator secret a token entry may carry.
const MinSecretLen = 16

// maxPresentedSecret bounds the bearer value we hash.
const maxPresentedSecret = 4096

// TokenEntry is one parsed operator token: the principal and the SHA-256
// of its secret. The secret itself is not kept.
type TokenEntry struct {
	Principal  Principal
	SecretHash SecretHash
}

// ParseTokenEntry parses ArkFlow's "id|role|secret[|scopes]" where role
// is admin, operator or viewer and scopes is a comma list of type=id (an
// empty id means the whole type; an empty list means unrestricted).
// Surrounding spaces of every part are trimmed. The secret must be at
// least MinSecretLen bytes and carry no spaces. Unlike ArkFlow, a value
// that is not of this form (including a bare secret) is an error, not an
// admin secret. Errors name the id and the bad part, never the secret.
func ParseTokenEntry(s string) (TokenEntry, error) {
	parts := strings.Split(strings.TrimSpace(s), "|")
	if len(parts) < 3 || len(parts) > 4 {
		return TokenEntry{}, errors.New(`not of the form id|role|secret[|scopes] (a bare secret is not accepted: write "operator|admin|<secret>")`)
	}
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	id, role, secret := parts[0], Role(parts[1]), parts[2]
	if id == "" {
		return TokenEntry{}, errors.New("empty id")
	}
	if !ValidCorrelationID(id) { // printable, no spaces, bounded
		return TokenEntry{}, errors.New("id must be 1 to 128 printable characters without spaces")
	}
	if !role.Valid() {
		return TokenEntry{}, fmt.Errorf("token %q: role %q is not admin, operator or viewer", id, truncate(string(role), 32))
	}
	if len(secret) < MinSecretLen {
		return TokenEntry{}, fmt.Errorf("token %q: secret shorter than %d bytes", id, MinSecretLen)
	}
	if len(secret) > maxPresentedSecret {
		return TokenEntry{}, fmt.Errorf("token %q: secret longer than %d bytes", id, maxPresentedSecret)
	}
	if strings.ContainsFunc(secret, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return TokenEntry{}, fmt.Errorf("token %q: secret contains spaces or control characters", id)
	}
	var scopes []Scope
	if len(parts) == 4 && parts[3] != "" {
		for _, raw := range strings.Split(parts[3], ",") {
			raw = strings.TrimSpace(raw)
			typ, sid, ok := strings.Cut(raw, "=")
			typ, sid = strings.TrimSpace(typ), strings.TrimSpace(sid)
			if !ok {
				return TokenEntry{}, fmt.Errorf("token %q: scope %q is not type=id", id, truncate(raw, 64))
			}
			if !resourceTypes[typ] {
				return TokenEntry{}, fmt.Errorf("token %q: scope %q has unknown type (want node, stream, configuration, operation, rollout or job)", id, truncate(raw, 64))
			}
			scopes = append(scopes, Scope{Type: typ, ID: sid})
		}
	}
	return TokenEntry{
		Principal:  Principal{ID: id, Role: role, Scopes: scopes},
		SecretHash: HashSecret(secret),
	}, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// ParseTokens parses a list of token entries (blank entries are skipped).
// A malformed entry, a duplicate id or a secret used twice is an error
// naming the entry by its 1-based position (and id when known); the
// Hub must refuse to start on it.
func ParseTokens(entries []string) ([]TokenEntry, error) {
	var out []TokenEntry
	ids := map[string]int{}
	hashes := map[SecretHash]int{}
	for i, e := range entries {
		if strings.TrimSpace(e) == "" {
			continue
		}
		t, err := ParseTokenEntry(e)
		if err != nil {
			return nil, fmt.Errorf("operator token entry %d: %w", i+1, err)
		}
		if j, dup := ids[t.Principal.ID]; dup {
			return nil, fmt.Errorf("operator token entry %d: id %q already used by entry %d", i+1, t.Principal.ID, j)
		}
		if j, dup := hashes[t.SecretHash]; dup {
			return nil, fmt.Errorf("operator token entry %d (%q): same secret as entry %d", i+1, t.Principal.ID, j)
		}
		ids[t.Principal.ID] = i + 1
		hashes[t.SecretHash] = i + 1
		out = append(out, t)
	}
	return out, nil
}

// Denial describes a refused request, for the audit log: ArkFlow writes
// action "operator.<action>" with failure_code Code.
type Denial struct {
	Action        Action
	Resource      Resource
	Code          string // CodeUnauthorized or CodeForbidden
	PrincipalID   string // empty when Code is unauthorized
	CorrelationID string
	Method        string
	Path          string
}

// AuthOptions configures an Authenticator.
type AuthOptions struct {
	// Tokens are the operator tokens (ParseTokens).
	Tokens []TokenEntry
	// InsecureNoAuth lets every request through as an admin. It must be
	// asked for explicitly (the Hub's --insecure-no-auth) and is logged as
	// a warning. It cannot be combined with Tokens.
	InsecureNoAuth bool
	// Logger receives the warnings; nil discards them (slog.Default is
	// never used).
	Logger *slog.Logger
	// OnDenied, if set, is called for every 401 and 403 Require writes.
	OnDenied func(ctx context.Context, d Denial)
}

// Authenticator checks operator bearer tokens and roles.
type Authenticator struct {
	tokens   []TokenEntry
	insecure bool
	onDenied func(context.Context, Denial)
	warning  string
}

// Warning texts.
const (
	warnInsecure = "operator authentication is disabled (insecure no-auth mode): every request is treated as admin"
	warnNoTokens = "no operator token configured: every operator request will be rejected with 401"
)

// NewAuthenticator checks opts and returns the authenticator. With no
// tokens and no InsecureNoAuth every request is 401 (ArkFlow lets
// everyone in as admin); both cases are logged as a warning, also
// returned by Warning.
func NewAuthenticator(opts AuthOptions) (*Authenticator, error) {
	if opts.InsecureNoAuth && len(opts.Tokens) > 0 {
		return nil, errors.New("hubhttp: InsecureNoAuth together with operator tokens: choose one")
	}
	for i, t := range opts.Tokens {
		if t.Principal.ID == "" || !t.Principal.Role.Valid() {
			return nil, fmt.Errorf("hubhttp: operator token %d has no id or an invalid role", i+1)
		}
	}
	a := &Authenticator{
		tokens:   append([]TokenEntry(nil), opts.Tokens...),
		insecure: opts.InsecureNoAuth,
		onDenied: opts.OnDenied,
	}
	switch {
	case a.insecure:
		a.warning = warnInsecure
	case len(a.tokens) == 0:
		a.warning = warnNoTokens
	}
	if a.warning != "" && opts.Logger != nil {
		opts.Logger.Warn(a.warning)
	}
	return a, nil
}

// Insecure reports whether the authenticator lets every request in.
func (a *Authenticator) Insecure() bool { return a.insecure }

// Warning returns the warning NewAuthenticator logged, or "".
func (a *Authenticator) Warning() string { return a.warning }

// insecurePrincipal is who every request is in InsecureNoAuth mode.
var insecurePrincipal = Principal{ID: "insecure-no-auth", Role: RoleAdmin}

// Authenticate returns the principal of r's "Authorization: Bearer"
// token, or nil. The presented secret is hashed and compared with every
// configured hash in constant time, without stopping at a match, so
// neither the secret's length nor its position in the list shows in the
// timing.
func (a *Authenticator) Authenticate(r *http.Request) *Principal {
	if a.insecure {
		p := insecurePrincipal
		return &p
	}
	secret, ok := BearerToken(r)
	if !ok || len(a.tokens) == 0 {
		return nil
	}
	h := HashSecret(secret)
	found := -1
	for i := range a.tokens {
		if hashEqual(a.tokens[i].SecretHash, h) && found < 0 {
			found = i
		}
	}
	if found < 0 {
		return nil
	}
	p := a.tokens[found].Principal
	p.Scopes = append([]Scope(nil), p.Scopes...)
	return &p
}

// ResourceFunc names the resource a request acts on, for the scope check
// of mutations (typically from r.PathValue). nil means no resource: only
// an unscoped principal may then mutate.
type ResourceFunc func(r *http.Request) Resource

// Require returns middleware that lets a request through only if it
// carries a principal allowed to perform action (and, for mutations,
// whose scopes cover resource(r)). Otherwise it writes a 401 (no or
// unknown token, with WWW-Authenticate) or 403 (role or scope) envelope
// and reports the denial to OnDenied. The principal is put in the
// request context (PrincipalFrom).
func (a *Authenticator) Require(action Action, resource ResourceFunc) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var res Resource
			if resource != nil && action.Mutation() {
				res = resource(r)
			}
			p, ok := a.Authorize(w, r, action, res)
			if !ok {
				return
			}
			next.ServeHTTP(w, r.WithContext(WithPrincipal(r.Context(), p)))
		})
	}
}

// Authorize is Require for a handler that learns the resource only after
// reading the request: on success it returns the principal; otherwise it
// has written the 401/403 envelope, reported the denial, and returns
// false.
func (a *Authenticator) Authorize(w http.ResponseWriter, r *http.Request, action Action, res Resource) (*Principal, bool) {
	p := a.Authenticate(r)
	var e *Error
	switch {
	case p == nil:
		e = Unauthorized("")
		w.Header().Set("WWW-Authenticate", `Bearer realm="arkflow-hub"`)
	case !p.Role.Allows(action):
		e = Forbidden(action)
	case action.Mutation() && !p.Covers(res):
		e = Forbidden(action)
	}
	if e == nil {
		return p, true
	}
	if a.onDenied != nil {
		d := Denial{
			Action: action, Resource: res, Code: e.Code,
			CorrelationID: responseCorrelationID(w, r),
			Method:        r.Method, Path: r.URL.Path,
		}
		if p != nil {
			d.PrincipalID = p.ID
		}
		a.onDenied(r.Context(), d)
	}
	WriteError(w, r, e)
	return nil, false
}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey, p)
}

// PrincipalFrom returns the principal Require put in ctx, or nil.
func PrincipalFrom(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey).(*Principal)
	return p
}

// BearerToken returns the credential of r's "Authorization: Bearer x"
// header (scheme case-insensitive). It reports false for another scheme,
// an empty or over-long credential, or one with spaces.
func BearerToken(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, cred, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	cred = strings.TrimSpace(cred)
	if cred == "" || len(cred) > maxPresentedSecret || strings.ContainsAny(cred, " \t") {
		return "", false
	}
	return cred, true
}

// SecretHash is the SHA-256 of a secret: what the Hub stores and compares
// instead of the secret.
type SecretHash [sha256.Size]byte

// HashSecret returns the SHA-256 of s.
func HashSecret(s string) SecretHash { return sha256.Sum256([]byte(s)) }

// Matches reports, in constant time, whether presented hashes to h.
// Comparing fixed-size hashes means the length of the stored secret does
// not show either.
func (h SecretHash) Matches(presented string) bool {
	return hashEqual(h, HashSecret(presented))
}

// hashEqual is a variable so tests can check every comparison goes
// through crypto/subtle and none stops early.
var hashEqual = func(a, b SecretHash) bool {
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}
