package auth

import (
	"slices"
	"strings"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// Verbs, as the server derives them from the HTTP method and the query.
const (
	VerbGet    = "get"
	VerbList   = "list"
	VerbWatch  = "watch"
	VerbCreate = "create"
	VerbUpdate = "update"
	VerbPatch  = "patch"
	VerbDelete = "delete"
)

// Subresources the rules know.
const (
	SubresourceStatus  = "status"
	SubresourceBinding = "binding"
	// SubresourceLog (verb get) reads a container's output and
	// SubresourceExec (verb create) runs a command in it, both through
	// the pod's node agent; SubresourceImages (verb create, on nodes)
	// loads an image archive onto a node, for cluster admins only.
	SubresourceLog    = "log"
	SubresourceExec   = "exec"
	SubresourceImages = "images"
	// SubresourceHeartbeat (verb create, on nodes) renews a node's
	// liveness on the leader without a raft write; a node for itself.
	SubresourceHeartbeat = "heartbeat"
	// SubresourceProxy (verb get, on nodes) reads the node agent's own
	// /metrics through the API server; for cluster admins.
	SubresourceProxy = "proxy"
)

// SubresourceEviction (verb create, on pods) evicts a pod if its
// disruption budgets allow it: a graceful delete.
const SubresourceEviction = "eviction"

// SubresourcePortForward (verb create, on pods) opens a connection to a
// pod's port through its node agent; whoever may exec in a pod may.
const SubresourcePortForward = "portforward"

// ResourceNodeCredentials is what a join token may create: the agent trades
// the join token for a node's own credential.
const ResourceNodeCredentials = "nodecredentials"

// ResourceServers is the list of the control plane's API URLs, which
// agents read to fail over between servers.
const ResourceServers = "servers"

// Request is what a caller asks to do. For a resource request Resource is
// the plural ("pods") and, for create, Name is the name in the body. A
// request with an empty Resource is a non-resource request for Path
// ("/healthz").
type Request struct {
	Verb        string
	Resource    string
	Subresource string
	Namespace   string
	Name        string
	// Group is the API group ("apps"). When set, it must be the group the
	// resource lives in; when empty it is taken from the resource.
	Group string
	Path  string
}

// PodLookup tells which node a pod is bound to; ok is false when the pod
// does not exist. The server backs it with its local store.
type PodLookup interface {
	PodNodeName(namespace, name string) (nodeName string, ok bool)
}

// ForbiddenError is an authorization refusal. Its message reads like
// Kubernetes': `pods "x" is forbidden: User "token:abc" cannot create
// resource "pods/binding" in namespace "default"`.
type ForbiddenError struct {
	User    string
	Request Request
}

func (e *ForbiddenError) Error() string {
	r := e.Request
	var b strings.Builder
	if r.Resource == "" {
		b.WriteString(`forbidden: User "`)
		b.WriteString(e.User)
		b.WriteString(`" cannot `)
		b.WriteString(r.Verb)
		b.WriteString(` path "`)
		b.WriteString(r.Path)
		b.WriteString(`"`)
		return b.String()
	}
	b.WriteString(r.Resource)
	if r.Name != "" {
		b.WriteString(` "`)
		b.WriteString(r.Name)
		b.WriteString(`"`)
	}
	b.WriteString(` is forbidden: User "`)
	b.WriteString(e.User)
	b.WriteString(`" cannot `)
	b.WriteString(r.Verb)
	b.WriteString(` resource "`)
	b.WriteString(r.Resource)
	if r.Subresource != "" {
		b.WriteString("/")
		b.WriteString(r.Subresource)
	}
	b.WriteString(`"`)
	if r.Group != "" {
		b.WriteString(` in API group "`)
		b.WriteString(r.Group)
		b.WriteString(`"`)
	}
	if r.Namespace != "" {
		b.WriteString(` in namespace "`)
		b.WriteString(r.Namespace)
		b.WriteString(`"`)
	} else {
		b.WriteString(" at the cluster scope")
	}
	return b.String()
}

// Is makes errors.Is(err, ErrForbidden) true.
func (e *ForbiddenError) Is(target error) bool { return target == ErrForbidden }

// Authorize returns nil if id may do req, else a *ForbiddenError (which
// wraps ErrForbidden). pods may be nil when req is not about a pod's status.
func Authorize(id *Identity, req Request, pods PodLookup) error {
	if Can(id, req, pods) {
		return nil
	}
	user := "system:anonymous"
	if id != nil {
		user = id.Name
	}
	return &ForbiddenError{User: user, Request: req}
}

// Can reports whether id may do req. Admission asks it, for instance,
// whether a user may create pods/binding before honouring spec.nodeName.
func Can(id *Identity, req Request, pods PodLookup) bool {
	if id == nil {
		return false
	}
	switch id.Role {
	case api.RoleClusterAdmin, api.RoleServer:
		return true
	}
	if req.Resource == "" {
		return nonResourceAllowed(req)
	}
	if g, known := resourceGroup[req.Resource]; !known || (req.Group != "" && req.Group != g) {
		return false
	}
	switch id.Role {
	case api.RoleDeveloper:
		return developerCan(id, req)
	case api.RoleNode:
		if id.NodeName == "" {
			return req.Verb == VerbCreate && req.Resource == ResourceNodeCredentials && req.Subresource == ""
		}
		return nodeCan(id, req, pods)
	}
	return false
}

// resourceGroup is every resource the rules name, with its API group. A
// request naming a resource in the wrong group matches no rule.
var resourceGroup = map[string]string{
	"pods":                    "",
	"services":                "",
	"events":                  "",
	"nodes":                   "",
	"namespaces":              "",
	"replicasets":             "apps",
	"deployments":             "apps",
	"daemonsets":              "apps",
	"poddisruptionbudgets":    "policy",
	"machines":                "machine.openshift.io",
	"machinehealthchecks":     "machine.openshift.io",
	"machinesets":             "machine.openshift.io",
	"controlplanemachinesets": "machine.openshift.io",
	"machineconfigs":          "machineconfiguration.openshift.io",
	"machineconfigpools":      "machineconfiguration.openshift.io",
	"machineconfigurations":   "operator.openshift.io",
	"clusterversions":         "config.openshift.io",
	"clusteroperators":        "config.openshift.io",
	"endpointslices":          "discovery.k8s.io",
	"tokens":                  "outpost.io",
	"schedulerpolicies":       "outpost.io",
	ResourceNodeCredentials:   "outpost.io",
	ResourceServers:           "outpost.io",
	"binaries":                "outpost.io",
}

// publicPaths are readable by every authenticated caller; other
// non-resource paths (/metrics, debug handlers) are for admins and servers.
var publicPaths = []string{"/version", "/healthz", "/readyz"}

func nonResourceAllowed(req Request) bool {
	return req.Verb == VerbGet && slices.Contains(publicPaths, req.Path)
}

func isRead(verb string) bool {
	return verb == VerbGet || verb == VerbList || verb == VerbWatch
}

// readableSub reports whether a read may target sub: the object itself or
// its status.
func readableSub(sub string) bool {
	return sub == "" || sub == SubresourceStatus
}

// developerWorkloads are the namespaced resources a developer manages in
// its own namespaces.
var developerWorkloads = []string{"pods", "services", "endpointslices", "replicasets", "deployments", "daemonsets", "events", "poddisruptionbudgets"}

func developerCan(id *Identity, req Request) bool {
	switch {
	case slices.Contains(developerWorkloads, req.Resource):
		// A list or watch across all namespaces comes with an empty
		// namespace and is refused: it would show other tenants' objects.
		if req.Namespace == "" || !slices.Contains(id.Namespaces, req.Namespace) {
			return false
		}
		// A developer reads the logs of and execs into its own pods, as
		// the user who runs them; nodes may not (an agent has no business
		// in other nodes' containers).
		if req.Resource == "pods" {
			switch {
			case req.Verb == VerbGet && req.Subresource == SubresourceLog:
				return true
			case req.Verb == VerbCreate && (req.Subresource == SubresourceExec || req.Subresource == SubresourcePortForward || req.Subresource == SubresourceEviction):
				return true
			}
		}
		switch req.Verb {
		case VerbGet, VerbList, VerbWatch:
			return readableSub(req.Subresource)
		case VerbCreate, VerbUpdate, VerbPatch, VerbDelete:
			// Not status (controllers and agents own it) and not binding
			// (placement is the scheduler's or an admin's, ADM-1).
			return req.Subresource == ""
		}
		return false
	case req.Resource == "nodes":
		return isRead(req.Verb) && readableSub(req.Subresource)
	case req.Resource == "namespaces":
		return req.Verb == VerbGet && readableSub(req.Subresource) && req.Name != "" && slices.Contains(id.Namespaces, req.Name)
	}
	return false
}

func nodeCan(id *Identity, req Request, pods PodLookup) bool {
	switch req.Resource {
	case "pods":
		if isRead(req.Verb) {
			// All pods: the agent watches them all and keeps those with
			// its spec.nodeName.
			return readableSub(req.Subresource)
		}
		// Its own pods only: their status, the delete that finishes a
		// graceful one once the agent has stopped the containers, and
		// their eviction when the agent drains its node for a config
		// update (UPD-8; the pods' budgets still decide).
		own := (req.Verb == VerbUpdate || req.Verb == VerbPatch) && req.Subresource == SubresourceStatus ||
			req.Verb == VerbDelete && req.Subresource == "" ||
			req.Verb == VerbCreate && req.Subresource == SubresourceEviction
		if own && pods != nil && req.Name != "" {
			node, ok := pods.PodNodeName(req.Namespace, req.Name)
			return ok && node == id.NodeName
		}
		return false
	case "nodes":
		if isRead(req.Verb) {
			return readableSub(req.Subresource)
		}
		if req.Name != id.NodeName {
			return false
		}
		switch req.Verb {
		case VerbCreate:
			return req.Subresource == "" || req.Subresource == SubresourceHeartbeat
		case VerbUpdate, VerbPatch:
			return readableSub(req.Subresource)
		}
		return false
	case "services", "endpointslices", "namespaces":
		// The service proxy and DNS of every node read them all.
		return isRead(req.Verb) && readableSub(req.Subresource)
	case "machineconfigs":
		// The agent reads the rendered configs its node runs and is to
		// run (UPD-8), by name; not the configs they are rendered from,
		// nor a list of them.
		return req.Verb == VerbGet && req.Subresource == "" && strings.HasPrefix(req.Name, api.RenderedPrefix)
	case "machineconfigurations":
		// The node disruption policy decides whether an update drains
		// and reboots the host.
		return req.Verb == VerbGet && req.Subresource == "" && req.Name == api.MachineConfigurationName
	case ResourceServers:
		return req.Verb == VerbList
	case "binaries":
		// The agent downloads, by digest, the binary the cluster version
		// controller named for it (UPD-6).
		return req.Verb == VerbGet
	case "events":
		return (req.Verb == VerbCreate || req.Verb == VerbUpdate || req.Verb == VerbPatch) && req.Subresource == ""
	}
	return false
}
