package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/controller"
)

// garbageCollector deletes pods and replica sets whose owners are gone,
// with background propagation as Kubernetes' default: deleting a
// deployment removes its replica sets, whose deletion removes their pods.
// An object with several owners is deleted when all are gone; while some
// remain, only the references to the gone ones are removed.
//
// It also removes a pod left terminating on a node that no longer exists
// (key "terminating/namespace/name"): no agent will finish its delete,
// and a namespace being deleted would wait for it forever.
type garbageCollector struct {
	s    *shared
	loop *loop
	// deps are the dependents' informers by plural (the queue key's
	// first segment).
	deps map[string]*api.Resource
}

func newGarbageCollector(s *shared) *garbageCollector {
	g := &garbageCollector{s: s, deps: map[string]*api.Resource{
		"pods":        api.ResourceForKind("Pod"),
		"replicasets": api.ResourceForKind("ReplicaSet"),
	}}
	g.loop = newLoop(s, "garbagecollector", g.sync)
	return g
}

// onObject follows every informer: a deleted object's dependents are
// checked; a dependent (plural non-empty) with owners is checked when it
// appears or its owners change.
func (g *garbageCollector) onObject(ev controller.Event, plural string) {
	m := ev.Object.GetObjectMeta()
	if p, ok := ev.Object.(*api.Pod); ok && ev.Type != api.Deleted && p.DeletionTimestamp != nil && p.Spec.NodeName != "" {
		if _, ok := g.s.nodeInf.Get("", p.Spec.NodeName); !ok {
			g.loop.q.Add(terminatingKey + controller.KeyOf(p))
		}
	}
	if n, ok := ev.Object.(*api.Node); ok && ev.Type == api.Deleted {
		for _, obj := range g.s.podInf.List() {
			if p := obj.(*api.Pod); p.Spec.NodeName == n.Name && p.DeletionTimestamp != nil {
				g.loop.q.Add(terminatingKey + controller.KeyOf(p))
			}
		}
	}
	if ev.Type == api.Deleted {
		for _, x := range []struct {
			plural string
			idx    *index
		}{{"pods", g.s.pods}, {"replicasets", g.s.rss}} {
			for _, dep := range x.idx.ownedBy(m.UID) {
				g.loop.q.Add(x.plural + "/" + controller.KeyOf(dep))
			}
		}
		return
	}
	if plural == "" || len(m.OwnerReferences) == 0 {
		return
	}
	if ev.Old != nil && sameOwners(ev.Old.GetObjectMeta().OwnerReferences, m.OwnerReferences) {
		return // most updates are status updates: nothing to look at
	}
	g.loop.q.Add(plural + "/" + controller.KeyOf(ev.Object))
}

var (
	podsResource  = api.ResourceForKind("Pod")
	nodesResource = api.ResourceForKind("Node")
)

// terminatingKey starts the queue key of a terminating pod to look at.
const terminatingKey = "terminating/"

