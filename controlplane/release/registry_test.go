package release

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outpost-edge/outpost/runtime/runtimetest"
)

// A payload in an OCI registry (UPD-3): pushed as its layout (the
// release manifest, and its signature as a referrer), fetched by
// docker://HOST/REPO@DIGEST with the auth file's credentials; it opens
// with the same digest and verifies with the signer's key. Refused:
// without credentials (401), a digest the registry does not have, a
// blob changed in the registry (digest mismatch).
func TestFetchFromRegistry(t *testing.T) {
	key, keys := ecKey(t)
	dir := filepath.Join(t.TempDir(), "payload")
	digest, err := Build(dir, testInput(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := Sign(dir, key); err != nil {
		t.Fatal(err)
	}
	var archive bytes.Buffer
	if err := WriteTar(&archive, dir); err != nil {
		t.Fatal(err)
	}
	reg := runtimetest.NewRegistry(t, archive.Bytes(), "puller", "s3cret")
	ref := RegistryScheme + reg.Host + "/" + reg.Repo + "@" + digest
	ctx := context.Background()

	t.Setenv("REGISTRY_AUTH_FILE", filepath.Join(t.TempDir(), "none.json"))
	if _, err := Fetch(ctx, ref, t.TempDir()); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("without credentials: %v, want 401", err)
	}
	auth := filepath.Join(t.TempDir(), "auth.json")
	cred := base64.StdEncoding.EncodeToString([]byte("puller:s3cret"))
	if err := os.WriteFile(auth, []byte(`{"auths": {"`+reg.Host+`": {"auth": "`+cred+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("REGISTRY_AUTH_FILE", auth)
	p, err := Fetch(ctx, ref, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if p.Digest != digest || p.Metadata.Version != "1.2.0" || len(p.Binaries) != 1 || len(p.Manifests) != 2 {
		t.Errorf("pulled %s %+v", p.Digest, p.Metadata)
	}
	if err := p.Verify(keys); err != nil {
		t.Errorf("the pulled payload's signature (a referrer): %v", err)
	}
	other := RegistryScheme + reg.Host + "/" + reg.Repo + "@sha256:" + strings.Repeat("0", 64)
	if _, err := Fetch(ctx, other, t.TempDir()); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("an unknown digest: %v, want 404", err)
	}
	if _, err := Fetch(ctx, RegistryScheme+reg.Host+"/"+reg.Repo+":latest", t.TempDir()); err == nil || !strings.Contains(err.Error(), "pinned by its digest") {
		t.Errorf("a tag: %v, want refused (pinned by digest)", err)
	}

	// The registry serves a binary changed after the payload was built.
	tampered := bytes.Replace(archive.Bytes(), []byte("echo v2"), []byte("echo v3"), 1)
	if bytes.Equal(tampered, archive.Bytes()) {
		t.Fatal("the binary's bytes are not in the archive")
	}
	bad := runtimetest.NewRegistry(t, tampered, "puller", "s3cret")
	badRef := RegistryScheme + bad.Host + "/" + bad.Repo + "@" + digest
	cred = base64.StdEncoding.EncodeToString([]byte("puller:s3cret"))
	if err := os.WriteFile(auth, []byte(`{"auths": {"`+bad.Host+`": {"auth": "`+cred+`"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Fetch(ctx, badRef, t.TempDir()); !errors.Is(err, ErrDigest) {
		t.Errorf("a changed blob: %v, want ErrDigest", err)
	}
}

// A payload fetched from a local directory is kept in the fetch
// directory as DIGEST.tar (the servers hand its binaries out from
// there, after the source is gone too).
func TestFetchKeepsACopy(t *testing.T) {
	src := filepath.Join(t.TempDir(), "payload")
	digest, err := Build(src, testInput(t))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := Fetch(context.Background(), "file://"+src+"@"+digest, dir); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(src); err != nil {
		t.Fatal(err)
	}
	p, err := Open(filepath.Join(dir, strings.TrimPrefix(digest, "sha256:")+".tar"))
	if err != nil || p.Digest != digest {
		t.Fatalf("the kept copy: %v (%v)", err, p)
	}
}
