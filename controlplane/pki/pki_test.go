package pki

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"testing"
	"time"
)

const (
	testSecret  = "0123456789abcdefghijklmnopqrstuvwxyz-secret"
	otherSecret = "a-completely-different-cluster-secret-value"
)

func mustCA(t testing.TB, secret string) *CA {
	t.Helper()
	ca, err := DeriveCA(secret)
	if err != nil {
		t.Fatalf("DeriveCA: %v", err)
	}
	return ca
}

// handshake runs a TLS handshake between the two configurations over an
// in-memory pipe and returns each side's error. The client then reads until
// the server closes, so a refusal the server sends after the client's
// Finished (TLS 1.3 client authentication) reaches it, and a clean close
// counts as success.
func handshake(t testing.TB, server, client *tls.Config) (serverErr, clientErr error) {
	t.Helper()
	sc, cc := net.Pipe()
	srv := tls.Server(sc, server)
	cli := tls.Client(cc, client)
	done := make(chan error, 1)
	go func() {
		err := srv.Handshake()
		srv.Close()
		done <- err
	}()
	clientErr = cli.Handshake()
	if clientErr == nil {
		var b [1]byte
		if _, err := cli.Read(b[:]); !errors.Is(err, io.EOF) {
			clientErr = err
		}
	}
	cli.Close()
	return <-done, clientErr
}

func TestDeriveCADeterministic(t *testing.T) {
	a := mustCA(t, testSecret)
	b := mustCA(t, testSecret)
	if !bytes.Equal(a.CertPEM(), b.CertPEM()) {
		t.Fatal("two derivations from the same secret gave different CA certificates")
	}
	if !bytes.Equal(a.Certificate().Raw, b.Certificate().Raw) {
		t.Fatal("two derivations gave different DER")
	}
	if a.Hash() != b.Hash() {
		t.Fatalf("hash differs: %s vs %s", a.Hash(), b.Hash())
	}
	c := mustCA(t, otherSecret)
	if c.Hash() == a.Hash() || bytes.Equal(c.CertPEM(), a.CertPEM()) {
		t.Fatal("different secrets derived the same CA")
	}
	cert := a.Certificate()
	if cert.Subject.CommonName != "outpost cluster CA" || !cert.IsCA {
		t.Fatalf("CA subject %q IsCA %v", cert.Subject.CommonName, cert.IsCA)
	}
	if !cert.NotBefore.Equal(caNotBefore) || !cert.NotAfter.Equal(caNotAfter) {
		t.Fatalf("validity %s..%s, want fixed %s..%s", cert.NotBefore, cert.NotAfter, caNotBefore, caNotAfter)
	}
	if !strings.HasPrefix(a.Hash(), "sha256:") || len(a.Hash()) != len("sha256:")+64 {
		t.Fatalf("hash %q is not sha256:<64 hex>", a.Hash())
	}
	if Hash(cert) != a.Hash() {
		t.Fatal("Hash(cert) differs from (*CA).Hash")
	}
}

func TestDeriveCASecretLength(t *testing.T) {
	short := strings.Repeat("x", MinSecretLen-1)
	_, err := DeriveCA(short)
	if !errors.Is(err, ErrShortSecret) {
		t.Fatalf("short secret: err = %v, want ErrShortSecret", err)
	}
	if strings.Contains(err.Error(), short) {
		t.Fatal("error echoes the secret")
	}
	if _, err := DeriveCA(strings.Repeat("x", MinSecretLen)); err != nil {
		t.Fatalf("secret of exactly %d characters refused: %v", MinSecretLen, err)
	}
}

