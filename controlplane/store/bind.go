package store

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// podResource names pods in the errors of a bind.
var podResource = api.ResourceForPlural("pods")

// Binding assigns a pod to a node (see BindCmd). The scheduler binds
// thousands of pods a second, so a binding is its own small command
// rather than an update that would carry the whole pod.
type Binding struct {
	// NodeName is the node the pod goes to; required.
	NodeName string
	// UID, if not empty, must be the pod's uid: a pod deleted and created
	// again under the same name is not bound by a decision made for the
	// old one.
	UID string
	// ResourceVersion, if not empty, must be the pod's resourceVersion.
	ResourceVersion string
	// Now is the time of the binding: the lastTransitionTime of the
	// PodScheduled condition (left unset when zero).
	Now time.Time
	// Message is the PodScheduled condition's message; usually empty.
	Message string
}

// BindCmd builds the command that binds pod namespace/name to b.NodeName:
// in one step it sets spec.nodeName, sets the condition PodScheduled=True
// and clears status.nominatedNodeName. It fails with 404 if the pod does
// not exist and 409 if it is being deleted, is already bound, or a
// precondition does not hold. It may go inside a BatchCmd, where each
// binding succeeds or fails on its own.
//
// An older server that does not know the command stops rather than skip
// it: its pods would stay unbound while its peers' are bound.
func BindCmd(namespace, name string, b Binding) []byte {
	n := 1 + 7*binary.MaxVarintLen64 + len(namespace) + len(name) + len(b.NodeName) + len(b.UID) + len(b.ResourceVersion) + len(b.Message)
	c := make([]byte, 0, n)
	c = append(c, cmdBind)
	c = appendString(c, namespace)
	c = appendString(c, name)
	c = appendString(c, b.NodeName)
	c = appendString(c, b.UID)
	c = appendString(c, b.ResourceVersion)
	var nano int64
	if !b.Now.IsZero() {
		nano = b.Now.UnixNano()
	}
	c = binary.AppendVarint(c, nano)
	return appendString(c, b.Message)
}

func (tx *txn) bind(body []byte) *Result {
	rd := reader{b: body}
	ns := rd.string("namespace")
	name := rd.string("name")
	node := rd.string("node name")
	preUID := rd.string("preconditions.uid")
	preRV := rd.string("preconditions.resourceVersion")
	nano := rd.varint("time")
	msg := rd.string("message")
	if rd.err != nil {
		return malformed(rd.err)
	}
	t := tx.s.podTable
	switch {
	case name == "":
		return &Result{Err: api.NewBadRequest("Binding: metadata.name: Required value")}
	case ns == "":
		return &Result{Err: api.NewBadRequest(fmt.Sprintf("Binding %q: metadata.namespace: Required value", name))}
	case node == "":
		return &Result{Err: api.NewBadRequest(fmt.Sprintf("Binding %q: target.name: Required value", name))}
	}
	stored := t.get(ns, name)
	if stored == nil {
		return &Result{Err: api.NewNotFound(t.res, name)}
	}
	pod, ok := stored.obj.(*api.Pod)
	if !ok {
		return &Result{Err: api.NewInternalError(fmt.Errorf("pod %s/%s is stored as %T", ns, name, stored.obj))}
	}
	if err := CheckBind(pod, Binding{NodeName: node, UID: preUID, ResourceVersion: preRV}); err != nil {
		return &Result{Err: err}
	}

	next := *pod
	next.Spec.NodeName = node
	// A spec change bumps the generation, as an update of the spec would.
	next.Generation++
	next.ResourceVersion = tx.rv
	next.Status.NominatedNodeName = ""
	cond := api.PodCondition{Type: api.PodScheduled, Status: api.ConditionTrue, Message: msg}
	if nano != 0 {
		// Binds of one second share their time (intern.go).
		cond.LastTransitionTime = tx.s.intern.time(api.NewTime(time.Unix(0, nano)))
	}
	next.Status.Conditions = withCondition(pod.Status.Conditions, cond)
	// A pod bound soon after its create still keeps its JSON (entry).
	raw, ok := bindRaw(stored.kept(), &next)
	if !ok {
		var err error
		if raw, err = encode(&next); err != nil {
			return &Result{Err: api.NewInternalError(fmt.Errorf("encode pod %q: %w", name, err))}
		}
	}
	e := newEntry(t, &next, raw)
	tx.lock()
	tx.put(t, e, stored, false)
	return &Result{Object: &next, Raw: raw}
}

// CheckBind returns the error with which binding pod as b says fails, or
// nil: a precondition that does not hold, a pod being deleted or one bound
// already (all 409 Conflict, in Kubernetes' words). Apply decides with it;
// the server calls it first on its own state to refuse, without a raft
// entry, what Apply would refuse anyway.
func CheckBind(pod *api.Pod, b Binding) error {
	// The order is Kubernetes': the storage preconditions first, then what
	// the pod's state forbids.
	switch {
	case b.UID != "" && b.UID != pod.UID:
		return api.NewConflict(podResource, pod.Name, fmt.Sprintf(
			"Precondition failed: UID in precondition: %s, UID in object meta: %s", b.UID, pod.UID))
	case b.ResourceVersion != "" && b.ResourceVersion != pod.ResourceVersion:
		return api.NewConflict(podResource, pod.Name, fmt.Sprintf(
			"Precondition failed: ResourceVersion in precondition: %s, ResourceVersion in object meta: %s", b.ResourceVersion, pod.ResourceVersion))
	case pod.DeletionTimestamp != nil:
		return api.NewConflict(podResource, pod.Name, fmt.Sprintf("pod %s is being deleted; it cannot be bound to node %q", pod.Name, b.NodeName))
	case pod.Spec.NodeName != "":
		return api.NewConflict(podResource, pod.Name, fmt.Sprintf("pod %s is already assigned to node %q", pod.Name, pod.Spec.NodeName))
	}
	return nil
}

// withCondition returns a new slice holding conds with c in place of the
// condition of c's type, or appended. conds belongs to a stored object and
// is not changed.
func withCondition(conds []api.PodCondition, c api.PodCondition) []api.PodCondition {
	out := make([]api.PodCondition, len(conds), len(conds)+1)
	copy(out, conds)
	for i := range out {
		if out[i].Type == c.Type {
			out[i] = c
			return out
		}
	}
	return append(out, c)
}
