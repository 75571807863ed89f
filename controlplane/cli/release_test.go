package cli

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const releaseDeployment = `apiVersion: apps/v1
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

// openssl runs the real openssl (a test dependency of make test).
func openssl(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("openssl", args...).CombinedOutput(); err != nil {
		t.Fatalf("openssl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// The release commands end to end (UPD-3, UPD-4): new builds a payload
// from a directory of manifests and a binary; a key and a signature made
// by the real openssl over the bytes 'manifest' prints are attached with
// 'sign --signature'; info and extract verify it with the public key,
// and refuse with another; extract prints oc's line and writes oc's
// files.
func TestReleaseCommands(t *testing.T) {
	dir := t.TempDir()
	manifests := filepath.Join(dir, "manifests")
	if err := os.MkdirAll(manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, manifests, "0000_50_dns_01-deployment.yaml", releaseDeployment)
	writeFile(t, manifests, "0000_10_dns_00-namespace.yaml", "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: kube-system\n")
	writeFile(t, manifests, "README.txt", "not a manifest: skipped")
	bin := writeFile(t, dir, "outpost", "#!/bin/sh\necho 1.3.0\n")
	payload := filepath.Join(dir, "payload")
	ctx := context.Background()

	res := runCLI(t, ctx, "", "adm", "release", "new", "--from-dir", manifests, "--version", "1.3.0", "--previous", "1.2.0,1.2.1",
		"--binary", "linux/amd64="+bin, "--image", "edge-dns=registry.example/edge-dns@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
		"--to-dir", payload, "--created", "2026-11-26T12:00:00Z")
	if res.code != 0 || !strings.HasPrefix(res.stdout, "release 1.3.0 sha256:") || !strings.Contains(res.stdout, "unsigned") {
		t.Fatalf("new: %+v", res)
	}
	digest := strings.TrimSuffix(strings.Fields(res.stdout)[2], ",")

	key, pub, other := filepath.Join(dir, "key.pem"), filepath.Join(dir, "pub.pem"), filepath.Join(dir, "other.pem")
	openssl(t, "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", key)
	openssl(t, "ec", "-in", key, "-pubout", "-out", pub)
	otherKey := filepath.Join(dir, "other.key")
	openssl(t, "ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", otherKey)
	openssl(t, "ec", "-in", otherKey, "-pubout", "-out", other)

	res = runCLI(t, ctx, "", "adm", "release", "manifest", payload)
	if res.code != 0 || !strings.Contains(res.stdout, `"artifactType":"application/vnd.outpost.release.v1"`) {
		t.Fatalf("manifest: %+v", res)
	}
	mf := writeFile(t, dir, "manifest.json", res.stdout)
	sig := filepath.Join(dir, "manifest.sig")
	openssl(t, "dgst", "-sha256", "-sign", key, "-out", sig, mf)

	res = runCLI(t, ctx, "", "adm", "release", "info", payload, "--key", pub)
	if res.code == 0 || !strings.Contains(res.stderr, "not signed") {
		t.Errorf("info --key of an unsigned payload: %+v", res)
	}
	expect(t, "sign", runCLI(t, ctx, "", "adm", "release", "sign", payload, "--signature", sig), 0, "signature added to "+payload+"\n", "")

	res = runCLI(t, ctx, "", "adm", "release", "info", payload, "--key", pub)
	for _, want := range []string{"Name:        1.3.0", "Digest:      " + digest, "Created:     2026-11-26T12:00:00Z", "Previous:    1.2.0, 1.2.1",
		"Signatures:  1, 1 verified by the keys given", "linux/amd64", "edge-dns", "10        dns        0000_10_dns_00-namespace.yaml", "50        dns        0000_50_dns_01-deployment.yaml"} {
		if !strings.Contains(res.stdout, want) {
			t.Errorf("info lacks %q:\n%s%s", want, res.stdout, res.stderr)
		}
	}
	res = runCLI(t, ctx, "", "adm", "release", "info", payload, "--key", other)
	if res.code == 0 || !strings.Contains(res.stderr, "no trusted key verifies") {
		t.Errorf("info with another key: %+v", res)
	}

	out := filepath.Join(dir, "out")
	res = runCLI(t, ctx, "", "adm", "release", "extract", payload, "--to", out, "--key", other)
	if res.code == 0 {
		t.Errorf("extract with another key succeeded: %+v", res)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a refused extract wrote its directory")
	}
	expect(t, "extract", runCLI(t, ctx, "", "adm", "release", "extract", payload, "--to", out, "--key", pub), 0, "",
		"Extracted release payload from digest "+digest+" created at 2026-11-26T12:00:00Z\n")
	for _, f := range []string{"0000_10_dns_00-namespace.yaml", "0000_50_dns_01-deployment.yaml", "release-metadata", "image-references"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("extract: %v", err)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "outpost-linux-amd64")); err == nil {
		t.Error("binary extracted without --binaries")
	}

	// A tar file, signed at once with the key.
	tarFile := filepath.Join(dir, "outpost-1.3.0.tar")
	res = runCLI(t, ctx, "", "adm", "release", "new", "--from-dir", manifests, "--version", "1.3.0", "--binary", "linux/amd64="+bin,
		"--to-file", tarFile, "--sign-key", key)
	if res.code != 0 || !strings.Contains(res.stdout, ", signed, written to "+tarFile) {
		t.Fatalf("new --to-file --sign-key: %+v", res)
	}
	if res := runCLI(t, ctx, "", "adm", "release", "info", tarFile, "--key", pub); res.code != 0 {
		t.Errorf("info of the tar: %+v", res)
	}
}

// A release whose manifests do not validate is refused with each
// problem by file and field, and nothing is written.
func TestReleaseNewRefusesBadManifests(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "0000_50_dns_01-deployment.yaml", strings.Replace(releaseDeployment, "replicas: 2", "replicas: -3", 1))
	writeFile(t, dir, "deploy.yaml", releaseDeployment)
	out := filepath.Join(t.TempDir(), "p")
	res := runCLI(t, context.Background(), "", "adm", "release", "new", "--from-dir", dir, "--version", "1.3.0", "--to-dir", out)
	if res.code == 0 || !strings.Contains(res.stderr, "0000_50_dns_01-deployment.yaml: object 1 (Deployment edge-dns): spec.replicas") ||
		!strings.Contains(res.stderr, "deploy.yaml: a manifest is named 0000_") {
		t.Errorf("new with bad manifests: %+v", res)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("a refused release was written")
	}
	expect(t, "no --version", runCLI(t, context.Background(), "", "adm", "release", "new", "--from-dir", dir, "--to-dir", out), 1, "",
		"error: --version is required\nSee 'outpost adm release new --help' for usage.\n")
}