func TestCrossDerivationVerifies(t *testing.T) {
	issuer := mustCA(t, testSecret)
	verifier := mustCA(t, testSecret)
	cert, err := issuer.IssueServerCert("s1", []string{"10.1.2.3", "edge-1.example.com", "[fd00::5]:7001"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"localhost", "127.0.0.1", "::1", "10.1.2.3", "edge-1.example.com", "fd00::5", ServerName} {
		_, err := cert.Leaf.Verify(x509.VerifyOptions{
			Roots:     verifier.Pool(),
			DNSName:   name,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		})
		if err != nil {
			t.Errorf("verify as %q against the other derivation: %v", name, err)
		}
	}
	if _, err := cert.Leaf.Verify(x509.VerifyOptions{Roots: verifier.Pool(), DNSName: "other.example.com"}); err == nil {
		t.Error("certificate verified for a host it was not issued for")
	}
	if _, err := cert.Leaf.Verify(x509.VerifyOptions{Roots: mustCA(t, otherSecret).Pool()}); err == nil {
		t.Error("certificate verified against another cluster's CA")
	}

	// A real mutual-TLS handshake between servers whose CAs were derived
	// separately.
	cert2, err := verifier.IssueServerCert("s2", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	srvCfg, _ := PeerTLSConfigs(issuer, cert)
	_, cliCfg := PeerTLSConfigs(verifier, cert2)
	if se, ce := handshake(t, srvCfg, cliCfg); se != nil || ce != nil {
		t.Fatalf("peer handshake: server %v, client %v", se, ce)
	}
}

func TestIssueServerCert(t *testing.T) {
	ca := mustCA(t, testSecret)
	cert, err := ca.IssueServerCert("s1", []string{"Node.Example.com.", "10.0.0.1", "10.0.0.1", "localhost", ""}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	leaf := cert.Leaf
	if leaf.Subject.CommonName != "s1" || !slices.Equal(leaf.Subject.OrganizationalUnit, []string{ServerOU}) {
		t.Errorf("subject %v", leaf.Subject)
	}
	if !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageServerAuth) || !slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageClientAuth) {
		t.Errorf("ext key usage %v, want server and client auth", leaf.ExtKeyUsage)
	}
	if want := []string{"localhost", ServerName, "node.example.com"}; !slices.Equal(leaf.DNSNames, want) {
		t.Errorf("DNS names %v, want %v", leaf.DNSNames, want)
	}
	var ips []string
	for _, ip := range leaf.IPAddresses {
		ips = append(ips, ip.String())
	}
	if want := []string{"127.0.0.1", "::1", "10.0.0.1"}; !slices.Equal(ips, want) {
		t.Errorf("IPs %v, want %v", ips, want)
	}
	if len(cert.Certificate) != 2 || !bytes.Equal(cert.Certificate[1], ca.Certificate().Raw) {
		t.Error("chain does not carry the CA certificate")
	}
	if d := time.Until(leaf.NotAfter); d > time.Hour || d < 59*time.Minute {
		t.Errorf("NotAfter in %s, want about 1h", d)
	}
	if leaf.IsCA {
		t.Error("leaf is a CA")
	}
	other, err := ca.IssueServerCert("s2", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if other.Leaf.SerialNumber.Cmp(leaf.SerialNumber) == 0 {
		t.Error("two certificates share a serial")
	}

	for _, tc := range []struct {
		name  string
		id    string
		hosts []string
		ttl   time.Duration
		want  string
	}{
		{"empty id", "", nil, time.Hour, "id"},
		{"bad host", "s1", []string{"ok.example", "bad host!"}, time.Hour, "hosts[1]"},
		{"zero ttl", "s1", nil, 0, "ttl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ca.IssueServerCert(tc.id, tc.hosts, tc.ttl)
			if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrBadRequest naming %q", err, tc.want)
			}
		})
	}
}

func TestIssueClientCert(t *testing.T) {
	ca := mustCA(t, testSecret)
	cert, err := ca.IssueClientCert("system:node:n1", "outpost-node", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if cert.Leaf.Subject.CommonName != "system:node:n1" || !slices.Equal(cert.Leaf.Subject.OrganizationalUnit, []string{"outpost-node"}) {
		t.Errorf("subject %v", cert.Leaf.Subject)
	}
	if !slices.Equal(cert.Leaf.ExtKeyUsage, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}) {
		t.Errorf("ext key usage %v, want client auth only", cert.Leaf.ExtKeyUsage)
	}
	if _, err := ca.IssueClientCert("", "", time.Hour); !errors.Is(err, ErrBadRequest) {
		t.Errorf("empty cn: err = %v", err)
	}
}

