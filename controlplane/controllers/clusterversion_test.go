package controllers

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/release"
)

var cvRes = api.ResourceForKind("ClusterVersion")

const cvGraph = `{
  "nodes": [
    {"version": "1.2.0", "payload": "https://updates.example/releases/outpost-1.2.0.tar", "metadata": {"io.openshift.upgrades.graph.release.channels": "stable-1,fast-1"}},
    {"version": "1.2.1", "payload": "https://updates.example/releases/outpost-1.2.1.tar", "metadata": {"url": "https://example.com/1.2.1"}},
    {"version": "1.3.0", "payload": "https://updates.example/releases/outpost-1.3.0.tar"}
  ],
  "edges": [[0, 1], [0, 2]],
  "conditionalEdges": [
    {"edges": [{"from": "1.2.0", "to": "1.3.0"}],
     "risks": [{"url": "https://example.com/gpu", "name": "GPUDriverReload", "message": "GPU nodes lose their driver.",
                "matchingRules": [{"type": "Expression", "expression": {"expression": "nodes(\"gpu=true\") > 0"}}]}]}
  ]
}`

// fakeUpstream answers graph requests with graph, or fails; it records
// the URLs asked.
type fakeUpstream struct {
	mu    sync.Mutex
	graph string
	err   error
	asked []string
}

func (f *fakeUpstream) fetch(_ context.Context, u string) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, u)
	if f.err != nil {
		return nil, f.err
	}
	return []byte(f.graph), nil
}

func (f *fakeUpstream) set(graph string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.graph, f.err = graph, err
}

func (f *fakeUpstream) calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.asked)
}

func cvCondition(cv *api.ClusterVersion, typ string) api.MachineCondition {
	for _, c := range cv.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return api.MachineCondition{}
}

