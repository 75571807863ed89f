package auth

import (
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Token shape: "<id>.<secret>", both of [a-z0-9].
const (
	// IDLen is the length of a token's public id.
	IDLen = 6
	// SecretLen is the length of the secret of a token from NewToken.
	SecretLen = 16
	// MaxSecretLen bounds what ParseToken accepts, so a huge header cannot
	// make the server hash megabytes.
	MaxSecretLen = 64
	// adminSecretLen is longer than SecretLen: the admin token is derived,
	// not random, and lives as long as its generation, so it gets more
	// margin.
	adminSecretLen = 32
)

// adminInfo separates the admin token from other values derived from the
// cluster secret (the CA key uses another info string).
const adminInfo = "outpost admin token v1"

const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"

// Errors of this package. None of them, nor any error wrapping them,
// carries a token's secret.
var (
	// ErrNoCredentials means the request carried no bearer token.
	ErrNoCredentials = errors.New("no credentials")
	// ErrInvalidToken means the token is malformed, unknown, or its secret
	// does not match.
	ErrInvalidToken = errors.New("invalid bearer token")
	// ErrExpired means the token was valid but its expiry has passed.
	ErrExpired = errors.New("token has expired")
	// ErrInvalidCertificate means a client certificate names no known
	// kind of holder.
	ErrInvalidCertificate = errors.New("client certificate names no outpost identity")
	// ErrForbidden is wrapped by every authorization refusal.
	ErrForbidden = errors.New("forbidden")
)

// NewToken returns a new random token id and secret; the token the holder
// presents is id + "." + secret.
func NewToken() (id, secret string) {
	// 8 random bytes per character: the modulo bias of 2^64 mod 36 is
	// negligible, and there is no rejection loop.
	var b [(IDLen + SecretLen) * 8]byte
	// crypto/rand.Read never returns an error; it crashes the program if
	// the system's source fails.
	_, _ = rand.Read(b[:])
	s := encode(b[:])
	return s[:IDLen], s[IDLen:]
}

// AdminToken derives the cluster-admin token from the cluster secret: its
// generation 0 (AdminTokenGeneration). Every server derives the same one,
// so each can write the admin's client configuration without asking the
// others. It returns empty strings only if key derivation fails, which it
// does not for a secret the CA accepts.
func AdminToken(clusterSecret string) (id, secret string) {
	return AdminTokenGeneration(clusterSecret, 0)
}

// AdminTokenGeneration derives generation gen of the cluster-admin token.
// A cluster starts at generation 0; each rotation (outpost adm token
// rotate-admin) moves it to the next and the previous secret stops
// authenticating, so a leaked admin token or admin.conf is revoked without
// a new cluster secret. The id is the same in every generation (the admin
// Token object keeps its name); only the secret changes. Whoever holds
// the cluster secret can derive every generation: rotation revokes a
// leaked token, not a leaked secret.
func AdminTokenGeneration(clusterSecret string, gen int) (id, secret string) {
	id, secret = deriveAdmin(clusterSecret, adminInfo)
	if gen > 0 {
		_, secret = deriveAdmin(clusterSecret, adminInfo+" generation "+strconv.Itoa(gen))
	}
	return id, secret
}

func deriveAdmin(clusterSecret, info string) (id, secret string) {
	b, err := hkdf.Key(sha256.New, []byte(clusterSecret), nil, info, (IDLen+adminSecretLen)*8)
	if err != nil {
		return "", ""
	}
	s := encode(b)
	return s[:IDLen], s[IDLen:]
}

// encode turns every 8 bytes of b into one character of alphabet.
func encode(b []byte) string {
	out := make([]byte, len(b)/8)
	for i := range out {
		out[i] = alphabet[binary.BigEndian.Uint64(b[i*8:])%uint64(len(alphabet))]
	}
	return string(out)
}

// ParseToken splits a token into its id and secret and checks their shape.
// The error never repeats the input.
func ParseToken(s string) (id, secret string, err error) {
	id, secret, ok := strings.Cut(s, ".")
	switch {
	case !ok:
		return "", "", fmt.Errorf("%w: want <id>.<secret>", ErrInvalidToken)
	case len(id) != IDLen || !lowerAlnum(id):
		return "", "", fmt.Errorf("%w: id must be %d characters of [a-z0-9]", ErrInvalidToken, IDLen)
	case len(secret) < SecretLen || len(secret) > MaxSecretLen || !lowerAlnum(secret):
		return "", "", fmt.Errorf("%w: secret must be %d to %d characters of [a-z0-9]", ErrInvalidToken, SecretLen, MaxSecretLen)
	}
	return id, secret, nil
}

// lowerAlnum reports whether s holds only [a-z0-9].
func lowerAlnum(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// HashSecret returns the hex SHA-256 of a token's secret, the form stored in
// api.TokenSpec.SecretHash.
func HashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}
