package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/release"
	"github.com/outpost-edge/outpost/controlplane/version"
)

// A server has the cluster's ClusterVersion from its first start (UPD-1);
// pointed at an update service (outpost's own, serving a directory over
// HTTP), its status lists the channel's updates from the version the
// server runs (UPD-2); the update, asked for, is downloaded, its
// signature verified with the cluster's trusted key and accepted (UPD-4);
// a developer may not change the ClusterVersion.
func TestClusterVersionFromAnUpdateService(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"releases", "channels"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	bin := filepath.Join(t.TempDir(), "outpost")
	if err := os.WriteFile(bin, []byte("binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct{ v, prev string }{{version.Version, ""}, {"99.0.0", version.Version}} {
		in := release.Input{Metadata: release.Metadata{Version: r.v}, Binaries: map[string]string{"linux/amd64": bin},
			Manifests: []release.File{{Name: "0000_10_addons_00-ns.yaml", Data: []byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: addons\n")}}}
		if r.prev != "" {
			in.Metadata.Previous = []string{r.prev}
		}
		layout := filepath.Join(t.TempDir(), "layout")
		if _, err := release.Build(layout, in); err != nil {
			t.Fatal(err)
		}
		if err := release.Sign(layout, key); err != nil {
			t.Fatal(err)
		}
		f, err := os.Create(filepath.Join(dir, "releases", "outpost-"+r.v+".tar"))
		if err != nil {
			t.Fatal(err)
		}
		if err := release.WriteTar(f, layout); err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
	}
	if err := os.WriteFile(filepath.Join(dir, "channels", "stable.yaml"), []byte("name: stable-1\nversions: ["+version.Version+", 99.0.0]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	gd := &release.GraphDir{Dir: dir}
	us := httptest.NewServer(gd)
	defer us.Close()
	gd.BaseURL = us.URL

	cfg := testConfig(t)
	cfg.Schedulers = map[string]string{} // controllers on, no scheduler
	s := startServer(t, cfg)
	admin := admin(t, s)
	const path = "/apis/config.openshift.io/v1/clusterversions/version"
	get := func() api.ClusterVersion {
		var cv api.ClusterVersion
		if err := json.Unmarshal(admin.must(http.StatusOK, "GET", path, nil).body, &cv); err != nil {
			t.Fatal(err)
		}
		return cv
	}
	cv := get()
	if cv.Spec.ClusterID == "" {
		t.Error("the bootstrap ClusterVersion has no cluster ID")
	}
	cv.Spec.Upstream = us.URL + release.GraphPath
	cv.Spec.Channel = "stable-1"
	admin.must(http.StatusOK, "PUT", path, &cv)
	waitFor(t, 20*time.Second, "the update listed", func() bool {
		cv = get()
		return len(cv.Status.AvailableUpdates) == 1 && cv.Status.AvailableUpdates[0].Version == "99.0.0"
	})
	if !strings.HasPrefix(cv.Status.AvailableUpdates[0].Image, us.URL+"/releases/outpost-99.0.0.tar@sha256:") || len(cv.Status.History) != 1 || cv.Status.History[0].Version != version.Version {
		t.Errorf("status %+v", cv.Status)
	}
	// The update, signed by the key the cluster trusts, is fetched over
	// HTTP, verified and accepted.
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	cv.Spec.TrustedKeys = string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	cv.Spec.DesiredUpdate = &api.Update{Version: "99.0.0"}
	admin.must(http.StatusOK, "PUT", path, &cv)
	waitFor(t, 20*time.Second, "the release accepted", func() bool {
		cv = get()
		for _, c := range cv.Status.Conditions {
			if c.Type == api.CVReleaseAccepted && c.Status == api.ConditionTrue {
				return cv.Status.Desired.Version == "99.0.0"
			}
		}
		return false
	})
	dev := newTC(t, s, addToken(t, admin, api.TokenSpec{Role: api.RoleDeveloper, Namespaces: []string{"default"}}))
	cv.Spec.Channel = "fast-1"
	if r := dev.do("PUT", path, &cv); r.code != http.StatusForbidden {
		t.Errorf("a developer changing the ClusterVersion: %d, want 403", r.code)
	}
}
