package api

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
)

// ParseTrustedKeys reads the PEM "PUBLIC KEY" blocks of data, the keys a
// release signature may be made with: ECDSA P-256 (cosign's keys,
// `openssl ec -pubout`) or Ed25519.
func ParseTrustedKeys(data []byte) ([]crypto.PublicKey, error) {
	var keys []crypto.PublicKey
	for n := 1; ; n++ {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			break
		}
		if b.Type != "PUBLIC KEY" {
			return nil, fmt.Errorf("PEM block %d is %q, want PUBLIC KEY", n, b.Type)
		}
		k, err := x509.ParsePKIXPublicKey(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("PEM block %d: %w", n, err)
		}
		if err := CheckTrustedKey(k); err != nil {
			return nil, fmt.Errorf("PEM block %d: %w", n, err)
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, errors.New("no PEM PUBLIC KEY block")
	}
	return keys, nil
}

// CheckTrustedKey refuses a key of a kind release signatures are not
// made with.
func CheckTrustedKey(k crypto.PublicKey) error {
	switch k := k.(type) {
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return fmt.Errorf("an ECDSA key on %s; outpost takes P-256, as cosign makes", k.Curve.Params().Name)
		}
		return nil
	case ed25519.PublicKey:
		return nil
	}
	name := fmt.Sprintf("%T", k)
	if _, ok := k.(*rsa.PublicKey); ok {
		name = "an RSA key"
	} else {
		name = "a " + name + " key"
	}
	return fmt.Errorf("%s; outpost takes ECDSA P-256 and Ed25519 keys", name)
}
