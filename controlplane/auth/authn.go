package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/pki"
)

// Identity is an authenticated caller. Identities returned by the
// Authenticator are shared between requests: callers must not change them.
type Identity struct {
	// Name is what refusals and audit lines show: "token:<id>",
	// "system:node:<node>", "system:server:<id>".
	Name       string
	Role       string
	Namespaces []string
	NodeName   string
	// TokenID is empty for certificate identities.
	TokenID string
}

// TokenLookup finds a stored token by id. It returns (nil, nil) when there
// is no such token; an error is treated as "no such token" too, so a broken
// store never lets a request in. The returned token is only read.
type TokenLookup interface {
	GetToken(id string) (*api.Token, error)
}

// RevalidateAfter is how long a cached token is trusted without looking at
// the store. A deleted or changed token stops working on this server within
// this time. After it, the token is looked up again, and if its
// resourceVersion is unchanged the cached identity is kept without
// re-hashing; otherwise the token is verified from scratch.
//
// The TTL is chosen over checking the resourceVersion on every request
// because it keeps the hot path to one map lookup under a read lock, with
// no call into the store; one second of revocation delay is well inside
// what a user notices after "delete token".
const RevalidateAfter = time.Second

// maxCacheEntries bounds the cache. Only tokens that verified are cached, so
// an attacker cannot fill it with guesses; the bound covers a cluster that
// issues very many tokens.
const maxCacheEntries = 10000

// Authenticator checks bearer tokens against the stored api.Token objects.
// It is safe for concurrent use.
type Authenticator struct {
	lookup TokenLookup
	now    func() time.Time

	mu     sync.RWMutex
	cache  map[string]*cacheEntry // by the full token "<id>.<secret>"
	static map[string]*staticToken
}

type cacheEntry struct {
	ident   *Identity
	expires time.Time // zero: never
	rv      string
	static  bool
	checked atomic.Int64 // unix nanoseconds of the last store check
}

type staticToken struct {
	hash  [sha256.Size]byte
	ident *Identity
}

// NewAuthenticator returns an Authenticator that finds tokens with lookup
// and reads the time from now (time.Now when nil).
func NewAuthenticator(lookup TokenLookup, now func() time.Time) *Authenticator {
	if now == nil {
		now = time.Now
	}
	return &Authenticator{
		lookup: lookup,
		now:    now,
		cache:  make(map[string]*cacheEntry),
		static: make(map[string]*staticToken),
	}
}

// AddStatic makes token authenticate as ident without a stored api.Token.
// Servers use it for the admin token derived from the cluster secret (see
// AdminToken), so the admin can get in before the bootstrap writes the
// Token object and cannot be locked out by deleting it. A static token
// takes precedence over a stored token with the same id and never expires.
// Adding a token whose id is static already replaces it: the old secret
// stops authenticating at once (a rotated admin token).
func (a *Authenticator) AddStatic(token string, ident Identity) error {
	id, secret, err := ParseToken(token)
	if err != nil {
		return err
	}
	ident.TokenID = id
	ident.Namespaces = slices.Clone(ident.Namespaces)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.static[id] = &staticToken{hash: sha256.Sum256([]byte(secret)), ident: &ident}
	for k := range a.cache {
		if strings.HasPrefix(k, id+".") {
			delete(a.cache, k)
		}
	}
	return nil
}

// Authenticate checks the value of an Authorization header ("Bearer
// <id>.<secret>") and returns the caller's identity. Errors wrap
// ErrNoCredentials, ErrInvalidToken or ErrExpired.
func (a *Authenticator) Authenticate(header string) (*Identity, error) {
	token, err := bearer(header)
	if err != nil {
		return nil, err
	}
	now := a.now()
	a.mu.RLock()
	e := a.cache[token]
	a.mu.RUnlock()
	if e == nil {
		return a.verify(token, now)
	}
	if !e.expires.IsZero() && !now.Before(e.expires) {
		a.evict(token)
		return nil, fmt.Errorf("%w: token %s expired at %s", ErrExpired, e.ident.TokenID, e.expires.UTC().Format(time.RFC3339))
	}
	if e.static || now.UnixNano()-e.checked.Load() < int64(RevalidateAfter) {
		return e.ident, nil
	}
	return a.revalidate(token, e, now)
}

// bearer extracts the token from an Authorization header value.
func bearer(header string) (string, error) {
	header = strings.TrimSpace(header)
	if header == "" {
		return "", ErrNoCredentials
	}
	scheme, token, _ := strings.Cut(header, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", fmt.Errorf("%w: authorization scheme is not Bearer", ErrInvalidToken)
	}
	token = strings.TrimSpace(token)
	if token == "" {
		return "", ErrNoCredentials
	}
	return token, nil
}

