package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/client"
)

// podTarget reads the POD argument of logs and exec. Besides a pod's name
// and pod/NAME it takes a workload as kubectl does (deployment/NAME,
// daemonset/NAME, replicaset/NAME): one of its pods is used, a running
// and ready one when there is one, and which is said on errOut, so that
// `outpost logs deployment/ticker` works without looking the name up.
func podTarget(ctx context.Context, cl *client.Client, arg string, errOut io.Writer) (string, error) {
	typ, name, ok := strings.Cut(arg, "/")
	if !ok {
		return arg, nil
	}
	r := api.ResourceForName(typ)
	if r == nil || name == "" {
		return "", usagef("%q: give a pod's name, pod/NAME, or a workload as deployment/NAME, daemonset/NAME or replicaset/NAME", arg)
	}
	switch r.Kind {
	case "Pod":
		return name, nil
	case "Deployment", "DaemonSet", "ReplicaSet":
	default:
		return "", usagef("%q: a %s has no pods to choose from; give deployment/NAME, daemonset/NAME or replicaset/NAME", arg, r.Kind)
	}
	obj, err := cl.Get(ctx, r, cl.Namespace(), name, client.GetOptions{})
	if err != nil {
		return "", err
	}
	var ls *api.LabelSelector
	switch o := obj.(type) {
	case *api.Deployment:
		ls = o.Spec.Selector
	case *api.DaemonSet:
		ls = o.Spec.Selector
	case *api.ReplicaSet:
		ls = o.Spec.Selector
	}
	sel, err := api.SelectorFromLabelSelector(ls)
	if err != nil || sel.Empty() {
		return "", fmt.Errorf("%s %s: its selector chooses no pods", r.Kind, name)
	}
	objs, _, err := cl.List(ctx, api.ResourceForKind("Pod"), cl.Namespace(), client.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return "", err
	}
	var pods []*api.Pod
	for _, o := range objs {
		if p := o.(*api.Pod); p.DeletionTimestamp == nil {
			pods = append(pods, p)
		}
	}
	if len(pods) == 0 {
		return "", fmt.Errorf("%s %s has no pods", strings.ToLower(r.Kind), name)
	}
	// Running and ready first, then running, then the rest; by name
	// within each, so that the choice does not change from run to run.
	rank := func(p *api.Pod) int {
		switch {
		case p.Status.Phase == api.PodRunning && api.PodIsReady(p):
			return 0
		case p.Status.Phase == api.PodRunning:
			return 1
		}
		return 2
	}
	slices.SortFunc(pods, func(a, b *api.Pod) int {
		if d := rank(a) - rank(b); d != 0 {
			return d
		}
		return strings.Compare(a.Name, b.Name)
	})
	if len(pods) > 1 {
		fmt.Fprintf(errOut, "Found %d pods, using pod/%s\n", len(pods), pods[0].Name)
	}
	return pods[0].Name, nil
}
