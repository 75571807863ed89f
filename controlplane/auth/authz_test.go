package auth

import (
	"errors"
	"testing"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// podsOn maps "namespace/name" to the node a pod is bound to.
type podsOn map[string]string

func (p podsOn) PodNodeName(namespace, name string) (string, bool) {
	n, ok := p[namespace+"/"+name]
	return n, ok
}

var (
	admin  = &Identity{Name: "token:adm001", Role: api.RoleClusterAdmin, TokenID: "adm001"}
	server = &Identity{Name: "system:server:s1", Role: api.RoleServer}
	dev    = &Identity{Name: "token:dev001", Role: api.RoleDeveloper, Namespaces: []string{"team-a", "team-b"}, TokenID: "dev001"}
	node   = &Identity{Name: "system:node:edge-1", Role: api.RoleNode, NodeName: "edge-1", TokenID: "node01"}
	joiner = &Identity{Name: "token:join01", Role: api.RoleNode, TokenID: "join01"}
	odd    = &Identity{Name: "token:odd001", Role: "superuser", TokenID: "odd001"}
)

var testPods = podsOn{
	"team-a/mine":    "edge-1",
	"team-a/theirs":  "edge-2",
	"team-a/pending": "",
}

func res(verb, resource, sub, ns, name string) Request {
	return Request{Verb: verb, Resource: resource, Subresource: sub, Namespace: ns, Name: name}
}

func path(verb, p string) Request { return Request{Verb: verb, Path: p} }

func TestAuthorize(t *testing.T) {
	for _, tc := range []struct {
		name string
		id   *Identity
		req  Request
		ok   bool
	}{
		// cluster-admin and server: everything.
		{"admin binds", admin, res("create", "pods", "binding", "default", "x"), true},
		{"admin tokens", admin, Request{Verb: "create", Resource: "tokens", Group: "outpost.io"}, true},
		{"admin raft peers", admin, Request{Verb: "get", Resource: "raft", Subresource: "peers", Group: "outpost.io"}, true},
		{"admin metrics", admin, path("get", "/metrics"), true},
		{"server anything", server, res("delete", "nodes", "", "", "edge-9"), true},
		{"server metrics", server, path("get", "/metrics"), true},

		// developer: workloads in its namespaces.
		{"dev create pod", dev, res("create", "pods", "", "team-a", "p"), true},
		{"dev heartbeat a node", dev, res("create", "nodes", "heartbeat", "", "edge-1"), false},
		{"dev list servers", dev, Request{Verb: "list", Resource: "servers", Group: "outpost.io"}, false},
		{"dev delete deployment", dev, Request{Verb: "delete", Resource: "deployments", Group: "apps", Namespace: "team-b", Name: "d"}, true},
		{"dev update replicaset no group", dev, res("update", "replicasets", "", "team-a", "r"), true},
		{"dev patch daemonset", dev, res("patch", "daemonsets", "", "team-a", "d"), true},
		{"dev list services", dev, res("list", "services", "", "team-a", ""), true},
		{"dev watch events", dev, res("watch", "events", "", "team-b", ""), true},
		{"dev create event", dev, res("create", "events", "", "team-a", "e"), true},
		{"dev get pod status", dev, res("get", "pods", "status", "team-a", "p"), true},
		{"dev outside namespaces", dev, res("create", "pods", "", "team-c", "p"), false},
		{"dev get outside namespaces", dev, res("get", "pods", "", "default", "p"), false},
		{"dev list all namespaces", dev, res("list", "pods", "", "", ""), false},
		{"dev watch all namespaces", dev, res("watch", "deployments", "", "", ""), false},
		{"dev binding", dev, res("create", "pods", "binding", "team-a", "p"), false},
		{"dev update pod status", dev, res("update", "pods", "status", "team-a", "p"), false},
		{"dev wrong group", dev, Request{Verb: "create", Resource: "deployments", Group: "extensions", Namespace: "team-a"}, false},
		{"dev core group for apps", dev, Request{Verb: "create", Resource: "pods", Group: "apps", Namespace: "team-a"}, false},
		{"dev unknown verb", dev, res("deletecollection", "pods", "", "team-a", ""), false},
		// Streams through the agent (issue 4): logs and exec in the
		// developer's namespaces only; images are for admins.
		{"admin pod log", admin, res("get", "pods", "log", "default", "p"), true},
		{"admin pod exec", admin, res("create", "pods", "exec", "default", "p"), true},
		{"admin node images", admin, res("create", "nodes", "images", "", "edge-1"), true},
		{"dev pod log", dev, res("get", "pods", "log", "team-a", "p"), true},
		{"dev pod exec", dev, res("create", "pods", "exec", "team-b", "p"), true},
		{"dev pod log elsewhere", dev, res("get", "pods", "log", "default", "p"), false},
		{"dev pod exec elsewhere", dev, res("create", "pods", "exec", "default", "p"), false},
		{"dev pod exec as get", dev, res("get", "pods", "exec", "team-a", "p"), false},
		{"dev pod log as create", dev, res("create", "pods", "log", "team-a", "p"), false},
		{"dev log of a service", dev, res("get", "services", "log", "team-a", "s"), false},
		{"dev node images", dev, res("create", "nodes", "images", "", "edge-1"), false},
		{"node pod log", node, res("get", "pods", "log", "team-a", "mine"), false},
		{"node pod exec", node, res("create", "pods", "exec", "team-a", "mine"), false},
		{"node own node images", node, res("create", "nodes", "images", "", "edge-1"), false},
		// port-forward (issue 15 item 6): as exec.
		{"admin pod portforward", admin, res("create", "pods", "portforward", "default", "p"), true},
		{"dev pod portforward", dev, res("create", "pods", "portforward", "team-a", "p"), true},
		{"dev pod portforward elsewhere", dev, res("create", "pods", "portforward", "default", "p"), false},
		{"dev pod portforward as get", dev, res("get", "pods", "portforward", "team-a", "p"), false},
		{"node pod portforward", node, res("create", "pods", "portforward", "team-a", "mine"), false},
		{"dev read nodes", dev, res("list", "nodes", "", "", ""), true},
		{"dev get node", dev, res("get", "nodes", "", "", "edge-1"), true},
		{"dev update node", dev, res("update", "nodes", "", "", "edge-1"), false},
		{"dev get own namespace", dev, res("get", "namespaces", "", "", "team-a"), true},
		{"dev get other namespace", dev, res("get", "namespaces", "", "", "kube-system"), false},
		{"dev list namespaces", dev, res("list", "namespaces", "", "", ""), false},
		{"dev create namespace", dev, res("create", "namespaces", "", "", "team-a"), false},
		{"dev tokens", dev, Request{Verb: "list", Resource: "tokens", Group: "outpost.io"}, false},
		{"dev raft", dev, Request{Verb: "get", Resource: "raft", Subresource: "peers", Group: "outpost.io"}, false},
		{"dev healthz", dev, path("get", "/healthz"), true},
		{"dev version", dev, path("get", "/version"), true},
		{"dev readyz", dev, path("get", "/readyz"), true},
		{"dev metrics", dev, path("get", "/metrics"), false},
		{"dev post healthz", dev, path("create", "/healthz"), false},

		// node with a name.
		{"node list all pods", node, res("list", "pods", "", "", ""), true},
		{"node watch pods", node, res("watch", "pods", "", "", ""), true},
		{"node get pod", node, res("get", "pods", "", "team-a", "theirs"), true},
		{"node read nodes", node, res("list", "nodes", "", "", ""), true},
		{"node read services", node, res("watch", "services", "", "", ""), true},
		{"node read namespaces", node, res("list", "namespaces", "", "", ""), true},
		{"node create own node", node, res("create", "nodes", "", "", "edge-1"), true},
		{"node update own node", node, res("update", "nodes", "", "", "edge-1"), true},
		{"node update own node status", node, res("update", "nodes", "status", "", "edge-1"), true},
		{"node patch own node status", node, res("patch", "nodes", "status", "", "edge-1"), true},
		{"node create other node", node, res("create", "nodes", "", "", "edge-2"), false},
		{"node update other node status", node, res("update", "nodes", "status", "", "edge-2"), false},
		{"node delete own node", node, res("delete", "nodes", "", "", "edge-1"), false},
		{"node update own pod status", node, res("update", "pods", "status", "team-a", "mine"), true},
		{"node patch own pod status", node, res("patch", "pods", "status", "team-a", "mine"), true},
		{"node update pod bound elsewhere", node, res("update", "pods", "status", "team-a", "theirs"), false},
		{"node update unbound pod", node, res("update", "pods", "status", "team-a", "pending"), false},
		{"node update missing pod", node, res("update", "pods", "status", "team-a", "gone"), false},
		{"node update own pod spec", node, res("update", "pods", "", "team-a", "mine"), false},
		// A node finishes the graceful delete of its own pods (issue 10 item 1).
		{"node delete own pod", node, res("delete", "pods", "", "team-a", "mine"), true},
		{"node delete pod bound elsewhere", node, res("delete", "pods", "", "team-a", "theirs"), false},
		{"node delete unbound pod", node, res("delete", "pods", "", "team-a", "pending"), false},
		{"node delete pods collection", node, res("delete", "pods", "", "team-a", ""), false},
		{"node create pod", node, res("create", "pods", "", "team-a", "p"), false},
		{"node binding", node, res("create", "pods", "binding", "team-a", "mine"), false},
		// A node drains itself for a config update (UPD-8): its own pods only.
		{"node evict own pod", node, res("create", "pods", "eviction", "team-a", "mine"), true},
		{"fleetlock token reads nothing", &Identity{Name: "token:fl", Role: api.RoleFleetLock}, res("list", "nodes", "", "", ""), false},
		{"fleetlock token writes nothing", &Identity{Name: "token:fl", Role: api.RoleFleetLock}, Request{Verb: "update", Resource: "machineconfigpools", Group: "machineconfiguration.openshift.io", Name: "worker"}, false},
		{"node evict pod bound elsewhere", node, res("create", "pods", "eviction", "team-a", "theirs"), false},
		{"node read a rendered config", node, Request{Verb: "get", Resource: "machineconfigs", Group: "machineconfiguration.openshift.io", Name: "rendered-worker-1"}, true},
		{"node read a source config", node, Request{Verb: "get", Resource: "machineconfigs", Group: "machineconfiguration.openshift.io", Name: "99-worker-ssh"}, false},
		{"node list machine configs", node, Request{Verb: "list", Resource: "machineconfigs", Group: "machineconfiguration.openshift.io"}, false},
		{"node read pools", node, Request{Verb: "get", Resource: "machineconfigpools", Group: "machineconfiguration.openshift.io", Name: "worker"}, false},
		{"node write machine configs", node, Request{Verb: "create", Resource: "machineconfigs", Group: "machineconfiguration.openshift.io", Name: "x"}, false},
		{"node update machine config pool status", node, Request{Verb: "update", Resource: "machineconfigpools", Subresource: "status", Group: "machineconfiguration.openshift.io", Name: "worker"}, false},
		{"node create event anywhere", node, res("create", "events", "", "team-z", "e"), true},
		{"node update event", node, res("update", "events", "", "default", "e"), true},
		{"node delete event", node, res("delete", "events", "", "default", "e"), false},
		{"node update service", node, res("update", "services", "", "default", "s"), false},
		{"node deployments", node, Request{Verb: "list", Resource: "deployments", Group: "apps"}, false},
		{"node tokens", node, Request{Verb: "get", Resource: "tokens", Group: "outpost.io", Name: "node01"}, false},
		{"node heartbeat own", node, res("create", "nodes", "heartbeat", "", "edge-1"), true},
		{"node heartbeat other", node, res("create", "nodes", "heartbeat", "", "edge-2"), false},
		{"node list servers", node, Request{Verb: "list", Resource: "servers", Group: "outpost.io"}, true},
		{"node delete servers", node, Request{Verb: "delete", Resource: "servers", Group: "outpost.io"}, false},
		{"node healthz", node, path("get", "/healthz"), true},
		{"node metrics", node, path("get", "/metrics"), false},

		// node without a name: join token.
		{"join nodecredentials", joiner, Request{Verb: "create", Resource: "nodecredentials", Group: "outpost.io"}, true},
		{"join get nodecredentials", joiner, Request{Verb: "get", Resource: "nodecredentials", Group: "outpost.io"}, false},
		{"join list pods", joiner, res("list", "pods", "", "", ""), false},
		{"join create node", joiner, res("create", "nodes", "", "", ""), false},
		{"join create events", joiner, res("create", "events", "", "default", "e"), false},
		{"join heartbeat", joiner, res("create", "nodes", "heartbeat", "", "edge-1"), false},
		{"join list servers", joiner, Request{Verb: "list", Resource: "servers", Group: "outpost.io"}, false},
		{"join healthz", joiner, path("get", "/healthz"), true},

		// anything else.
		{"unknown role", odd, res("get", "pods", "", "default", "p"), false},
		{"unknown role healthz", odd, path("get", "/healthz"), true},
		{"nil identity", nil, path("get", "/healthz"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Authorize(tc.id, tc.req, testPods)
			if tc.ok != (err == nil) {
				t.Fatalf("Authorize = %v, want allowed=%v", err, tc.ok)
			}
			if !tc.ok && !errors.Is(err, ErrForbidden) {
				t.Fatalf("refusal %v does not wrap ErrForbidden", err)
			}
			if Can(tc.id, tc.req, testPods) != tc.ok {
				t.Fatal("Can disagrees with Authorize")
			}
		})
	}
}

func TestNodePodStatusWithoutLookup(t *testing.T) {
	if Can(node, res("update", "pods", "status", "team-a", "mine"), nil) {
		t.Fatal("node allowed to update pod status without a pod lookup")
	}
}

// TestCanBinding is the question admission asks for ADM-1.
func TestCanBinding(t *testing.T) {
	req := Request{Verb: VerbCreate, Resource: "pods", Subresource: SubresourceBinding, Namespace: "team-a"}
	for _, tc := range []struct {
		id *Identity
		ok bool
	}{{admin, true}, {server, true}, {dev, false}, {node, false}, {joiner, false}} {
		if got := Can(tc.id, req, nil); got != tc.ok {
			t.Errorf("Can(%s, pods/binding) = %v, want %v", tc.id.Name, got, tc.ok)
		}
	}
}

func TestForbiddenMessage(t *testing.T) {
	for _, tc := range []struct {
		id   *Identity
		req  Request
		want string
	}{
		{dev, res("create", "pods", "binding", "default", "x"),
			`pods "x" is forbidden: User "token:dev001" cannot create resource "pods/binding" in namespace "default"`},
		{dev, res("list", "pods", "", "", ""),
			`pods is forbidden: User "token:dev001" cannot list resource "pods" at the cluster scope`},
		{node, res("update", "nodes", "status", "", "edge-2"),
			`nodes "edge-2" is forbidden: User "system:node:edge-1" cannot update resource "nodes/status" at the cluster scope`},
		{dev, Request{Verb: "create", Resource: "deployments", Group: "apps", Namespace: "team-c", Name: "web"},
			`deployments "web" is forbidden: User "token:dev001" cannot create resource "deployments" in API group "apps" in namespace "team-c"`},
		{dev, path("get", "/metrics"),
			`forbidden: User "token:dev001" cannot get path "/metrics"`},
		{nil, path("get", "/version"),
			`forbidden: User "system:anonymous" cannot get path "/version"`},
	} {
		err := Authorize(tc.id, tc.req, testPods)
		if err == nil || err.Error() != tc.want {
			t.Errorf("message\n got: %v\nwant: %s", err, tc.want)
		}
		var fe *ForbiddenError
		if !errors.As(err, &fe) || fe.Request != tc.req {
			t.Errorf("%v is not a *ForbiddenError carrying the request", err)
		}
	}
}

func BenchmarkAuthorizeDeveloper(b *testing.B) {
	req := Request{Verb: "create", Resource: "deployments", Group: "apps", Namespace: "team-b", Name: "d"}
	b.ReportAllocs()
	for b.Loop() {
		if err := Authorize(dev, req, testPods); err != nil {
			b.Fatal(err)
		}
	}
}
