package controllers

import (
	"fmt"
	"testing"

	"github.com/outpost-edge/outpost/controlplane/api"
)

func TestGarbageCollectorDeletesADeploymentsDependents(t *testing.T) {
	e := newEnv(t)
	e.start(nil)
	d := e.create(newDeployment("web", 3, "1", "0")).(*api.Deployment)
	e.rollOut("web")
	rs := e.replicaSetsOf(d.UID)[0]
	e.delete(deploymentsRes, "default", "web")
	e.waitFor("replica set and pods gone", func() (bool, string) {
		rss, pods := e.replicaSetsOf(d.UID), e.podsOf(rs.UID)
		return len(rss) == 0 && len(pods) == 0, fmt.Sprintf("%d replica sets, %d pods", len(rss), len(pods))
	})
}

func TestGarbageCollectorOwnerRules(t *testing.T) {
	e := newEnv(t)
	yes := true
	node := e.create(newNode("n1", nil))
	live := e.create(newReplicaSet("live", 0, map[string]string{"app": "live"})).(*api.ReplicaSet)
	ref := func(kind, apiVersion, name, uid string, controller bool) api.OwnerReference {
		r := api.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid}
		if controller {
			r.Controller, r.BlockOwnerDeletion = &yes, &yes
		}
		return r
	}
	pod := func(name string, refs ...api.OwnerReference) *api.Pod {
		return &api.Pod{
			ObjectMeta: api.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{"app": name}, OwnerReferences: refs},
			Spec:       api.PodSpec{Containers: []api.Container{{Name: "app", Image: "nginx:1.25"}}},
		}
	}
	for _, p := range []*api.Pod{
		pod("owner-gone", ref("ReplicaSet", "apps/v1", "gone", "uid-gone", true)),
		pod("owner-recreated", ref("ReplicaSet", "apps/v1", "live", "uid-of-an-older-live", true)),
		pod("unknown-kind", ref("Job", "batch/v1", "nightly", "uid-job", true)),
		pod("owner-alive", ref("ReplicaSet", "apps/v1", "live", live.UID, false)),
		pod("one-owner-left", ref("Node", "v1", "n1", node.GetObjectMeta().UID, false), ref("ReplicaSet", "apps/v1", "gone", "uid-gone", true)),
	} {
		e.create(p)
	}
	e.start(nil)
	e.waitFor("the collector's decisions", func() (bool, string) {
		exists := map[string]bool{}
		var left []api.OwnerReference
		for _, obj := range e.list(podsRes) {
			exists[obj.GetObjectMeta().Name] = true
			if obj.GetObjectMeta().Name == "one-owner-left" {
				left = obj.GetObjectMeta().OwnerReferences
			}
		}
		ok := !exists["owner-gone"] && !exists["owner-recreated"] && exists["unknown-kind"] && exists["owner-alive"] &&
			exists["one-owner-left"] && len(left) == 1 && left[0].Kind == "Node"
		return ok, fmt.Sprintf("pods %v, references left %v", exists, left)
	})
	// The ones kept were looked at, and kept.
	for _, name := range []string{"unknown-kind", "owner-alive"} {
		e.waitSynced("garbagecollector", "pods/default/"+name, 0)
		e.get(podsRes, "default", name)
	}
}

// A pod left terminating on a node that no longer exists has no agent to
// finish its delete: the collector removes it (issue 10 item 1).
func TestGCRemovesTerminatingPodsOfGoneNodes(t *testing.T) {
	e := newEnv(t)
	e.holdTerminating.Store(true)
	e.create(newNode("n1", nil))
	e.create(newNode("n2", nil))
	e.start(nil)
	var pods []*api.Pod
	for _, name := range []string{"on-n1", "on-n2"} {
		pods = append(pods, e.create(&api.Pod{ObjectMeta: api.ObjectMeta{Namespace: "default", Name: name},
			Spec: api.PodSpec{Containers: []api.Container{{Name: "c", Image: "i"}}}}).(*api.Pod))
	}
	e.bindTo("n1", pods[0])
	e.bindTo("n2", pods[1])
	e.delete(podsRes, "default", "on-n1")
	e.delete(podsRes, "default", "on-n2")
	e.delete(nodesRes, "", "n1")
	e.waitFor("the pod of the gone node removed", func() (bool, string) {
		_, err := e.f.Get(podsRes, "default", "on-n1")
		return api.IsNotFound(err), fmt.Sprintf("get: %v", err)
	})
	// The other node is there: its agent finishes, nobody else.
	e.waitSynced("garbagecollector", "terminating/default/on-n1", 0)
	if p, err := e.f.Get(podsRes, "default", "on-n2"); err != nil || p.GetObjectMeta().DeletionTimestamp == nil {
		t.Fatalf("pod of a live node: %v, %v; want it still terminating", p, err)
	}
}
