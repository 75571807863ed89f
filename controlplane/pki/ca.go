package pki

import (
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"time"
)

// MinSecretLen is the shortest cluster secret accepted. The secret is the
// root of trust of the cluster, so it must be hard to guess.
const MinSecretLen = 32

// Organizational units of issued certificates; they say what kind of
// holder a certificate names. Raft peers must present ServerOU.
const (
	ServerOU = "outpost-server"
	NodeOU   = "outpost-node"
)

// caInfo separates the CA key from other keys derived from the same secret.
// The version lets a later format derive a different key on purpose.
const caInfo = "outpost cluster CA v1"

// The CA certificate's contents are fixed so that every server derives the
// same bytes: ed25519 signatures are deterministic, so the same key and the
// same template give the same certificate.
var (
	caSubject   = pkix.Name{CommonName: "outpost cluster CA"}
	caSerial    = big.NewInt(1)
	caNotBefore = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	caNotAfter  = caNotBefore.AddDate(50, 0, 0)
)

// Errors of this package.
var (
	// ErrShortSecret is returned for a cluster secret below MinSecretLen.
	ErrShortSecret = errors.New("cluster secret is too short")
	// ErrNoCertificate is returned for PEM input that holds no certificate.
	ErrNoCertificate = errors.New("no certificate in PEM data")
	// ErrNotPeer is returned when a peer's certificate is not a server
	// certificate of the cluster CA.
	ErrNotPeer = errors.New("peer is not an outpost server")
	// ErrPinMismatch is returned when no CA in a server's chain matches the
	// pinned hash.
	ErrPinMismatch = errors.New("server CA does not match the pinned hash")
	// ErrBadRequest is returned for invalid arguments to the issue calls.
	ErrBadRequest = errors.New("invalid certificate request")
)

// CA is the cluster certificate authority derived from the cluster secret.
type CA struct {
	key     ed25519.PrivateKey
	cert    *x509.Certificate
	certPEM []byte
	pool    *x509.CertPool
	hash    string
}

// DeriveCA derives the cluster CA from the cluster secret. Every call with
// the same secret returns a CA with the same key and the same certificate
// bytes.
func DeriveCA(secret string) (*CA, error) {
	if len(secret) < MinSecretLen {
		return nil, fmt.Errorf("%w: cluster secret has %d characters, need at least %d", ErrShortSecret, len(secret), MinSecretLen)
	}
	seed, err := hkdf.Key(sha256.New, []byte(secret), nil, caInfo, ed25519.SeedSize)
	if err != nil {
		return nil, fmt.Errorf("deriving CA key: %w", err)
	}
	key := ed25519.NewKeyFromSeed(seed)
	pub := key.Public()
	tmpl := &x509.Certificate{
		SerialNumber:          caSerial,
		Subject:               caSubject,
		NotBefore:             caNotBefore,
		NotAfter:              caNotAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	// ed25519 signing takes no randomness and the serial is fixed, so the
	// reader is not consulted and the output depends on the secret alone.
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, pub, key)
	if err != nil {
		return nil, fmt.Errorf("creating CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing CA certificate: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &CA{
		key:     key,
		cert:    cert,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pool:    pool,
		hash:    Hash(cert),
	}, nil
}

// Certificate returns the parsed CA certificate. Callers must not change it.
func (ca *CA) Certificate() *x509.Certificate { return ca.cert }

// CertPEM returns the CA certificate in PEM form, as written into client
// configuration files. Callers must not change it.
func (ca *CA) CertPEM() []byte { return ca.certPEM }

// Pool returns a pool holding only the CA certificate. Callers must not
// add to it.
func (ca *CA) Pool() *x509.CertPool { return ca.pool }

// Hash returns the CA's pin, "sha256:" and the hex SHA-256 of its
// SubjectPublicKeyInfo. It names the key, not the certificate, so it stays
// valid if the certificate is ever re-issued for the same key.
func (ca *CA) Hash() string { return ca.hash }

// Hash returns the pin of any certificate: "sha256:" and the hex SHA-256 of
// its SubjectPublicKeyInfo.
func Hash(cert *x509.Certificate) string {
	sum := sha256.Sum256(cert.RawSubjectPublicKeyInfo)
	return "sha256:" + hex.EncodeToString(sum[:])
}