// The ClusterVersion's status (UPD-1, UPD-2): the version running in its
// history; without an upstream or channel RetrievedUpdates=False saying
// what to set; with them the channel's graph is asked (channel, arch,
// version and cluster id in the query), plain updates listed, the
// conditional one's risk evaluated against the nodes (a GPU node makes
// it not recommended, and its going makes it recommended); an upstream
// that fails later keeps the last good updates with the reason.
func TestClusterVersionStatus(t *testing.T) {
	e := newEnv(t)
	e.agentNode("n1")
	up := &fakeUpstream{graph: cvGraph}
	e.create(&api.ClusterVersion{ObjectMeta: api.ObjectMeta{Name: "version"}, Spec: api.ClusterVersionSpec{ClusterID: "c-1"}})
	e.startConfig(Config{Client: e.f, Version: "1.2.0", FetchGraph: up.fetch})
	cv := func() *api.ClusterVersion { return e.get(cvRes, "", "version").(*api.ClusterVersion) }
	e.waitFor("NoUpstream", func() (bool, string) {
		c := cv()
		r := cvCondition(c, api.CVRetrievedUpdates)
		return r.Status == api.ConditionFalse && r.Reason == "NoUpstream" && len(c.Status.History) == 1, fmt.Sprintf("%+v", c.Status)
	})
	if h := cv().Status.History[0]; h.Version != "1.2.0" || h.State != api.UpdateCompleted {
		t.Errorf("history %+v, want 1.2.0 Completed", h)
	}
	if a := cvCondition(cv(), api.CVAvailable); a.Status != api.ConditionTrue || a.Message != "Done applying 1.2.0" {
		t.Errorf("Available %+v", a)
	}
	e.update(cvRes, "", "version", false, func(o api.Object) {
		o.(*api.ClusterVersion).Spec.Upstream = "https://updates.example/api/upgrades_info/v1/graph"
	})
	e.waitFor("NoChannel", func() (bool, string) {
		r := cvCondition(cv(), api.CVRetrievedUpdates)
		return r.Reason == "NoChannel", fmt.Sprintf("%+v", r)
	})
	e.update(cvRes, "", "version", false, func(o api.Object) { o.(*api.ClusterVersion).Spec.Channel = "stable-1" })
	e.waitFor("updates retrieved", func() (bool, string) {
		c := cv()
		r := cvCondition(c, api.CVRetrievedUpdates)
		return r.Status == api.ConditionTrue && len(c.Status.AvailableUpdates) == 1 && len(c.Status.ConditionalUpdates) == 1, fmt.Sprintf("%+v", c.Status)
	})
	c := cv()
	if a := c.Status.AvailableUpdates[0]; a.Version != "1.2.1" || a.Image != "https://updates.example/releases/outpost-1.2.1.tar" || a.URL != "https://example.com/1.2.1" {
		t.Errorf("available %+v", a)
	}
	if d := c.Status.Desired; d.Version != "1.2.0" || !slices.Equal(d.Channels, []string{"fast-1", "stable-1"}) {
		t.Errorf("desired %+v, want 1.2.0 with its channels", d)
	}
	cu := c.Status.ConditionalUpdates[0]
	if cu.Release.Version != "1.3.0" || len(cu.Risks) != 1 || cu.Conditions[0].Status != api.ConditionTrue {
		t.Errorf("conditional %+v, want 1.3.0 recommended (no GPU node)", cu)
	}
	calls := up.calls()
	q, _ := url.Parse(calls[len(calls)-1])
	if q.Query().Get("channel") != "stable-1" || q.Query().Get("version") != "1.2.0" || q.Query().Get("id") != "c-1" || q.Query().Get("arch") == "" {
		t.Errorf("asked %s", calls[len(calls)-1])
	}

	// A GPU node: the risk applies.
	e.update(nodesRes, "", "n1", false, func(o api.Object) { o.(*api.Node).Labels = map[string]string{"gpu": "true"} })
	e.waitFor("1.3.0 not recommended", func() (bool, string) {
		c := cv()
		if len(c.Status.ConditionalUpdates) != 1 {
			return false, ""
		}
		r := c.Status.ConditionalUpdates[0].Conditions[0]
		return r.Status == api.ConditionFalse && r.Reason == "GPUDriverReload" && strings.Contains(r.Message, "https://example.com/gpu"), fmt.Sprintf("%+v", r)
	})
	n := len(up.calls())
	if n != len(calls) {
		t.Errorf("a node change asked the upstream again (%d calls, was %d): risks are evaluated on the graph kept", n, len(calls))
	}

	// The upstream fails at the next poll: the updates stay, the
	// condition says why.
	up.set("", errors.New("connection refused"))
	e.clock.Advance(graphPollInterval + time.Second)
	e.update(cvRes, "", "version", false, func(o api.Object) { o.(*api.ClusterVersion).Annotations = map[string]string{"poke": "1"} })
	e.waitFor("RemoteFailed, updates kept", func() (bool, string) {
		c := cv()
		r := cvCondition(c, api.CVRetrievedUpdates)
		return r.Status == api.ConditionFalse && r.Reason == "RemoteFailed" && strings.Contains(r.Message, "connection refused") && len(c.Status.AvailableUpdates) == 1, fmt.Sprintf("%+v", c.Status)
	})
	// A graph that does not parse is ResponseInvalid.
	up.set(`{"nodes": [{"version": "1.2.0"}], "edges": [[0, 0]]}`, nil)
	e.clock.Advance(graphPollInterval + time.Second)
	e.update(cvRes, "", "version", false, func(o api.Object) { o.(*api.ClusterVersion).Annotations = map[string]string{"poke": "2"} })
	e.waitFor("ResponseInvalid", func() (bool, string) {
		r := cvCondition(cv(), api.CVRetrievedUpdates)
		return r.Reason == "ResponseInvalid" && strings.Contains(r.Message, "cycle"), fmt.Sprintf("%+v", r)
	})
}

