package server

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/release"
)

// GET /apis/outpost.io/v1/binaries/DIGEST (UPD-6): a node downloads a
// release's binary by digest from a payload the server fetched (the
// bytes are the binary's); an unknown digest is 404, a malformed one
// 400; a developer may not.
func TestServeBinaries(t *testing.T) {
	cfg := testConfig(t)
	s := startServer(t, cfg)
	c := admin(t, s)
	bin := []byte("#!/bin/sh\necho outpost 9.9.9\n")
	src := filepath.Join(t.TempDir(), "outpost")
	if err := os.WriteFile(src, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	layout := filepath.Join(t.TempDir(), "layout")
	if _, err := release.Build(layout, release.Input{Metadata: release.Metadata{Version: "9.9.9"}, Binaries: map[string]string{"linux/arm64": src},
		Manifests: []release.File{{Name: "0000_10_a_ns.yaml", Data: []byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: a\n")}}}); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(cfg.DataDir, "releases"), 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(cfg.DataDir, "releases", "x.tar"))
	if err != nil {
		t.Fatal(err)
	}
	if err := release.WriteTar(f, layout); err != nil {
		t.Fatal(err)
	}
	f.Close()
	sum := sha256.Sum256(bin)
	digest := "sha256:" + hex.EncodeToString(sum[:])

	node := c.as(addToken(t, c, api.TokenSpec{Role: api.RoleNode, NodeName: "n1"}))
	r := node.must(http.StatusOK, "GET", "/apis/outpost.io/v1/binaries/"+digest, nil)
	if string(r.body) != string(bin) {
		t.Errorf("served %q, want the binary %q", r.body, bin)
	}
	// Served again from the extracted copy.
	if r := node.must(http.StatusOK, "GET", "/apis/outpost.io/v1/binaries/"+digest, nil); string(r.body) != string(bin) {
		t.Errorf("second download %q", r.body)
	}
	node.must(http.StatusNotFound, "GET", "/apis/outpost.io/v1/binaries/sha256:"+hex.EncodeToString(make([]byte, 32)), nil)
	node.must(http.StatusBadRequest, "GET", "/apis/outpost.io/v1/binaries/latest", nil)
	dev := c.as(addToken(t, c, api.TokenSpec{Role: api.RoleDeveloper, Namespaces: []string{"default"}}))
	dev.must(http.StatusForbidden, "GET", "/apis/outpost.io/v1/binaries/"+digest, nil)
}
