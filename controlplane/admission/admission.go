package admission

import (
	"context"
	"errors"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
)

// Admission operations, the op argument of Admit.
const (
	// OpCreate is a new object; old is nil.
	OpCreate = "CREATE"
	// OpUpdate replaces an object's spec and metadata (status is kept).
	OpUpdate = "UPDATE"
	// OpUpdateStatus replaces an object's status; obj carries the stored
	// spec and metadata.
	OpUpdateStatus = "UPDATE_STATUS"
	// OpBind assigns a pod to a node through pods/NAME/binding; obj is the
	// pod with spec.nodeName set. A bind writes only the node, so changes
	// to obj are not kept.
	OpBind = "BIND"
	// OpDelete removes an object; obj is nil and old is the stored object.
	OpDelete = "DELETE"
)

// Interface is one step of the admission chain. Admit runs on the leader
// after defaulting and validation, before the write goes to raft. It may
// change obj (a mutating step) and refuses the write by returning an
// error, preferably an *api.StatusError (a 403 or 422 naming the problem).
// obj and old are private copies: changing them touches nothing stored.
// Admit must not block for long, since it holds up the write.
type Interface interface {
	Admit(ctx context.Context, op string, id *auth.Identity, obj, old api.Object) error
}

// Scope is a step that acts only on some requests. The server asks it
// before reading and copying the stored object for a delete or a binding,
// which most requests then skip; a step without it is asked to Admit
// every write.
type Scope interface {
	Interface
	// Applies reports whether the step acts on op by id on resource r.
	Applies(op string, id *auth.Identity, r *api.Resource) bool
}

// KeepsValid is a mutating step whose changes never make a valid object
// invalid (it adds only well-formed fields). The chain does not validate
// an object again after such a step, which saves a whole validation on
// every write it touches.
type KeepsValid interface {
	Interface
	KeepsValid()
}

// Plugin names, as pluginConfig keys them.
const (
	PluginPodNodeConstraints       = "PodNodeConstraints"
	PluginPodNodeSelector          = "PodNodeSelector"
	PluginDefaultTolerationSeconds = "DefaultTolerationSeconds"
)

// AnnotationNodeSelector is the namespace annotation holding the node
// selector every pod of the namespace gets (SPEC ADM-2).
const AnnotationNodeSelector = "scheduler.alpha.kubernetes.io/node-selector"

var (
	// ErrInvalidConfig wraps every refusal of a config file; the message
	// lists each problem by field path.
	ErrInvalidConfig = errors.New("invalid admission configuration")
)

// Deps is what the plugins read from the server.
type Deps struct {
	// Namespace returns a namespace by name. PodNodeSelector reads its
	// node-selector annotation on every pod create, so it should be a
	// local (cache or store) read. (nil, nil) and a nil func both mean
	// "no annotation": the cluster default applies.
	Namespace func(name string) (*api.Namespace, error)
	// Can reports whether id may do req; nil means auth.Can with no pod
	// lookup, which is all a pods/binding question needs.
	Can func(id *auth.Identity, req auth.Request) bool
}

// New returns the configured plugins in the order they must run:
// PodNodeConstraints first, so that it judges the node selector the user
// wrote and not the labels PodNodeSelector merges in from the namespace,
// which the administrator chose. A plugin the config leaves out is not
// returned, except DefaultTolerationSeconds, which is on unless the config
// disables it: an empty Config gives that one alone.
func New(cfg Config, deps Deps) []Interface {
	can := deps.Can
	if can == nil {
		can = func(id *auth.Identity, req auth.Request) bool { return auth.Can(id, req, nil) }
	}
	var out []Interface
	if c := cfg.PodNodeConstraints; c != nil && len(c.NodeSelectorLabelBlacklist) > 0 {
		out = append(out, newPodNodeConstraints(c, can))
	}
	if c := cfg.PodNodeSelector; c != nil {
		out = append(out, newPodNodeSelector(c, deps.Namespace))
	}
	if !cfg.DefaultTolerationSeconds.Disable {
		out = append(out, newDefaultTolerationSeconds(cfg.DefaultTolerationSeconds))
	}
	return out
}

var (
	podsResource        = api.ResourceForKind("Pod")
	replicaSetsResource = api.ResourceForKind("ReplicaSet")
	deploymentsResource = api.ResourceForKind("Deployment")
	daemonSetsResource  = api.ResourceForKind("DaemonSet")
)

func userName(id *auth.Identity) string {
	if id == nil {
		return "system:anonymous"
	}
	return id.Name
}
