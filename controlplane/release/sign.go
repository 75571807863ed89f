package release

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// ParsePrivateKey reads a PEM private key (PKCS #8 "PRIVATE KEY", or
// SEC 1 "EC PRIVATE KEY" as `openssl ecparam -genkey` writes) for Sign.
// cosign's own encrypted keys are not read: sign with cosign and attach
// its signature with AddSignature.
func ParsePrivateKey(data []byte) (crypto.Signer, error) {
	b, _ := pem.Decode(data)
	if b == nil {
		return nil, errors.New("no PEM block")
	}
	var k any
	var err error
	switch b.Type {
	case "ENCRYPTED PRIVATE KEY":
		return nil, errors.New("an encrypted private key: outpost reads unencrypted PEM keys (openssl pkey -in KEY -out PLAIN), or sign with your tool and attach the signature")
	case "PRIVATE KEY":
		k, err = x509.ParsePKCS8PrivateKey(b.Bytes)
	case "EC PRIVATE KEY":
		k, err = x509.ParseECPrivateKey(b.Bytes)
	default:
		return nil, fmt.Errorf("a PEM %q block; want PRIVATE KEY or EC PRIVATE KEY (a cosign key: sign with cosign sign-blob and attach the signature)", b.Type)
	}
	if err != nil {
		return nil, err
	}
	s, ok := k.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("a %T key cannot sign", k)
	}
	if err := api.CheckTrustedKey(s.Public()); err != nil {
		return nil, err
	}
	return s, nil
}

// SignBytes signs data as cosign sign-blob does for the key's type
// (ECDSA over SHA-256, ASN.1 DER; Ed25519 over the bytes), base64
// encoded.
func SignBytes(key crypto.Signer, data []byte) ([]byte, error) {
	var sig []byte
	var err error
	switch key.Public().(type) {
	case ed25519.PublicKey:
		sig, err = key.Sign(rand.Reader, data, crypto.Hash(0))
	default:
		sum := sha256.Sum256(data)
		sig, err = key.Sign(rand.Reader, sum[:], crypto.SHA256)
	}
	if err != nil {
		return nil, err
	}
	return []byte(base64.StdEncoding.EncodeToString(sig)), nil
}

// verifyOne reports whether sig (base64 text or raw) is key's over data.
func verifyOne(key crypto.PublicKey, data, sig []byte) bool {
	raw := sig
	if dec, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(sig))); err == nil {
		raw = dec
	}
	switch k := key.(type) {
	case *ecdsa.PublicKey:
		sum := sha256.Sum256(data)
		return ecdsa.VerifyASN1(k, sum[:], raw)
	case ed25519.PublicKey:
		return len(raw) == ed25519.SignatureSize && ed25519.Verify(k, data, raw)
	}
	return false
}

// Verify checks that one of the payload's signatures is by one of keys.
// Open has already checked every digest, so a verified manifest vouches
// for every blob it names.
func (p *Payload) Verify(keys []crypto.PublicKey) error {
	if len(p.Signatures) == 0 {
		return fmt.Errorf("%w: %s", ErrUnsigned, p.Digest)
	}
	if p.Verified(keys) == 0 {
		return fmt.Errorf("%w: %s has %d signature(s), checked against %d key(s)", ErrSignature, p.Digest, len(p.Signatures), len(keys))
	}
	return nil
}

// Verified counts the payload's signatures that one of keys verifies.
func (p *Payload) Verified(keys []crypto.PublicKey) int {
	n := 0
	for _, sig := range p.Signatures {
		for _, k := range keys {
			if verifyOne(k, p.manifest, sig) {
				n++
				break
			}
		}
	}
	return n
}

// AddSignature stores sig (as cosign or openssl printed it for the
// payload's manifest) in the layout directory dir, as an OCI referrer of
// the release manifest. The signature is checked against nothing here:
// Verify does that with the cluster's keys.
func AddSignature(dir string, sig []byte) error {
	p, err := Open(dir)
	if err != nil {
		return err
	}
	if _, ok := p.src.(dirSource); !ok {
		return fmt.Errorf("%s is an archive: signatures are added to a layout directory (sign with --sign-key when building, or sign a --to-dir payload and archive it)", dir)
	}
	if len(bytes.TrimSpace(sig)) == 0 {
		return fmt.Errorf("%w: an empty signature", ErrInvalid)
	}
	for _, have := range p.Signatures {
		if bytes.Equal(bytes.TrimSpace(have), bytes.TrimSpace(sig)) {
			return fmt.Errorf("%w: the payload has this signature already", ErrInvalid)
		}
	}
	w := &layoutWriter{dir: dir}
	empty, err := w.blob(mediaEmpty, []byte("{}"), nil)
	if err != nil {
		return err
	}
	layer, err := w.blob(mediaSignature, sig, nil)
	if err != nil {
		return err
	}
	subject, err := releaseDescriptor(dir)
	if err != nil {
		return err
	}
	m := ocispec.Manifest{MediaType: ocispec.MediaTypeImageManifest, ArtifactType: SignatureArtifactType, Config: empty, Layers: []ocispec.Descriptor{layer}, Subject: &subject}
	m.SchemaVersion = 2
	mb, err := json.Marshal(m)
	if err != nil {
		return err
	}
	md, err := w.blob(ocispec.MediaTypeImageManifest, mb, nil)
	if err != nil {
		return err
	}
	md.ArtifactType = SignatureArtifactType
	ib, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		return err
	}
	var idx ocispec.Index
	if err := json.Unmarshal(ib, &idx); err != nil {
		return err
	}
	return writeIndex(dir, append(idx.Manifests, md))
}

// Sign signs the layout directory's release with key and stores the
// signature (AddSignature).
func Sign(dir string, key crypto.Signer) error {
	p, err := Open(dir)
	if err != nil {
		return err
	}
	sig, err := SignBytes(key, p.manifest)
	if err != nil {
		return err
	}
	return AddSignature(dir, sig)
}

func releaseDescriptor(dir string) (ocispec.Descriptor, error) {
	ib, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if err != nil {
		return ocispec.Descriptor{}, err
	}
	var idx ocispec.Index
	if err := json.Unmarshal(ib, &idx); err != nil {
		return ocispec.Descriptor{}, err
	}
	for _, d := range idx.Manifests {
		if d.ArtifactType == ArtifactType {
			return ocispec.Descriptor{MediaType: d.MediaType, Digest: d.Digest, Size: d.Size, ArtifactType: d.ArtifactType}, nil
		}
	}
	return ocispec.Descriptor{}, fmt.Errorf("%w: no release manifest in %s", ErrInvalid, dir)
}
