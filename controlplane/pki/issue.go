package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"slices"
	"strings"
	"time"
)

// clockSkew backdates NotBefore so a certificate issued on one machine is
// already valid on a peer whose clock is a little behind.
const clockSkew = 5 * time.Minute

// keyType selects the leaf key algorithm. Leaves use ed25519: the CA is
// ed25519 already, so clients must support it anyway; a full mutual-TLS
// peer handshake costs the same with ed25519 and P-256 leaves within noise
// (about 1.9 ms on a 2-core test machine, see BenchmarkHandshake), and the
// record layer cost does not depend on the key at all.
type keyType int

const (
	keyEd25519 keyType = iota
	keyP256
)

// defaultHosts are always in a server certificate so local clients and
// the server's own loopback calls verify.
// ServerName is in every server certificate too, so peers that dial an
// address missing from the SANs still verify the chain with a fixed name.
var defaultHosts = []string{"127.0.0.1", "::1", "localhost", ServerName}

// IssueServerCert issues a certificate for server id, valid for ttl, for
// the given host names and IP addresses (a "host:port" form is accepted;
// the port is ignored). It carries both server and client authentication,
// since servers dial each other with mutual TLS, and the organizational
// unit ServerOU that raft peers check. The chain includes the CA
// certificate so a client that holds only the CA pin can verify it.
func (ca *CA) IssueServerCert(id string, hosts []string, ttl time.Duration) (tls.Certificate, error) {
	if id == "" {
		return tls.Certificate{}, fmt.Errorf("%w: id: must not be empty", ErrBadRequest)
	}
	return ca.issueServing(id, ServerOU, slices.Concat(defaultHosts, hosts), len(defaultHosts), ttl, keyEd25519)
}

// IssueBrowserServerCert is IssueServerCert with a P-256 key, for serving
// the API to web browsers (the console, issue 15 item 3): browsers offer no
// ed25519 signature scheme in TLS, so they cannot complete a handshake
// with an ed25519 leaf. It serves only; it cannot authenticate a client.
// Its chain is still signed by the ed25519 CA, which browsers cannot
// verify either: they show a certificate warning the user must accept.
func (ca *CA) IssueBrowserServerCert(id string, hosts []string, ttl time.Duration) (tls.Certificate, error) {
	if id == "" {
		return tls.Certificate{}, fmt.Errorf("%w: id: must not be empty", ErrBadRequest)
	}
	c, err := ca.issueServing(id, ServerOU, slices.Concat(defaultHosts, hosts), len(defaultHosts), ttl, keyP256)
	return c, err
}

// IssueNodeCert issues a node agent's certificate, valid for ttl: common
// name the node's name, organizational unit NodeOU, for serving the
// agent's endpoint on hosts (and the node's name) and for client
// authentication. The API server checks the name when it dials the agent;
// raft peers refuse it, lacking ServerOU.
func (ca *CA) IssueNodeCert(name string, hosts []string, ttl time.Duration) (tls.Certificate, error) {
	if name == "" {
		return tls.Certificate{}, fmt.Errorf("%w: name: must not be empty", ErrBadRequest)
	}
	return ca.issueServing(name, NodeOU, append(slices.Clone(hosts), name), 0, ttl, keyEd25519)
}

// issueServing issues a certificate for serving and client authentication
// to cn of unit ou, for hosts (IP addresses or DNS names; a "host:port"
// form is accepted and the port ignored). Errors name a host by its index
// less skip, the count of hosts the caller added itself.
func (ca *CA) issueServing(cn, ou string, hosts []string, skip int, ttl time.Duration, kt keyType) (tls.Certificate, error) {
	var ips []net.IP
	var names []string
	for i, h := range hosts {
		if host, _, err := net.SplitHostPort(h); err == nil {
			h = host
		}
		h = strings.TrimSuffix(strings.TrimSpace(h), ".")
		if h == "" {
			continue
		}
		if ip := net.ParseIP(h); ip != nil {
			if !slices.ContainsFunc(ips, ip.Equal) {
				ips = append(ips, ip)
			}
			continue
		}
		if !validDNSName(h) {
			return tls.Certificate{}, fmt.Errorf("%w: hosts[%d]: %q is neither an IP address nor a DNS name", ErrBadRequest, i-skip, h)
		}
		h = strings.ToLower(h)
		if !slices.Contains(names, h) {
			names = append(names, h)
		}
	}
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: cn, OrganizationalUnit: []string{ou}},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    names,
		IPAddresses: ips,
	}
	if kt == keyP256 {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	return ca.issue(tmpl, ttl, kt)
}

// IssueClientCert issues a client certificate with common name cn and, when
// ou is not empty, organizational unit ou, valid for ttl. It cannot be used
// to serve TLS.
func (ca *CA) IssueClientCert(cn, ou string, ttl time.Duration) (tls.Certificate, error) {
	if cn == "" {
		return tls.Certificate{}, fmt.Errorf("%w: cn: must not be empty", ErrBadRequest)
	}
	subject := pkix.Name{CommonName: cn}
	if ou != "" {
		subject.OrganizationalUnit = []string{ou}
	}
	tmpl := &x509.Certificate{
		Subject:     subject,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	return ca.issue(tmpl, ttl, keyEd25519)
}

// issue fills in the parts every leaf shares, signs tmpl with the CA and
// returns it with its new private key.
func (ca *CA) issue(tmpl *x509.Certificate, ttl time.Duration, kt keyType) (tls.Certificate, error) {
	if ttl <= 0 {
		return tls.Certificate{}, fmt.Errorf("%w: ttl: must be positive, got %s", ErrBadRequest, ttl)
	}
	var (
		pub  crypto.PublicKey
		priv crypto.Signer
	)
	switch kt {
	case keyP256:
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("generating key: %w", err)
		}
		pub, priv = k.Public(), k
	default:
		p, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			return tls.Certificate{}, fmt.Errorf("generating key: %w", err)
		}
		pub, priv = p, k
	}
	// 128 random bits make serials unique without a counter shared among
	// servers.
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("generating serial: %w", err)
	}
	now := time.Now()
	tmpl.SerialNumber = serial
	tmpl.NotBefore = now.Add(-clockSkew)
	tmpl.NotAfter = now.Add(ttl)
	if tmpl.NotAfter.After(ca.cert.NotAfter) {
		tmpl.NotAfter = ca.cert.NotAfter
	}
	tmpl.BasicConstraintsValid = true
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, pub, ca.key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("signing certificate for %q: %w", tmpl.Subject.CommonName, err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("parsing certificate for %q: %w", tmpl.Subject.CommonName, err)
	}
	return tls.Certificate{
		Certificate: [][]byte{der, ca.cert.Raw},
		PrivateKey:  priv,
		Leaf:        leaf,
	}, nil
}

// validDNSName reports whether s is a plausible DNS name for a SAN: labels
// of letters, digits and hyphens, an optional leading "*." wildcard.
func validDNSName(s string) bool {
	s = strings.TrimPrefix(s, "*.")
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if len(label) == 0 || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}
