package core

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
	"github.com/outpost-edge/outpost/controlplane/controller"
	"github.com/outpost-edge/outpost/controlplane/store"
)

// ControlPlane is who the leader's own loops (schedulers, controllers)
// write as: a server, allowed everything, but still put through
// defaulting, validation and the admission chain like any user.
var ControlPlane = &auth.Identity{Name: "system:controlplane", Role: api.RoleServer}

// Client is the controller.Client of the loops that run on this server
// while it leads: reads from the local store (the leader's is current for
// everything it committed), writes through the same pipeline as API
// requests, as ControlPlane.
type Client struct{ c *Core }

var _ controller.Client = Client{}

func (cl Client) Get(r *api.Resource, namespace, name string) (api.Object, error) {
	obj, _, err := cl.c.Get(r, namespace, name)
	return obj, err
}

func (cl Client) List(r *api.Resource) ([]api.Object, uint64, error) {
	return cl.c.st.Objects(r)
}

func (cl Client) Watch(ctx context.Context, r *api.Resource, fromRV uint64) (<-chan api.WatchEvent, error) {
	return cl.c.Watch(ctx, r, "", store.ListOptions{}, fromRV, false)
}

func (cl Client) Create(ctx context.Context, obj api.Object) (api.Object, error) {
	res, err := cl.c.Create(ctx, ControlPlane, obj)
	if err != nil {
		return nil, err
	}
	return res.Object, nil
}

func (cl Client) Update(ctx context.Context, obj api.Object) (api.Object, error) {
	return cl.update(ctx, obj, false)
}

func (cl Client) Evict(ctx context.Context, namespace, name string, opts api.DeleteOptions) error {
	_, err := cl.c.Evict(ctx, ControlPlane, namespace, name, opts)
	return err
}

func (cl Client) UpdateStatus(ctx context.Context, obj api.Object) (api.Object, error) {
	return cl.update(ctx, obj, true)
}

func (cl Client) update(ctx context.Context, obj api.Object, status bool) (api.Object, error) {
	r := api.ResourceOf(obj)
	if r == nil {
		return nil, fmt.Errorf("update %T: %w", obj, api.ErrUnknownKind)
	}
	m := obj.GetObjectMeta()
	if r.Namespaced && m.Namespace == "" {
		return nil, api.NewBadRequest(fmt.Sprintf("%s %q: namespace is required", r.Plural, m.Name))
	}
	// A retry needs the object as the caller gave it; the pipeline changes it.
	var orig api.Object
	if m.ResourceVersion == "" {
		var err error
		if orig, err = controller.Copy(obj); err != nil {
			return nil, err
		}
	}
	again := func() (api.Object, error) {
		if orig == nil {
			return nil, errors.New("no retry without a resourceVersion")
		}
		return controller.Copy(orig)
	}
	res, err := cl.c.Update(ctx, ControlPlane, r, m.Namespace, m.Name, status, obj, again)
	if err != nil {
		return nil, err
	}
	return res.Object, nil
}

func (cl Client) Delete(ctx context.Context, r *api.Resource, namespace, name string, opts api.DeleteOptions) error {
	_, err := cl.c.Delete(ctx, ControlPlane, r, namespace, name, opts)
	return err
}

// Bind checks every binding as POST pods/NAME/binding does and applies
// those that pass in one raft entry; then it records each bound pod's
// Scheduled event.
func (cl Client) Bind(ctx context.Context, bindings []controller.Binding) []error {
	errs := make([]error, len(bindings))
	cmds := make([][]byte, 0, len(bindings))
	idx := make([]int, 0, len(bindings))
	now := time.Now()
	for i, b := range bindings {
		if b.NodeName == "" {
			errs[i] = api.NewInvalid("Binding", b.Name, api.ErrorList{api.Required(api.Root("target").Child("name"), "the node to bind to")})
			continue
		}
		cmd, err := cl.c.bindCmd(ctx, ControlPlane, b.Namespace, b.Name, store.Binding{NodeName: b.NodeName, UID: b.UID, Now: now})
		if err != nil {
			errs[i] = err
			continue
		}
		cmds = append(cmds, cmd)
		idx = append(idx, i)
	}
	if len(cmds) == 0 {
		return errs
	}
	results, err := cl.c.applyBatch(ctx, cmds)
	if err != nil {
		for _, i := range idx {
			errs[i] = err
		}
		return errs
	}
	var events []api.Object
	for k, r := range results {
		i := idx[k]
		res, err := cl.c.result(r)
		if err != nil {
			errs[i] = err
			continue
		}
		if pod, ok := res.Object.(*api.Pod); ok {
			events = append(events, scheduledEvent(pod, bindings[i].Scheduler, now))
		}
	}
	if len(events) > 0 {
		// One raft entry for the whole batch's events, after the binds
		// succeeded: an event never claims a binding that failed, and the
		// scheduler's group commit keeps the extra entries to one per
		// batch rather than one per pod.
		if err := cl.c.CreateBatch(ctx, ControlPlane, events); err != nil && ctx.Err() == nil {
			cl.c.log.Warn("recording Scheduled events failed", "pods", len(events), "err", err)
		}
	}
	return errs
}

// scheduledEvent is the Normal event of a bound pod, as kube-scheduler
// records it: reason Scheduled, "Successfully assigned NS/POD to NODE",
// from the scheduler that chose the node.
func scheduledEvent(pod *api.Pod, scheduler string, now time.Time) *api.Event {
	if scheduler == "" {
		scheduler = pod.Spec.SchedulerName
	}
	ts := api.NewTime(now)
	return &api.Event{
		ObjectMeta: api.ObjectMeta{Namespace: pod.Namespace, Name: fmt.Sprintf("%s.%x", truncateName(pod.Name, 236), uint64(now.UnixNano()))},
		InvolvedObject: api.ObjectReference{
			Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, ResourceVersion: pod.ResourceVersion,
		},
		Reason:         "Scheduled",
		Message:        fmt.Sprintf("Successfully assigned %s/%s to %s", pod.Namespace, pod.Name, pod.Spec.NodeName),
		Source:         api.EventSource{Component: scheduler},
		FirstTimestamp: ts,
		LastTimestamp:  ts,
		Count:          1,
		Type:           api.EventTypeNormal,
	}
}

// truncateName cuts a name to n bytes, without a trailing - or . that
// would make the name built on it invalid.
func truncateName(name string, n int) string {
	if len(name) <= n {
		return name
	}
	return strings.TrimRight(name[:n], "-.")
}