// testRelease builds a payload of version in dir (signed with key when
// given) and returns its reference (file URL pinned by digest).
func testRelease(t *testing.T, dir, version string, key *ecdsa.PrivateKey) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "outpost")
	if err := os.WriteFile(bin, []byte("binary "+version), 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "outpost-"+version)
	digest, err := release.Build(p, release.Input{Metadata: release.Metadata{Version: version}, Binaries: map[string]string{"linux/amd64": bin},
		Manifests: []release.File{{Name: "0000_10_addons_00-ns.yaml", Data: []byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: addons\n")}}})
	if err != nil {
		t.Fatal(err)
	}
	if key != nil {
		if err := release.Sign(p, key); err != nil {
			t.Fatal(err)
		}
	}
	return release.PayloadRef("file://"+p, digest)
}

func pemPublic(t *testing.T, k *ecdsa.PrivateKey) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

// A desired update is accepted only when its payload verifies with a
// trusted key and its manifests validate (UPD-4): without trusted keys,
// unsigned, signed by another key, changed after signing (digest), a
// version that is no update, and a not-recommended update whose risks
// were not accepted are each refused with the reason; a signed release
// of the channel is accepted and becomes status.desired.
func TestClusterVersionAcceptsOnlyVerifiedReleases(t *testing.T) {
	dir := t.TempDir()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	good := testRelease(t, dir, "1.2.1", key)
	unsigned := testRelease(t, dir, "1.2.2", nil)
	risky := testRelease(t, dir, "1.3.0", key)
	graph := fmt.Sprintf(`{"nodes": [{"version": "1.2.0", "payload": "x"}, {"version": "1.2.1", "payload": %q}, {"version": "1.2.2", "payload": %q}, {"version": "1.3.0", "payload": %q}],
  "edges": [[0, 1], [0, 2]],
  "conditionalEdges": [{"edges": [{"from": "1.2.0", "to": "1.3.0"}], "risks": [{"url": "https://example.com/r", "name": "Always", "message": "always", "matchingRules": [{"type": "Always"}]}]}]}`,
		good, unsigned, risky)
	e := newEnv(t)
	e.create(&api.ClusterVersion{ObjectMeta: api.ObjectMeta{Name: "version"}, Spec: api.ClusterVersionSpec{Channel: "stable-1", Upstream: "https://updates.example/graph"}})
	e.startConfig(Config{Client: e.f, Version: "1.2.0", FetchGraph: (&fakeUpstream{graph: graph}).fetch, ReleaseDir: t.TempDir()})
	cv := func() *api.ClusterVersion { return e.get(cvRes, "", "version").(*api.ClusterVersion) }
	e.waitFor("updates listed", func() (bool, string) { return len(cv().Status.AvailableUpdates) == 2, "" })
	want := func(what, reason, msg string, change func(*api.ClusterVersionSpec)) {
		t.Helper()
		e.update(cvRes, "", "version", false, func(o api.Object) { change(&o.(*api.ClusterVersion).Spec) })
		e.waitFor(what, func() (bool, string) {
			c := cvCondition(cv(), api.CVReleaseAccepted)
			return c.Reason == reason && strings.Contains(c.Message, msg), fmt.Sprintf("%+v", c)
		})
	}
	want("no trusted keys", "VerifyPayload", "trusts no release signing key", func(s *api.ClusterVersionSpec) { s.DesiredUpdate = &api.Update{Version: "1.2.1"} })
	want("another key", "VerifyPayload", "no trusted key verifies", func(s *api.ClusterVersionSpec) { s.TrustedKeys = pemPublic(t, other) })
	want("the right key", "PayloadLoaded", `version="1.2.1"`, func(s *api.ClusterVersionSpec) { s.TrustedKeys = pemPublic(t, key) })
	if c := cv(); c.Status.Desired.Version != "1.2.1" || cvCondition(c, api.CVReleaseAccepted).Status != api.ConditionTrue {
		t.Errorf("accepted: desired %+v", c.Status.Desired)
	}
	want("unsigned", "VerifyPayload", "not signed", func(s *api.ClusterVersionSpec) { s.DesiredUpdate = &api.Update{Version: "1.2.2"} })
	want("not an update", "VersionNotFound", "9.9.9", func(s *api.ClusterVersionSpec) { s.DesiredUpdate = &api.Update{Version: "9.9.9"} })
	want("risks not accepted", "NotRecommended", "--allow-not-recommended", func(s *api.ClusterVersionSpec) { s.DesiredUpdate = &api.Update{Version: "1.3.0"} })
	want("risks accepted", "PayloadLoaded", `version="1.3.0"`, func(s *api.ClusterVersionSpec) {
		s.DesiredUpdate = &api.Update{Version: "1.3.0", AcceptRisks: []string{"Always"}}
	})
	// Changed after it was signed: a manifest's bytes.
	loc, _ := release.SplitRef(good)
	p := strings.TrimPrefix(loc, "file://")
	blobs, _ := filepath.Glob(filepath.Join(p, "blobs", "sha256", "*"))
	for _, b := range blobs {
		if data, _ := os.ReadFile(b); strings.Contains(string(data), "kind: Namespace") {
			if err := os.WriteFile(b, []byte(strings.Replace(string(data), "addons", "evil", 1)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	want("tampered", "VerifyPayload", "digest mismatch", func(s *api.ClusterVersionSpec) { s.DesiredUpdate = &api.Update{Image: good} })
	if d := cv().Status.Desired; d.Version != "1.2.0" {
		t.Errorf("desired %+v after a refused release, want the running 1.2.0", d)
	}
}

// A payload's download and checks run in the background (UPD-4): while
// it is under way ReleaseAccepted is Unknown and the status goes on
// (risks still evaluated on a node change); when it ends, the release is
// accepted.
func TestClusterVersionCheckRunsInTheBackground(t *testing.T) {
	dir := t.TempDir()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	good := testRelease(t, dir, "1.2.1", key)
	graph := fmt.Sprintf(`{"nodes": [{"version": "1.2.0", "payload": "x"}, {"version": "1.2.1", "payload": %q}, {"version": "1.3.0", "payload": "y"}],
  "edges": [[0, 1]],
  "conditionalEdges": [{"edges": [{"from": "1.2.0", "to": "1.3.0"}], "risks": [{"url": "u", "name": "GPU", "message": "m", "matchingRules": [{"type": "Expression", "expression": {"expression": "nodes(\"gpu=true\") > 0"}}]}]}]}`, good)
	gate := make(chan struct{})
	slow := func(ctx context.Context, ref, dir string) (*release.Payload, error) {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return release.Fetch(ctx, ref, dir)
	}
	e := newEnv(t)
	e.agentNode("n1")
	e.create(&api.ClusterVersion{ObjectMeta: api.ObjectMeta{Name: "version"}, Spec: api.ClusterVersionSpec{Channel: "stable-1", Upstream: "https://u.example/graph",
		TrustedKeys: pemPublic(t, key)}})
	e.startConfig(Config{Client: e.f, Version: "1.2.0", FetchGraph: (&fakeUpstream{graph: graph}).fetch, FetchPayload: slow, ReleaseDir: t.TempDir()})
	cv := func() *api.ClusterVersion { return e.get(cvRes, "", "version").(*api.ClusterVersion) }
	e.waitFor("updates listed", func() (bool, string) { return len(cv().Status.AvailableUpdates) == 1, "" })
	e.update(cvRes, "", "version", false, func(o api.Object) { o.(*api.ClusterVersion).Spec.DesiredUpdate = &api.Update{Version: "1.2.1"} })
	e.waitFor("the check under way", func() (bool, string) {
		c := cvCondition(cv(), api.CVReleaseAccepted)
		return c.Status == api.ConditionUnknown && c.Reason == "RetrievePayload", fmt.Sprintf("%+v", c)
	})
	e.update(nodesRes, "", "n1", false, func(o api.Object) { o.(*api.Node).Labels = map[string]string{"gpu": "true"} })
	e.waitFor("risks evaluated meanwhile", func() (bool, string) {
		c := cv()
		return len(c.Status.ConditionalUpdates) == 1 && c.Status.ConditionalUpdates[0].Conditions[0].Status == api.ConditionFalse, fmt.Sprintf("%+v", c.Status.ConditionalUpdates)
	})
	close(gate)
	e.waitFor("accepted", func() (bool, string) {
		c := cvCondition(cv(), api.CVReleaseAccepted)
		return c.Status == api.ConditionTrue && c.Reason == "PayloadLoaded", fmt.Sprintf("%+v", c)
	})
}