// sync looks at one dependent ("pods/namespace/name") or one terminating
// pod ("terminating/namespace/name").
func (g *garbageCollector) sync(ctx context.Context, key string) (time.Duration, error) {
	if rest, ok := strings.CutPrefix(key, terminatingKey); ok {
		return 0, g.syncTerminating(ctx, rest)
	}
	plural, rest, _ := strings.Cut(key, "/")
	r := g.deps[plural]
	ns, name, err := splitKey(rest)
	if r == nil || err != nil {
		return 0, nil
	}
	// The store, not the cache: the decision must rest on the object's
	// owners as they are now, and the delete is conditional on it.
	obj, err := g.s.client.Get(r, ns, name)
	if err != nil {
		if api.IsNotFound(err) {
			return 0, nil
		}
		return 0, fmt.Errorf("read %s: %w", key, err)
	}
	m := obj.GetObjectMeta()
	if len(m.OwnerReferences) == 0 || m.DeletionTimestamp != nil {
		return 0, nil
	}
	var dangling []string
	for i := range m.OwnerReferences {
		ok, err := g.ownerExists(ns, &m.OwnerReferences[i])
		if err != nil {
			return 0, err
		}
		if !ok {
			dangling = append(dangling, m.OwnerReferences[i].UID)
		}
	}
	switch {
	case len(dangling) == 0:
		return 0, nil
	case len(dangling) == len(m.OwnerReferences):
		err := g.s.client.Delete(ctx, r, ns, name, api.DeleteOptions{Preconditions: api.Preconditions{UID: m.UID, ResourceVersion: m.ResourceVersion}})
		switch {
		case err == nil:
			g.loop.log.Info("deleted an object whose owners are gone", "kind", r.Kind, "object", rest)
		case api.IsNotFound(err):
		default:
			return 0, fmt.Errorf("delete %s: %w", key, err) // a conflict: look again
		}
		return 0, nil
	}
	cp, err := controller.Copy(obj)
	if err != nil {
		return 0, err
	}
	cm := cp.GetObjectMeta()
	cm.OwnerReferences = slices.DeleteFunc(cm.OwnerReferences, func(o api.OwnerReference) bool { return slices.Contains(dangling, o.UID) })
	if _, err := g.s.client.Update(ctx, cp); err != nil && !api.IsNotFound(err) {
		return 0, fmt.Errorf("remove dangling owner references of %s: %w", key, err)
	}
	return 0, nil
}

// syncTerminating force-deletes the terminating pod ns/name if the node
// it is bound to is gone.
func (g *garbageCollector) syncTerminating(ctx context.Context, key string) error {
	ns, name, err := splitKey(key)
	if err != nil {
		return nil
	}
	obj, err := g.s.client.Get(podsResource, ns, name)
	if err != nil {
		if api.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("read pod %s: %w", key, err)
	}
	p := obj.(*api.Pod)
	if p.DeletionTimestamp == nil || p.Spec.NodeName == "" {
		return nil
	}
	if _, err := g.s.client.Get(nodesResource, "", p.Spec.NodeName); !api.IsNotFound(err) {
		return err
	}
	zero := int64(0)
	err = g.s.client.Delete(ctx, podsResource, ns, name, api.DeleteOptions{Preconditions: api.Preconditions{UID: p.UID}, GracePeriodSeconds: &zero})
	switch {
	case err == nil:
		g.loop.log.Info("deleted a terminating pod whose node is gone", "pod", key, "node", p.Spec.NodeName)
	case api.IsNotFound(err), api.IsConflict(err):
	default:
		return fmt.Errorf("delete terminating pod %s: %w", key, err)
	}
	return nil
}

// sameOwners reports whether two lists name the same owners.
func sameOwners(a, b []api.OwnerReference) bool {
	return slices.EqualFunc(a, b, func(x, y api.OwnerReference) bool {
		return x.UID == y.UID && x.Name == y.Name && x.Kind == y.Kind && x.APIVersion == y.APIVersion
	})
}

// ownerExists reports whether the owner ref names exists with its UID.
// An owner of a kind outpost does not serve cannot be checked and counts
// as existing: the collector never deletes on a guess.
func (g *garbageCollector) ownerExists(ns string, ref *api.OwnerReference) (bool, error) {
	r := resourceForRef(ref)
	if r == nil {
		return true, nil
	}
	if !r.Namespaced {
		ns = ""
	}
	owner, err := g.s.client.Get(r, ns, ref.Name)
	switch {
	case api.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read owner %s %s: %w", ref.Kind, ref.Name, err)
	}
	return owner.GetObjectMeta().UID == ref.UID, nil
}

// resourceForRef finds the resource an ownerReference names by group and
// kind; apps kinds are also found under the old extensions group.
func resourceForRef(ref *api.OwnerReference) *api.Resource {
	group := ""
	if i := strings.IndexByte(ref.APIVersion, '/'); i >= 0 {
		group = ref.APIVersion[:i]
	}
	r := api.ResourceForKind(ref.Kind)
	if r == nil || (r.Group != group && !(r.Group == "apps" && group == "extensions")) {
		return nil
	}
	return r
}