// TestPeerRefusals runs real handshakes in which one side must be refused.
func TestPeerRefusals(t *testing.T) {
	ca := mustCA(t, testSecret)
	foreign := mustCA(t, otherSecret)
	serverCert, err := ca.IssueServerCert("s1", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	agentCert, err := ca.IssueClientCert("agent", "outpost-node", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// A client certificate that has both EKUs but not the server OU.
	notServer, err := ca.issue(&x509.Certificate{
		Subject:     pkixName("impostor", "outpost-node"),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    []string{ServerName},
	}, time.Hour, keyEd25519)
	if err != nil {
		t.Fatal(err)
	}
	foreignServer, err := foreign.IssueServerCert("x1", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	peerSrv, peerCli := PeerTLSConfigs(ca, serverCert)

	clientWith := func(certs ...tls.Certificate) *tls.Config {
		return &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: ca.Pool(), ServerName: ServerName, Certificates: certs}
	}

	t.Run("server refuses client without server OU", func(t *testing.T) {
		se, _ := handshake(t, peerSrv, clientWith(notServer))
		if !errors.Is(se, ErrNotPeer) {
			t.Fatalf("server err = %v, want ErrNotPeer", se)
		}
	})
	t.Run("server refuses agent certificate", func(t *testing.T) {
		se, _ := handshake(t, peerSrv, clientWith(agentCert))
		if !errors.Is(se, ErrNotPeer) {
			t.Fatalf("server err = %v, want ErrNotPeer", se)
		}
	})
	t.Run("server refuses client without certificate", func(t *testing.T) {
		se, ce := handshake(t, peerSrv, clientWith())
		if se == nil || ce == nil {
			t.Fatalf("handshake succeeded without a client certificate: server %v client %v", se, ce)
		}
	})
	t.Run("server refuses other cluster's server", func(t *testing.T) {
		se, _ := handshake(t, peerSrv, clientWith(foreignServer))
		if se == nil {
			t.Fatal("server accepted a certificate of another cluster's CA")
		}
	})
	t.Run("client refuses server without server OU", func(t *testing.T) {
		srv := &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{notServer}}
		_, ce := handshake(t, srv, peerCli)
		if !errors.Is(ce, ErrNotPeer) {
			t.Fatalf("client err = %v, want ErrNotPeer", ce)
		}
	})
	t.Run("client refuses other cluster's server", func(t *testing.T) {
		srv := &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{foreignServer}}
		_, ce := handshake(t, srv, peerCli)
		if ce == nil {
			t.Fatal("client accepted another cluster's server")
		}
	})
	t.Run("TLS 1.2 refused", func(t *testing.T) {
		cli := peerCli.Clone()
		cli.MinVersion, cli.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
		if se, ce := handshake(t, peerSrv, cli); se == nil && ce == nil {
			t.Fatal("TLS 1.2 handshake succeeded")
		}
	})
}

