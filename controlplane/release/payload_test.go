package release

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
)

const deployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: edge-dns
  namespace: kube-system
spec:
  replicas: 2
  selector:
    matchLabels: {app: edge-dns}
  template:
    metadata:
      labels: {app: edge-dns}
    spec:
      containers:
      - name: dns
        image: registry.example/edge-dns@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
`

const namespace = `apiVersion: v1
kind: Namespace
metadata:
  name: kube-system
`

func testInput(t *testing.T) Input {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "outpost")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho v2\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	img := ImageTag{Name: "edge-dns"}
	img.From.Kind, img.From.Name = "DockerImage", "registry.example/edge-dns@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	return Input{
		Metadata:  Metadata{Version: "1.2.0", Previous: []string{"1.1.0"}, Metadata: map[string]string{"url": "https://example.com/1.2.0"}},
		Manifests: []File{{Name: "0000_50_dns_01-deployment.yaml", Data: []byte(deployment)}, {Name: "0000_10_dns_00-namespace.yaml", Data: []byte(namespace)}},
		Images:    []ImageTag{img},
		Binaries:  map[string]string{"linux/amd64": bin},
		Created:   time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC),
	}
}

func ecKey(t *testing.T) (*ecdsa.PrivateKey, []crypto.PublicKey) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k, []crypto.PublicKey{&k.PublicKey}
}

// A payload built, signed and opened again: the same metadata, manifests,
// images and binary, its digest the manifest's, verified by the signer's
// key and by no other; as a tar archive too (UPD-3, UPD-4).
func TestBuildSignOpenVerify(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "payload")
	digest, err := Build(dir, testInput(t))
	if err != nil {
		t.Fatal(err)
	}
	p, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(p.ManifestBytes())
	if p.Digest != digest || "sha256:"+hex.EncodeToString(sum[:]) != digest {
		t.Errorf("digest %s, Build said %s, manifest hashes to %x", p.Digest, digest, sum)
	}
	if p.Metadata.Version != "1.2.0" || p.Metadata.Kind != MetadataKind || !slices.Equal(p.Metadata.Previous, []string{"1.1.0"}) {
		t.Errorf("metadata %+v", p.Metadata)
	}
	if len(p.Manifests) != 2 || p.Manifests[0].Name != "0000_10_dns_00-namespace.yaml" || string(p.Manifests[1].Data) != deployment {
		t.Errorf("manifests %v", p.Manifests)
	}
	if len(p.Images.Spec.Tags) != 1 || p.Images.Kind != "ImageStream" || len(p.Binaries) != 1 || p.Binaries[0].Platform != "linux/amd64" {
		t.Errorf("images %+v, binaries %+v", p.Images, p.Binaries)
	}
	if !p.Created.Equal(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)) {
		t.Errorf("created %v", p.Created)
	}
	k, keys := ecKey(t)
	if err := p.Verify(keys); !errors.Is(err, ErrUnsigned) {
		t.Errorf("unsigned payload: %v, want ErrUnsigned", err)
	}
	if err := Sign(dir, k); err != nil {
		t.Fatal(err)
	}
	p, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if p.Digest != digest {
		t.Errorf("signing changed the release's digest: %s, was %s", p.Digest, digest)
	}
	if err := p.Verify(keys); err != nil {
		t.Errorf("signed with the key: %v", err)
	}
	_, other := ecKey(t)
	if err := p.Verify(other); !errors.Is(err, ErrSignature) {
		t.Errorf("another key: %v, want ErrSignature", err)
	}

	var tarball bytes.Buffer
	if err := WriteTar(&tarball, dir); err != nil {
		t.Fatal(err)
	}
	tarPath := filepath.Join(t.TempDir(), "payload.tar")
	if err := os.WriteFile(tarPath, tarball.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	pt, err := Open(tarPath)
	if err != nil {
		t.Fatal(err)
	}
	if pt.Digest != digest || pt.Verify(keys) != nil {
		t.Errorf("from the tar: digest %s, verify %v", pt.Digest, pt.Verify(keys))
	}

	out := t.TempDir()
	if err := pt.Extract(out, true); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(out, "outpost-linux-amd64")); err != nil || string(b) != "#!/bin/sh\necho v2\n" {
		t.Errorf("extracted binary %q %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(out, "0000_50_dns_01-deployment.yaml")); err != nil || string(b) != deployment {
		t.Errorf("extracted manifest %q %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(out, "release-metadata")); err != nil || !strings.Contains(string(b), `"version": "1.2.0"`) {
		t.Errorf("extracted release-metadata %q %v", b, err)
	}
}

// A signature made outside outpost, as cosign sign-blob and openssl
// print it for the manifest (base64 DER for ECDSA; raw bytes as openssl
// writes them), and an Ed25519 key's, are attached and verified.
func TestExternalSignatures(t *testing.T) {
	for _, tc := range []struct {
		name string
		sign func(t *testing.T, manifest []byte) ([]byte, []crypto.PublicKey)
	}{
		{"cosign-style ECDSA base64", func(t *testing.T, m []byte) ([]byte, []crypto.PublicKey) {
			k, keys := ecKey(t)
			sum := sha256.Sum256(m)
			sig, err := ecdsa.SignASN1(rand.Reader, k, sum[:])
			if err != nil {
				t.Fatal(err)
			}
			return []byte(base64.StdEncoding.EncodeToString(sig) + "\n"), keys
		}},
		{"openssl dgst raw DER", func(t *testing.T, m []byte) ([]byte, []crypto.PublicKey) {
			k, keys := ecKey(t)
			sum := sha256.Sum256(m)
			r, s, err := ecdsa.Sign(rand.Reader, k, sum[:])
			if err != nil {
				t.Fatal(err)
			}
			der, err := asn1.Marshal(struct{ R, S any }{r, s})
			if err != nil {
				t.Fatal(err)
			}
			return der, keys
		}},
		{"Ed25519", func(t *testing.T, m []byte) ([]byte, []crypto.PublicKey) {
			pub, priv, err := ed25519.GenerateKey(rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			return []byte(base64.StdEncoding.EncodeToString(ed25519.Sign(priv, m))), []crypto.PublicKey{pub}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "payload")
			if _, err := Build(dir, testInput(t)); err != nil {
				t.Fatal(err)
			}
			p, err := Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			sig, keys := tc.sign(t, p.ManifestBytes())
			if err := AddSignature(dir, sig); err != nil {
				t.Fatal(err)
			}
			if p, err = Open(dir); err != nil {
				t.Fatal(err)
			}
			if err := p.Verify(keys); err != nil {
				t.Error(err)
			}
		})
	}
}

// Keys are read as a site writes them: PEM public keys, several in one
// file; a key of another curve or kind is refused with the reason.
func TestParseKeys(t *testing.T) {
	k, _ := ecKey(t)
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	var buf bytes.Buffer
	for _, key := range []any{&k.PublicKey, pub} {
		der, err := x509.MarshalPKIXPublicKey(key)
		if err != nil {
			t.Fatal(err)
		}
		_ = pem.Encode(&buf, &pem.Block{Type: "PUBLIC KEY", Bytes: der})
	}
	keys, err := api.ParseTrustedKeys(buf.Bytes())
	if err != nil || len(keys) != 2 {
		t.Fatalf("%d keys, %v", len(keys), err)
	}
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	der, _ := x509.MarshalPKIXPublicKey(&p384.PublicKey)
	if _, err := api.ParseTrustedKeys(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})); err == nil || !strings.Contains(err.Error(), "P-384") {
		t.Errorf("a P-384 key: %v, want a refusal naming the curve", err)
	}
	if _, err := api.ParseTrustedKeys([]byte("not a key")); err == nil {
		t.Error("no PEM: no error")
	}
	priv, _ := x509.MarshalECPrivateKey(k)
	signer, err := ParsePrivateKey(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: priv}))
	if err != nil {
		t.Fatal(err)
	}
	sig, err := SignBytes(signer, []byte("m"))
	if err != nil || !verifyOne(&k.PublicKey, []byte("m"), sig) || verifyOne(&k.PublicKey, []byte("n"), sig) {
		t.Errorf("SignBytes with an EC PRIVATE KEY: %v", err)
	}
	if _, err := ParsePrivateKey([]byte("-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n")); err == nil || !strings.Contains(err.Error(), "cosign") {
		t.Errorf("a cosign key: %v, want the advice to sign with cosign", err)
	}
}

// A payload changed after signing is refused: a manifest's bytes (the
// blob no longer has its digest), the release manifest itself (the
// signature no longer verifies: its digest is another), a binary.
func TestTamperedPayloads(t *testing.T) {
	build := func(t *testing.T) (string, *Payload, []crypto.PublicKey) {
		dir := filepath.Join(t.TempDir(), "payload")
		if _, err := Build(dir, testInput(t)); err != nil {
			t.Fatal(err)
		}
		k, keys := ecKey(t)
		if err := Sign(dir, k); err != nil {
			t.Fatal(err)
		}
		p, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		return dir, p, keys
	}
	blob := func(dir, digest string) string {
		return filepath.Join(dir, "blobs", "sha256", strings.TrimPrefix(digest, "sha256:"))
	}
	t.Run("a manifest file", func(t *testing.T) {
		dir, p, _ := build(t)
		var target string
		for _, f := range p.Manifests {
			sum := sha256.Sum256(f.Data)
			if f.Name == "0000_50_dns_01-deployment.yaml" {
				target = blob(dir, "sha256:"+hex.EncodeToString(sum[:]))
			}
		}
		if err := os.WriteFile(target, []byte(strings.Replace(deployment, "replicas: 2", "replicas: 9", 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(dir); !errors.Is(err, ErrDigest) {
			t.Errorf("Open: %v, want ErrDigest", err)
		}
	})
	t.Run("the binary", func(t *testing.T) {
		dir, p, _ := build(t)
		if err := os.WriteFile(blob(dir, p.Binaries[0].Digest), []byte("#!/bin/sh\necho evil\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(dir); !errors.Is(err, ErrDigest) {
			t.Errorf("Open: %v, want ErrDigest", err)
		}
	})
	t.Run("the release manifest, rehashed", func(t *testing.T) {
		dir, p, keys := build(t)
		// A consistent forgery: a changed manifest stored under its own
		// digest and named in index.json; the old signature is for
		// the old digest.
		m := bytes.Replace(p.ManifestBytes(), []byte(`"1.2.0"`), []byte(`"9.9.9"`), 1)
		sum := sha256.Sum256(m)
		newDigest := "sha256:" + hex.EncodeToString(sum[:])
		if err := os.WriteFile(blob(dir, newDigest), m, 0o644); err != nil {
			t.Fatal(err)
		}
		idx, err := os.ReadFile(filepath.Join(dir, "index.json"))
		if err != nil {
			t.Fatal(err)
		}
		idx = bytes.Replace(idx, []byte(p.Digest), []byte(newDigest), 1)
		if err := os.WriteFile(filepath.Join(dir, "index.json"), idx, 0o644); err != nil {
			t.Fatal(err)
		}
		q, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := q.Verify(keys); !errors.Is(err, ErrUnsigned) && !errors.Is(err, ErrSignature) {
			t.Errorf("Verify of a changed release manifest: %v, want a refusal", err)
		}
	})
	t.Run("a signature over other bytes", func(t *testing.T) {
		dir, _, _ := build(t)
		k, keys := ecKey(t)
		sig, err := SignBytes(k, []byte("something else"))
		if err != nil {
			t.Fatal(err)
		}
		if err := AddSignature(dir, sig); err != nil {
			t.Fatal(err)
		}
		p, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Verify(keys); !errors.Is(err, ErrSignature) {
			t.Errorf("Verify: %v, want ErrSignature", err)
		}
	})
}

// A release whose manifests do not validate is not built; every problem
// is listed by file and field.
func TestBuildRefusesBadManifests(t *testing.T) {
	in := testInput(t)
	in.Metadata.Version = ""
	in.Manifests = append(in.Manifests,
		File{Name: "50_dns_deployment.yaml", Data: []byte(deployment)},
		File{Name: "0000_50_dns_02-bad.yaml", Data: []byte(strings.Replace(strings.Replace(deployment, "replicas: 2", "replicas: -1", 1), "name: edge-dns\n  namespace", "name: Edge_DNS\n  namespace", 1))},
		File{Name: "0000_50_dns_03-unknown.yaml", Data: []byte("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containerz: []}\n")},
		File{Name: "0000_60_dns_00-namespace-again.yaml", Data: []byte(namespace)},
	)
	in.Binaries = map[string]string{"plan9/amd64": in.Binaries["linux/amd64"]}
	_, err := Build(filepath.Join(t.TempDir(), "p"), in)
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("Build: %v, want ErrInvalid", err)
	}
	for _, want := range []string{
		"metadata: a version is required",
		"50_dns_deployment.yaml: a manifest is named",
		"0000_50_dns_02-bad.yaml: object 1 (Deployment Edge_DNS): metadata.name",
		"0000_50_dns_02-bad.yaml: object 1 (Deployment Edge_DNS): spec.replicas",
		"0000_50_dns_03-unknown.yaml",
		"containerz",
		"0000_60_dns_00-namespace-again.yaml: object 1 (Namespace kube-system) is in 0000_10_dns_00-namespace.yaml too",
		`binaries: platform "plan9/amd64"`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// Manifests apply by runlevel, lowest first; the components of one
// runlevel side by side (by name); one component's manifests in lexical
// order (UPD-5).
func TestOrder(t *testing.T) {
	names := []string{
		"0000_50_ingress_02-deployment.yaml",
		"0000_10_config_00-namespace.yaml",
		"0000_50_dns_01-deployment.yaml",
		"0000_50_ingress_00-namespace.yaml",
		"0000_50_dns_00-serviceaccount.yaml",
		"0000_90_pools_00-machineconfig.yaml",
	}
	if _, comp, ok := ParseManifestName("0000_03_authorization-openshift_01_rolebindingrestriction.crd.yaml"); !ok || comp != "authorization-openshift" {
		t.Errorf("OpenShift's manifest name: component %q, ok %v", comp, ok)
	}
	var files []File
	for _, n := range names {
		files = append(files, File{Name: n})
	}
	rls, err := Order(files)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, rl := range rls {
		for _, c := range rl.Components {
			var ms []string
			for _, m := range c.Manifests {
				ms = append(ms, m.Name)
			}
			got = append(got, strings.Join([]string{fmt.Sprint(rl.Level), c.Name, strings.Join(ms, ",")}, " "))
		}
	}
	want := []string{
		"10 config 0000_10_config_00-namespace.yaml",
		"50 dns 0000_50_dns_00-serviceaccount.yaml,0000_50_dns_01-deployment.yaml",
		"50 ingress 0000_50_ingress_00-namespace.yaml,0000_50_ingress_02-deployment.yaml",
		"90 pools 0000_90_pools_00-machineconfig.yaml",
	}
	if !slices.Equal(got, want) {
		t.Errorf("order:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(rls) != 3 || len(rls[1].Components) != 2 {
		t.Errorf("runlevels %d, components of 50: %d; want 3 and 2", len(rls), len(rls[1].Components))
	}
	if _, err := Order([]File{{Name: "deploy.yaml"}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("a badly named manifest: %v", err)
	}
}

// What is no signature, a signature twice, an encrypted key and a file
// that is no payload are refused with what is wrong.
func TestRefusals(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "payload")
	if _, err := Build(dir, testInput(t)); err != nil {
		t.Fatal(err)
	}
	if err := AddSignature(dir, []byte(" \n")); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("an empty signature: %v", err)
	}
	if err := AddSignature(dir, []byte("c2ln")); err != nil {
		t.Fatal(err)
	}
	if err := AddSignature(dir, []byte("c2ln\n")); err == nil || !strings.Contains(err.Error(), "already") {
		t.Errorf("the same signature twice: %v", err)
	}
	if _, err := ParsePrivateKey([]byte("-----BEGIN ENCRYPTED PRIVATE KEY-----\nAAAA\n-----END ENCRYPTED PRIVATE KEY-----\n")); err == nil || !strings.Contains(err.Error(), "encrypted") {
		t.Errorf("an encrypted key: %v", err)
	}
	junk := filepath.Join(t.TempDir(), "junk.tar")
	if err := os.WriteFile(junk, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(junk); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "not a tar archive of an OCI layout") {
		t.Errorf("a file that is no payload: %v", err)
	}
	if err := os.Remove(filepath.Join(dir, "oci-layout")); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "oci-layout") {
		t.Errorf("a layout without oci-layout: %v", err)
	}
}
