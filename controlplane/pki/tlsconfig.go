package pki

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
)

// ServerName is a DNS name in every server certificate. Peers dial each
// other by raft address, which may be missing from a certificate's SANs
// (NAT, a changed IP); they verify against this name instead, and rely on
// the CA and the ServerOU check for identity.
const ServerName = "outpost-server"

// ServerTLSConfig is the API server's TLS configuration: TLS 1.3, the
// server certificate, and client certificates of the cluster CA verified
// when a client offers one. Bearer tokens stay the main credential, so a
// client without a certificate is let through to token authentication.
func ServerTLSConfig(ca *CA, cert tls.Certificate) *tls.Config {
	return &tls.Config{
		MinVersion:   tls.VersionTLS13,
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.VerifyClientCertIfGiven,
		ClientCAs:    ca.Pool(),
	}
}

// PeerTLSConfigs returns the configurations for server-to-server
// connections (raft and forwarding): both sides present cert and require
// the other to hold a certificate of the cluster CA with the organizational
// unit ServerOU, so an agent's or user's client certificate cannot join
// the raft mesh. The client side verifies the server name ServerName, so
// dialers need not set it.
func PeerTLSConfigs(ca *CA, cert tls.Certificate) (server, client *tls.Config) {
	server = &tls.Config{
		MinVersion:       tls.VersionTLS13,
		Certificates:     []tls.Certificate{cert},
		ClientAuth:       tls.RequireAndVerifyClientCert,
		ClientCAs:        ca.Pool(),
		VerifyConnection: verifyPeerOU,
	}
	client = &tls.Config{
		MinVersion:       tls.VersionTLS13,
		Certificates:     []tls.Certificate{cert},
		RootCAs:          ca.Pool(),
		ServerName:       ServerName,
		VerifyConnection: verifyPeerOU,
	}
	return server, client
}

// verifyPeerOU runs after the chain was verified against the cluster CA
// and refuses a peer whose certificate is not a server's.
func verifyPeerOU(cs tls.ConnectionState) error {
	if len(cs.PeerCertificates) == 0 {
		return fmt.Errorf("%w: no certificate presented", ErrNotPeer)
	}
	leaf := cs.PeerCertificates[0]
	if !slices.Contains(leaf.Subject.OrganizationalUnit, ServerOU) {
		return fmt.Errorf("%w: certificate %q lacks organizational unit %q", ErrNotPeer, leaf.Subject.CommonName, ServerOU)
	}
	return nil
}

// ClientTLSConfig is a client's TLS configuration that trusts the CA
// certificates in caPEM (from a client configuration file). The caller
// adds a client certificate if it has one.
func ClientTLSConfig(caPEM []byte) (*tls.Config, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, ErrNoCertificate
	}
	return &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: pool}, nil
}

// PinnedTLSConfig is a TLS configuration for a client that knows only the
// CA pin (see (*CA).Hash), as an agent does when it joins with a join
// string. It accepts a server whose chain includes a CA certificate with
// that public key and whose leaf that CA signed; the server name is not
// checked, because the pin, not a name, is what the joiner was given.
// After the handshake the CA certificate is in the connection state's
// PeerCertificates, ready to be saved.
func PinnedTLSConfig(pin string) (*tls.Config, error) {
	hexPart, ok := strings.CutPrefix(pin, "sha256:")
	if b, err := hex.DecodeString(hexPart); !ok || err != nil || len(b) != 32 {
		return nil, fmt.Errorf("%w: pin must be \"sha256:\" and 64 hex digits", ErrPinMismatch)
	}
	want := "sha256:" + strings.ToLower(hexPart)
	return &tls.Config{
		MinVersion: tls.VersionTLS13,
		// Go's name-based verification is switched off and replaced by
		// the pin check in VerifyConnection, which always runs.
		InsecureSkipVerify: true, //nolint:gosec // verified by pin below
		VerifyConnection: func(cs tls.ConnectionState) error {
			return verifyPinned(cs.PeerCertificates, want)
		},
	}, nil
}

// verifyPinned checks that chain[0] was signed by a CA in chain whose key
// hash is pin.
func verifyPinned(chain []*x509.Certificate, pin string) error {
	if len(chain) == 0 {
		return fmt.Errorf("%w: server presented no certificate", ErrPinMismatch)
	}
	for _, c := range chain[1:] {
		if !c.IsCA || Hash(c) != pin {
			continue
		}
		roots := x509.NewCertPool()
		roots.AddCert(c)
		_, err := chain[0].Verify(x509.VerifyOptions{
			Roots:     roots,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		})
		if err != nil {
			return fmt.Errorf("%w: %w", ErrPinMismatch, err)
		}
		return nil
	}
	return ErrPinMismatch
}
