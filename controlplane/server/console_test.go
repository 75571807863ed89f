package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/console"
	"github.com/outpost-edge/outpost/internal/realtest"
)

// TestConsoleServedWithoutToken: the console's files are served to anyone
// (they hold no cluster data, issue 15 item 3), with the console's
// headers, while every API path beside them still needs a token.
func TestConsoleServedWithoutToken(t *testing.T) {
	s := startServer(t, testConfig(t))
	anon := newTC(t, s, "")
	for _, p := range []string{"/ui/", "/ui/app.js", "/ui/app.css"} {
		r := anon.do("GET", p, nil)
		if r.code != http.StatusOK {
			t.Fatalf("GET %s without a token: %d %s, want 200", p, r.code, r)
		}
		if got := r.header.Get("Content-Security-Policy"); got != console.ContentSecurityPolicy {
			t.Errorf("GET %s: CSP %q", p, got)
		}
		if r.header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s: no X-Content-Type-Options: nosniff", p)
		}
	}
	if r := anon.as("bogus.token").do("GET", "/ui/", nil); r.code != http.StatusOK {
		t.Errorf("GET /ui/ with a bad token: %d, want 200 (the files ignore tokens)", r.code)
	}
	if r := anon.do("GET", "/ui/nope.js", nil); r.code != http.StatusNotFound {
		t.Errorf("GET /ui/nope.js: %d, want 404", r.code)
	}
	if r := anon.do("POST", "/ui/app.js", "x"); r.code != http.StatusMethodNotAllowed {
		t.Errorf("POST /ui/app.js: %d, want 405", r.code)
	}
	// The API and paths that merely start like the console's still need
	// a token.
	for _, p := range []string{"/api/v1/nodes", "/apis/outpost.io/v1/raft/peers", "/uix", "/api/v1/namespaces/default/pods"} {
		if r := anon.do("GET", p, nil); r.code != http.StatusUnauthorized {
			t.Errorf("GET %s without a token: %d %s, want 401", p, r.code, r)
		}
	}
	adm := admin(t, s)
	if r := adm.do("GET", "/api/v1/nodes", nil); r.code != http.StatusOK {
		t.Errorf("GET /api/v1/nodes as admin: %d %s", r.code, r)
	}
	if r := adm.do("GET", "/ui/", nil); r.code != http.StatusOK || !strings.Contains(r.String(), "outpost console") {
		t.Errorf("GET /ui/ as admin: %d", r.code)
	}
}

// --tls-cert-file and --tls-private-key-file (issue 15 item 3): a site's
// own certificate is what web browsers get, which cannot use the
// cluster's ed25519 one, so the console opens without a warning; Go
// clients still get the cluster's. A real handshake by openssl offering
// no ed25519, as a browser, sees the site's certificate. Bad files stop
// the server naming the flags.
func TestBrowserCertFile(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "console.crt"), filepath.Join(dir, "console.key")
	writeSelfSigned(t, "console.example", certFile, keyFile)
	cfg := testConfig(t)
	cfg.BrowserCertFile, cfg.BrowserKeyFile = certFile, keyFile
	s := startServer(t, cfg)

	all := []tls.SignatureScheme{tls.Ed25519, tls.ECDSAWithP256AndSHA256, tls.PSSWithSHA256}
	hello := func(schemes []tls.SignatureScheme) *tls.ClientHelloInfo {
		return &tls.ClientHelloInfo{SignatureSchemes: schemes, SupportedVersions: []uint16{tls.VersionTLS13},
			CipherSuites: []uint16{tls.TLS_AES_128_GCM_SHA256}, SupportedCurves: []tls.CurveID{tls.X25519}}
	}
	got, err := s.httpSrv.TLSConfig.GetCertificate(hello(all[1:]))
	if err != nil {
		t.Fatal(err)
	}
	if got.Leaf == nil || got.Leaf.Subject.CommonName != "console.example" {
		t.Errorf("a browser got %v, want the site's console.example", got.Leaf.Subject)
	}
	if got, err = s.httpSrv.TLSConfig.GetCertificate(hello(all)); err != nil || got.Leaf.Subject.CommonName == "console.example" {
		t.Errorf("a Go client got the site's certificate (%v), want the cluster's", err)
	}

	if _, err := exec.LookPath("openssl"); err != nil {
		realtest.Require(t, "openssl is not installed (apt-get install openssl)")
	}
	addr := strings.TrimPrefix(s.URL(), "https://")
	out, err := exec.Command("sh", "-c", "openssl s_client -connect "+addr+" -sigalgs ECDSA+SHA256:RSA-PSS+SHA256 </dev/null 2>/dev/null | openssl x509 -noout -subject").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "console.example") {
		t.Errorf("openssl without ed25519 saw %q (%v), want console.example", out, err)
	}

	cfg = testConfig(t)
	cfg.BrowserCertFile, cfg.BrowserKeyFile = certFile, filepath.Join(dir, "missing.key")
	if _, err := Start(t.Context(), cfg); err == nil || !strings.Contains(err.Error(), "--tls-private-key-file") {
		t.Errorf("a missing key file: %v, want an error naming --tls-private-key-file", err)
	}
	cfg = testConfig(t)
	cfg.BrowserCertFile = certFile
	if _, err := Start(t.Context(), cfg); !errors.Is(err, ErrConfig) {
		t.Errorf("a certificate without its key: %v, want ErrConfig", err)
	}
}

// writeSelfSigned writes a self-signed P-256 certificate for cn and
// 127.0.0.1, and its key, in PEM.
func writeSelfSigned(t *testing.T, cn, certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
}
