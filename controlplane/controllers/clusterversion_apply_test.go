package controllers

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/release"
)

var coRes = api.ResourceForKind("ClusterOperator")

// applyRelease builds a signed release of version with an add-on
// namespace at runlevel 10 and a one-replica Deployment at runlevel 20.
func applyRelease(t *testing.T, key *ecdsa.PrivateKey, version string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "outpost")
	if err := os.WriteFile(bin, []byte("binary "+version), 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "outpost-"+version)
	deploy := `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: addons}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: "web:` + version + `"}]}
`
	digest, err := release.Build(p, release.Input{Metadata: release.Metadata{Version: version}, Binaries: map[string]string{"linux/amd64": bin, "linux/arm64": bin},
		Manifests: []release.File{
			{Name: "0000_10_addons_00-ns.yaml", Data: []byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: addons\n")},
			{Name: "0000_20_web_00-deployment.yaml", Data: []byte(deploy)},
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := release.Sign(p, key); err != nil {
		t.Fatal(err)
	}
	return release.PayloadRef("file://"+p, digest)
}

func server(id, version string, leader bool) RaftMember {
	return RaftMember{ID: id, Voter: true, Reachable: true, Leader: leader, Version: version, Info: map[string]string{InfoSelfUpdate: api.SelfUpdateReady}}
}

// moved makes server id run version, as its restart on the new binary
// would.
func (f *fakeRaft) moved(id, version string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.members {
		if f.members[i].ID == id {
			f.members[i].Version = version
		}
	}
}

func (f *fakeRaft) setInfo(id string, info map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.members {
		if f.members[i].ID == id {
			f.members[i].Info = info
		}
	}
}

// Applying a release (UPD-5, UPD-6): the servers are named one at a
// time, followers first in name order, the leader last after it handed
// leadership to an updated server (whose controller names it); then the
// manifests by runlevel, the Deployment's component waiting for its
// rollout; history Partial, then Completed; a ClusterOperator per
// component and one for the control plane at the new version.
func TestClusterVersionAppliesRelease(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ref := applyRelease(t, key, "1.2.1")
	graph := fmt.Sprintf(`{"nodes": [{"version": "1.2.0", "payload": "x"}, {"version": "1.2.1", "payload": %q}], "edges": [[0, 1]]}`, ref)
	raft := &fakeRaft{}
	raft.set(server("s1", "1.2.0", true), server("s2", "1.2.0", false), server("s3", "1.2.0", false))
	e := newEnv(t)
	e.create(&api.ClusterVersion{ObjectMeta: api.ObjectMeta{Name: "version"}, Spec: api.ClusterVersionSpec{Channel: "stable-1", Upstream: "https://u.example/graph", TrustedKeys: pemPublic(t, key)}})
	start := func(version string) {
		e.stopControllers()
		e.startConfig(Config{Client: e.f, Version: version, FetchGraph: (&fakeUpstream{graph: graph}).fetch, ReleaseDir: t.TempDir(), Raft: raft})
	}
	// n1's agent can replace its binary; n2's is older and says nothing.
	e.agentNode("n1")
	e.agentNode("n2")
	e.update(nodesRes, "", "n1", false, func(o api.Object) {
		o.(*api.Node).Annotations = map[string]string{api.AnnotationAgentBinaryState: api.SelfUpdateReady}
	})
	e.update(nodesRes, "", "n1", true, func(o api.Object) { o.(*api.Node).Status.NodeInfo.KubeletVersion = "1.2.0" })
	// n3's platform has no binary in the release: listed, not waited for.
	e.agentNode("n3")
	e.update(nodesRes, "", "n3", false, func(o api.Object) {
		o.(*api.Node).Annotations = map[string]string{api.AnnotationAgentBinaryState: api.SelfUpdateReady}
	})
	e.update(nodesRes, "", "n3", true, func(o api.Object) {
		o.(*api.Node).Status.NodeInfo.KubeletVersion, o.(*api.Node).Status.NodeInfo.Architecture = "1.2.0", "riscv64"
	})
	start("1.2.0")
	cv := func() *api.ClusterVersion { return e.get(cvRes, "", "version").(*api.ClusterVersion) }
	// kick stands for the periodic look while an update is under way.
	kicks := 0
	kick := func() {
		kicks++
		e.update(cvRes, "", "version", false, func(o api.Object) {
			o.(*api.ClusterVersion).Annotations = map[string]string{"kick": fmt.Sprint(kicks)}
		})
	}
	named := func(id string) {
		t.Helper()
		e.waitFor(id+" named", func() (bool, string) {
			c := cv()
			return c.Status.ControlPlane != nil && c.Status.ControlPlane.Server == id, fmt.Sprintf("%+v %+v", c.Status.ControlPlane, cvCondition(c, api.CVProgressing))
		})
	}
	e.waitFor("updates listed", func() (bool, string) { return len(cv().Status.AvailableUpdates) == 1, "" })
	e.update(cvRes, "", "version", false, func(o api.Object) { o.(*api.ClusterVersion).Spec.DesiredUpdate = &api.Update{Version: "1.2.1"} })
	named("s2")
	if h := cv().Status.History[0]; h.State != api.UpdatePartial || h.Version != "1.2.1" || !h.Verified || h.Image != ref {
		t.Errorf("history[0] %+v, want 1.2.1 Partial verified", h)
	}
	if c := cvCondition(cv(), api.CVProgressing); c.Status != api.ConditionTrue || !strings.Contains(c.Message, "server s2 is updating its binary (0 of 3 servers updated)") {
		t.Errorf("Progressing %+v", c)
	}
	raft.moved("s2", "1.2.1")
	kick()
	named("s3")
	raft.moved("s3", "1.2.1")
	kick()
	e.waitFor("leadership handed over", func() (bool, string) {
		raft.mu.Lock()
		defer raft.mu.Unlock()
		return len(raft.transfers) == 1 && raft.transfers[0] == "s2", fmt.Sprint(raft.transfers)
	})
	if _, err := e.f.Get(api.ResourceForKind("Namespace"), "", "addons"); !api.IsNotFound(err) {
		t.Errorf("the manifests were applied before the control plane was updated: %v", err)
	}
	start("1.2.1") // s2's controller, the new leader's
	named("s1")
	raft.moved("s1", "1.2.1")
	kick()
	// Then the agents: n1 is given the release's binary for its platform;
	// n2 cannot take it and does not hold the update.
	e.waitFor("n1's agent named", func() (bool, string) {
		n := e.get(nodesRes, "", "n1").(*api.Node)
		return strings.HasPrefix(n.Annotations[api.AnnotationAgentBinary], "1.2.1 sha256:"), fmt.Sprintf("%v %+v", n.Annotations, cvCondition(cv(), api.CVProgressing))
	})
	if _, err := e.f.Get(api.ResourceForKind("Namespace"), "", "addons"); !api.IsNotFound(err) {
		t.Errorf("the manifests were applied before the agents were: %v", err)
	}
	if n := e.get(nodesRes, "", "n2").(*api.Node); n.Annotations[api.AnnotationAgentBinary] != "" {
		t.Errorf("n2, whose agent cannot replace its binary, was named one: %v", n.Annotations)
	}
	// Reporting the version on trial is not done; marked good is.
	e.update(nodesRes, "", "n1", false, func(o api.Object) { o.(*api.Node).Annotations[api.AnnotationAgentBinaryState] = api.SelfUpdateTrial })
	e.update(nodesRes, "", "n1", true, func(o api.Object) { o.(*api.Node).Status.NodeInfo.KubeletVersion = "1.2.1" })
	kick()
	e.waitFor("the agents phase waiting while n1's binary is on trial", func() (bool, string) {
		c := cvCondition(cv(), api.CVProgressing)
		return strings.Contains(c.Message, "agents replacing their binary: 0 of 3 agents at 1.2.1"), c.Message
	})
	e.update(nodesRes, "", "n1", false, func(o api.Object) { o.(*api.Node).Annotations[api.AnnotationAgentBinaryState] = api.SelfUpdateReady })
	kick()
	e.waitFor("runlevel 20 waits for the rollout", func() (bool, string) {
		c := cvCondition(cv(), api.CVProgressing)
		return strings.Contains(c.Message, "runlevel 20: waiting on web"), c.Message
	})
	if _, err := e.f.Get(api.ResourceForKind("Namespace"), "", "addons"); err != nil {
		t.Errorf("runlevel 10's namespace: %v", err)
	}
	if co := e.get(coRes, "", "addons").(*api.ClusterOperator); len(co.Status.Versions) != 1 || co.Status.Versions[0].Version != "1.2.1" {
		t.Errorf("addons operator %+v, want at 1.2.1", co.Status)
	}
	e.waitFor("web's pod", func() (bool, string) { return len(e.pods(map[string]string{"app": "web"})) == 1, "" })
	e.markReady(e.pods(map[string]string{"app": "web"})[0])
	e.waitFor("completed", func() (bool, string) {
		kick()
		c := cv()
		return c.Status.History[0].State == api.UpdateCompleted && c.Status.ControlPlane == nil, fmt.Sprintf("%+v %+v", c.Status.History[0], cvCondition(c, api.CVProgressing))
	})
	if c := cv(); c.Status.History[0].CompletionTime == nil || cvCondition(c, api.CVProgressing).Status != api.ConditionFalse || c.Status.History[1].Version != "1.2.0" {
		t.Errorf("status %+v", c.Status)
	}
	if co := e.get(coRes, "", api.AgentsOperator).(*api.ClusterOperator); !strings.Contains(operatorCond(co, api.OperatorAvailable).Message, "1 of 3 agents at 1.2.1 (failed: n3: the release has no binary for linux/riscv64; cannot replace their binary: n2)") {
		t.Errorf("node-agents operator %+v", co.Status)
	}
	for _, name := range []string{"control-plane", "addons", "web"} {
		co := e.get(coRes, "", name).(*api.ClusterOperator)
		if len(co.Status.Versions) != 1 || co.Status.Versions[0].Version != "1.2.1" || operatorCond(co, api.OperatorAvailable).Status != api.ConditionTrue {
			t.Errorf("cluster operator %s: %+v", name, co.Status)
		}
	}
}

// A server whose new binary rolled back stops the update (UPD-6):
// Failing=True with the server's reason, no other server is named, the
// history stays Partial. Before that, a voter that is unreachable keeps
// the update from starting (its preconditions), and force starts it.
func TestClusterVersionUpdateStopsOnRollBack(t *testing.T) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ref := applyRelease(t, key, "1.2.1")
	graph := fmt.Sprintf(`{"nodes": [{"version": "1.2.0", "payload": "x"}, {"version": "1.2.1", "payload": %q}], "edges": [[0, 1]]}`, ref)
	raft := &fakeRaft{}
	down := server("s3", "1.2.0", false)
	down.Reachable = false
	raft.set(server("s1", "1.2.0", true), server("s2", "1.2.0", false), down)
	e := newEnv(t)
	e.create(&api.ClusterVersion{ObjectMeta: api.ObjectMeta{Name: "version"}, Spec: api.ClusterVersionSpec{Channel: "stable-1", Upstream: "https://u.example/graph", TrustedKeys: pemPublic(t, key)}})
	e.startConfig(Config{Client: e.f, Version: "1.2.0", FetchGraph: (&fakeUpstream{graph: graph}).fetch, ReleaseDir: t.TempDir(), Raft: raft})
	cv := func() *api.ClusterVersion { return e.get(cvRes, "", "version").(*api.ClusterVersion) }
	e.waitFor("updates listed", func() (bool, string) { return len(cv().Status.AvailableUpdates) == 1, "" })
	e.update(cvRes, "", "version", false, func(o api.Object) { o.(*api.ClusterVersion).Spec.DesiredUpdate = &api.Update{Version: "1.2.1"} })
	e.waitFor("preconditions fail", func() (bool, string) {
		c := cvCondition(cv(), api.CVFailing)
		return c.Reason == "PreconditionChecks" && strings.Contains(c.Message, "server s3 is unreachable"), fmt.Sprintf("%+v", c)
	})
	if c := cv(); c.Status.History[0].State != api.UpdateCompleted || c.Status.ControlPlane != nil {
		t.Errorf("an update started despite its preconditions: %+v", c.Status)
	}
	raft.set(server("s1", "1.2.0", true), server("s2", "1.2.0", false), server("s3", "1.2.0", false))
	e.update(cvRes, "", "version", false, func(o api.Object) { o.(*api.ClusterVersion).Spec.DesiredUpdate.Force = true })
	e.waitFor("s2 named", func() (bool, string) {
		c := cv()
		return c.Status.ControlPlane != nil && c.Status.ControlPlane.Server == "s2", fmt.Sprintf("%+v", c.Status.ControlPlane)
	})
	raft.setInfo("s2", map[string]string{InfoSelfUpdate: api.SelfUpdateReady, InfoFailedVersion: "1.2.1", InfoFailure: "outpost 1.2.1 did not become healthy: started 4 times, last exit: exit-code status=3"})
	e.update(cvRes, "", "version", false, func(o api.Object) { o.(*api.ClusterVersion).Annotations = map[string]string{"kick": "1"} })
	e.waitFor("failing", func() (bool, string) {
		c := cvCondition(cv(), api.CVFailing)
		return c.Status == api.ConditionTrue && c.Reason == "ControlPlaneUpdateFailed" && strings.Contains(c.Message, "server s2 could not move to 1.2.1 and rolled back to 1.2.0: outpost 1.2.1 did not become healthy"), fmt.Sprintf("%+v", c)
	})
	c := cv()
	if c.Status.ControlPlane.Server != "s2" || c.Status.History[0].State != api.UpdatePartial || cvCondition(c, api.CVProgressing).Status != api.ConditionFalse {
		t.Errorf("after the roll back: %+v", c.Status)
	}
	if _, err := e.f.Get(api.ResourceForKind("Namespace"), "", "addons"); !api.IsNotFound(err) {
		t.Errorf("manifests applied after a failed control plane update: %v", err)
	}
}