// revalidate re-checks a cached token whose store check is older than
// RevalidateAfter.
func (a *Authenticator) revalidate(token string, e *cacheEntry, now time.Time) (*Identity, error) {
	t, err := a.lookup.GetToken(e.ident.TokenID)
	if err == nil && t != nil && t.ResourceVersion != "" && t.ResourceVersion == e.rv {
		e.checked.Store(now.UnixNano())
		return e.ident, nil
	}
	a.evict(token)
	return a.verify(token, now)
}

// verify checks a token from scratch and caches it if valid.
func (a *Authenticator) verify(token string, now time.Time) (*Identity, error) {
	id, secret, err := ParseToken(token)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(secret))

	a.mu.RLock()
	st := a.static[id]
	a.mu.RUnlock()
	if st != nil {
		if subtle.ConstantTimeCompare(sum[:], st.hash[:]) != 1 {
			return nil, fmt.Errorf("%w: secret does not match token %s", ErrInvalidToken, id)
		}
		// AddStatic may have replaced the token since it was read (a
		// rotation): caching the old secret then would keep it working.
		a.mu.Lock()
		if a.static[id] == st {
			a.storeLocked(token, &cacheEntry{ident: st.ident, static: true})
		}
		a.mu.Unlock()
		return st.ident, nil
	}

	t, err := a.lookup.GetToken(id)
	if err != nil {
		return nil, fmt.Errorf("%w: looking up token %s: %w", ErrInvalidToken, id, err)
	}
	if t == nil || t.Name != id {
		return nil, fmt.Errorf("%w: no token %s", ErrInvalidToken, id)
	}
	var want [sha256.Size]byte
	if n, err := hex.Decode(want[:], []byte(t.Spec.SecretHash)); err != nil || n != len(want) {
		return nil, fmt.Errorf("%w: token %s has a malformed secretHash", ErrInvalidToken, id)
	}
	if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
		return nil, fmt.Errorf("%w: secret does not match token %s", ErrInvalidToken, id)
	}
	e := &cacheEntry{rv: t.ResourceVersion, ident: identityOf(id, &t.Spec)}
	if t.Spec.Expires != nil && !t.Spec.Expires.IsZero() {
		e.expires = t.Spec.Expires.Time
		if !now.Before(e.expires) {
			return nil, fmt.Errorf("%w: token %s expired at %s", ErrExpired, id, e.expires.UTC().Format(time.RFC3339))
		}
	}
	e.checked.Store(now.UnixNano())
	a.store(token, e)
	return e.ident, nil
}

func identityOf(id string, spec *api.TokenSpec) *Identity {
	ident := &Identity{
		Name:       "token:" + id,
		Role:       spec.Role,
		Namespaces: slices.Clone(spec.Namespaces),
		NodeName:   spec.NodeName,
		TokenID:    id,
	}
	if spec.Role == api.RoleNode && spec.NodeName != "" {
		ident.Name = "system:node:" + spec.NodeName
	}
	return ident
}

func (a *Authenticator) store(token string, e *cacheEntry) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.storeLocked(token, e)
}

// storeLocked is store with a.mu held.
func (a *Authenticator) storeLocked(token string, e *cacheEntry) {
	if len(a.cache) >= maxCacheEntries {
		// Drop an arbitrary entry: it is re-verified on its next use.
		for k := range a.cache {
			delete(a.cache, k)
			break
		}
	}
	a.cache[token] = e
}

func (a *Authenticator) evict(token string) {
	a.mu.Lock()
	delete(a.cache, token)
	a.mu.Unlock()
}

// nodeCertPrefix starts the common name of a node's client certificate.
const nodeCertPrefix = "system:node:"

// IdentityFromCert maps a verified client certificate of the cluster CA to
// an identity: organizational unit pki.ServerOU is a server (named
// "system:server:<CN>"), pki.NodeOU with common name "system:node:<node>"
// is that node's agent. The caller must pass only a leaf that TLS verified
// against the cluster CA (a VerifiedChains entry), never one merely
// presented.
func IdentityFromCert(leaf *x509.Certificate) (*Identity, error) {
	if leaf == nil {
		return nil, fmt.Errorf("%w: no certificate", ErrInvalidCertificate)
	}
	cn := leaf.Subject.CommonName
	ous := leaf.Subject.OrganizationalUnit
	switch {
	case slices.Contains(ous, pki.ServerOU) && cn != "":
		return &Identity{Name: "system:server:" + cn, Role: api.RoleServer}, nil
	case slices.Contains(ous, pki.NodeOU) && strings.HasPrefix(cn, nodeCertPrefix) && len(cn) > len(nodeCertPrefix):
		return &Identity{Name: cn, Role: api.RoleNode, NodeName: cn[len(nodeCertPrefix):]}, nil
	}
	return nil, fmt.Errorf("%w: common name %q, organizational units %q", ErrInvalidCertificate, cn, ous)
}