func TestServerTLSConfig(t *testing.T) {
	ca := mustCA(t, testSecret)
	serverCert, err := ca.IssueServerCert("s1", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	srv := ServerTLSConfig(ca, serverCert)
	cli, err := ClientTLSConfig(ca.CertPEM())
	if err != nil {
		t.Fatal(err)
	}
	cli.ServerName = "localhost"
	if se, ce := handshake(t, srv, cli); se != nil || ce != nil {
		t.Fatalf("client without certificate: server %v client %v", se, ce)
	}
	agent, err := ca.IssueClientCert("agent", "outpost-node", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	withCert := cli.Clone()
	withCert.Certificates = []tls.Certificate{agent}
	if se, ce := handshake(t, srv, withCert); se != nil || ce != nil {
		t.Fatalf("client with cluster certificate: server %v client %v", se, ce)
	}
	foreignAgent, err := mustCA(t, otherSecret).IssueClientCert("agent", "", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	withForeign := cli.Clone()
	withForeign.Certificates = []tls.Certificate{foreignAgent}
	if se, _ := handshake(t, srv, withForeign); se == nil {
		t.Fatal("API server accepted a client certificate of another CA")
	}
	wrongName := cli.Clone()
	wrongName.ServerName = "not-in-the-cert.example"
	if _, ce := handshake(t, srv, wrongName); ce == nil {
		t.Fatal("client accepted a server name not in the certificate")
	}
}

func TestClientTLSConfigBadPEM(t *testing.T) {
	for _, in := range [][]byte{nil, []byte("garbage"), []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")} {
		if _, err := ClientTLSConfig(in); !errors.Is(err, ErrNoCertificate) {
			t.Errorf("ClientTLSConfig(%q) err = %v, want ErrNoCertificate", in, err)
		}
	}
}

func TestPinnedTLSConfig(t *testing.T) {
	ca := mustCA(t, testSecret)
	serverCert, err := ca.IssueServerCert("s1", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	srv := ServerTLSConfig(ca, serverCert)

	if _, err := PinnedTLSConfig(strings.ToUpper(ca.Hash())); err == nil {
		t.Fatal("pin with upper-case prefix accepted")
	}
	good, err := PinnedTLSConfig("sha256:" + strings.ToUpper(ca.Hash()[7:]))
	if err != nil {
		t.Fatal(err)
	}
	if se, ce := handshake(t, srv, good); se != nil || ce != nil {
		t.Fatalf("pinned handshake: server %v client %v", se, ce)
	}

	bad, err := PinnedTLSConfig(mustCA(t, otherSecret).Hash())
	if err != nil {
		t.Fatal(err)
	}
	if _, ce := handshake(t, srv, bad); !errors.Is(ce, ErrPinMismatch) {
		t.Fatalf("wrong pin: client err = %v, want ErrPinMismatch", ce)
	}

	// A server of another cluster that carries our CA certificate in its
	// chain must still fail: the pinned CA did not sign its leaf.
	foreign, err := mustCA(t, otherSecret).IssueServerCert("x", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	foreign.Certificate[1] = ca.Certificate().Raw
	fsrv := &tls.Config{MinVersion: tls.VersionTLS13, Certificates: []tls.Certificate{foreign}}
	if _, ce := handshake(t, fsrv, good); !errors.Is(ce, ErrPinMismatch) {
		t.Fatalf("forged chain: client err = %v, want ErrPinMismatch", ce)
	}

	for _, pin := range []string{"", "sha256:", "sha256:zz", "md5:" + strings.Repeat("0", 64), ca.Hash()[7:]} {
		if _, err := PinnedTLSConfig(pin); !errors.Is(err, ErrPinMismatch) {
			t.Errorf("PinnedTLSConfig(%q) err = %v", pin, err)
		}
	}
}

func TestGenerateSecret(t *testing.T) {
	a, b := GenerateSecret(), GenerateSecret()
	if a == b {
		t.Fatal("two secrets are equal")
	}
	if len(a) < 40 {
		t.Fatalf("secret has %d characters, want 40+", len(a))
	}
	for _, c := range a {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			t.Fatalf("secret %q has a character that is not URL-safe: %q", a, c)
		}
	}
	if _, err := DeriveCA(a); err != nil {
		t.Fatalf("generated secret refused: %v", err)
	}
}

// BenchmarkHandshake compares a full mutual-TLS peer handshake with ed25519
// and ECDSA P-256 leaves; the CA is ed25519 in both.
func BenchmarkHandshake(b *testing.B) {
	ca := mustCA(b, testSecret)
	for _, kt := range []struct {
		name string
		kt   keyType
	}{{"ed25519", keyEd25519}, {"p256", keyP256}} {
		b.Run(kt.name, func(b *testing.B) {
			issue := func(id string) tls.Certificate {
				c, err := ca.issue(&x509.Certificate{
					Subject:     pkixName(id, ServerOU),
					ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
					DNSNames:    []string{ServerName},
				}, time.Hour, kt.kt)
				if err != nil {
					b.Fatal(err)
				}
				return c
			}
			srv, _ := PeerTLSConfigs(ca, issue("s1"))
			_, cli := PeerTLSConfigs(ca, issue("s2"))
			srv.SessionTicketsDisabled = true
			for b.Loop() {
				if se, ce := handshake(b, srv, cli); se != nil || ce != nil {
					b.Fatal(se, ce)
				}
			}
		})
	}
}

func pkixName(cn, ou string) pkix.Name {
	return pkix.Name{CommonName: cn, OrganizationalUnit: []string{ou}}
}

// A node's certificate names the node, carries NodeOU, serves its hosts,
// and is not accepted where a raft peer is expected.
func TestIssueNodeCert(t *testing.T) {
	ca := mustCA(t, testSecret)
	cert, err := ca.IssueNodeCert("edge-7", []string{"10.0.0.7", "edge-7.site.example"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	leaf := cert.Leaf
	if leaf.Subject.CommonName != "edge-7" || !slices.Equal(leaf.Subject.OrganizationalUnit, []string{NodeOU}) {
		t.Fatalf("subject = %v", leaf.Subject)
	}
	if err := leaf.VerifyHostname("10.0.0.7"); err != nil {
		t.Errorf("does not serve its IP: %v", err)
	}
	if err := leaf.VerifyHostname("edge-7"); err != nil {
		t.Errorf("does not serve its node name: %v", err)
	}
	if err := leaf.VerifyHostname("127.0.0.1"); err == nil {
		t.Error("a node certificate must not serve loopback by default")
	}
	if err := verifyPeerOU(tls.ConnectionState{PeerCertificates: []*x509.Certificate{leaf}}); err == nil {
		t.Error("a node certificate passed the raft peer check")
	}
	if _, err := ca.IssueNodeCert("", nil, time.Hour); !errors.Is(err, ErrBadRequest) {
		t.Errorf("empty name: %v", err)
	}
	if _, err := ca.IssueNodeCert("n", []string{"bad host!"}, time.Hour); !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "hosts[0]") {
		t.Errorf("bad host: %v", err)
	}
}
