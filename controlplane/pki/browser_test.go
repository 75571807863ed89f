package pki

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/tls"
	"crypto/x509"
	"slices"
	"testing"
	"time"
)

// TestServeWithFallback: a client that offers ed25519 (Go's) gets the
// ed25519 server certificate; one that does not (every web browser, for
// the console) gets the P-256 one, which can serve but not authenticate a
// client.
func TestServeWithFallback(t *testing.T) {
	ca := mustCA(t, testSecret)
	main, err := NewRenewing(func() (tls.Certificate, error) { return ca.IssueServerCert("s1", nil, time.Hour) })
	if err != nil {
		t.Fatal(err)
	}
	browser, err := NewRenewing(func() (tls.Certificate, error) { return ca.IssueBrowserServerCert("s1", nil, time.Hour) })
	if err != nil {
		t.Fatal(err)
	}
	cfg := ServerTLSConfig(ca, *main.Current())
	main.Use(cfg)
	main.ServeWithFallback(cfg, browser)

	all := []tls.SignatureScheme{tls.Ed25519, tls.ECDSAWithP256AndSHA256, tls.PSSWithSHA256}
	noEd := slices.DeleteFunc(slices.Clone(all), func(s tls.SignatureScheme) bool { return s == tls.Ed25519 })
	for _, c := range []struct {
		name    string
		schemes []tls.SignatureScheme
		ed      bool
	}{{"go client", all, true}, {"browser", noEd, false}} {
		hello := &tls.ClientHelloInfo{SignatureSchemes: c.schemes, SupportedVersions: []uint16{tls.VersionTLS13},
			CipherSuites: []uint16{tls.TLS_AES_128_GCM_SHA256}, SupportedCurves: []tls.CurveID{tls.X25519}}
		got, err := cfg.GetCertificate(hello)
		if err != nil {
			t.Fatal(err)
		}
		_, isEd := got.PrivateKey.(ed25519.PrivateKey)
		_, isP256 := got.PrivateKey.(*ecdsa.PrivateKey)
		if isEd != c.ed || isP256 == c.ed {
			t.Errorf("%s: got a %T key, want ed25519 %v", c.name, got.PrivateKey, c.ed)
		}
		if err := hello.SupportsCertificate(got); err != nil {
			t.Errorf("%s: served a certificate it cannot use: %v", c.name, err)
		}
	}
	leaf := browser.Current().Leaf
	if slices.Contains(leaf.ExtKeyUsage, x509.ExtKeyUsageClientAuth) {
		t.Error("the browser certificate can authenticate a client")
	}
}
