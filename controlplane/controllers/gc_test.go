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
