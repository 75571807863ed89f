package admission

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
)

// podNodeSelector is SPEC ADM-2: a namespace's node selector (its
// annotation, else the cluster default) is merged into every new pod's
// nodeSelector, so an administrator can keep a project's pods on its
// nodes whatever its developers write. A pod asking for another value of
// one of those labels is refused rather than silently overridden, and a
// per-namespace whitelist bounds what the merged selector may ask for.
// Pods a controller creates from a template are pod creates and pass
// through here too.
type podNodeSelector struct {
	clusterDefault []label
	whitelists     map[string]map[string]string
	namespace      func(string) (*api.Namespace, error)
}

func newPodNodeSelector(c *PodNodeSelectorConfig, namespace func(string) (*api.Namespace, error)) *podNodeSelector {
	a := &podNodeSelector{namespace: namespace, whitelists: make(map[string]map[string]string, len(c.Whitelists))}
	for _, k := range slices.Sorted(maps.Keys(c.ClusterDefaultNodeSelector)) {
		a.clusterDefault = append(a.clusterDefault, label{k, c.ClusterDefaultNodeSelector[k]})
	}
	for ns, wl := range c.Whitelists {
		if len(wl) > 0 {
			a.whitelists[ns] = maps.Clone(wl)
		}
	}
	return a
}

func (a *podNodeSelector) Applies(op string, _ *auth.Identity, r *api.Resource) bool {
	return r == podsResource && op == OpCreate
}

func (a *podNodeSelector) Admit(_ context.Context, op string, _ *auth.Identity, obj, _ api.Object) error {
	pod, ok := obj.(*api.Pod)
	if op != OpCreate || !ok {
		return nil
	}
	nsSel, source, err := a.namespaceSelector(pod)
	if err != nil {
		return err
	}
	sel := pod.Spec.NodeSelector
	var conflicts, wants []string
	missing := 0
	for _, l := range nsSel {
		v, ok := sel[l.key]
		switch {
		case !ok:
			missing++
		case v != l.value:
			conflicts = append(conflicts, l.key+"="+v)
			wants = append(wants, l.key+"="+l.value)
		}
	}
	if len(conflicts) > 0 {
		return forbidden(pod, fmt.Sprintf("pod node label selector conflicts with its namespace node label selector: spec.nodeSelector has [%s] where %s sets [%s]",
			strings.Join(conflicts, " "), source, strings.Join(wants, " ")))
	}
	if missing > 0 {
		// A new map: obj is a private copy, but its maps may be shared
		// with the decoded request.
		merged := make(map[string]string, len(sel)+missing)
		maps.Copy(merged, sel)
		for _, l := range nsSel {
			merged[l.key] = l.value
		}
		pod.Spec.NodeSelector = merged
		sel = merged
	}
	wl := a.whitelists[pod.Namespace]
	if len(wl) == 0 {
		return nil
	}
	var outside []string
	for k, v := range sel {
		if wv, ok := wl[k]; !ok || wv != v {
			outside = append(outside, k+"="+v)
		}
	}
	if len(outside) == 0 {
		return nil
	}
	slices.Sort(outside)
	return forbidden(pod, fmt.Sprintf("pod node label selector labels conflict with its namespace whitelist: [%s] not in the whitelist of namespace %q (%s)",
		strings.Join(outside, " "), pod.Namespace, api.FormatLabels(wl)))
}

// namespaceSelector returns the selector pods of pod's namespace get, and
// where it comes from for refusal messages. The annotation wins whenever
// it is present: an empty one is how an administrator exempts a namespace
// from the cluster default.
func (a *podNodeSelector) namespaceSelector(pod *api.Pod) ([]label, string, error) {
	if a.namespace != nil {
		ns, err := a.namespace(pod.Namespace)
		if err != nil {
			if se, ok := errors.AsType[*api.StatusError](err); ok {
				return nil, "", se
			}
			return nil, "", api.NewInternalError(fmt.Errorf("PodNodeSelector: reading namespace %q: %w", pod.Namespace, err))
		}
		if ns != nil {
			if s, ok := ns.Annotations[AnnotationNodeSelector]; ok {
				ls, err := parseNodeSelector(s)
				if err != nil {
					return nil, "", forbidden(pod, fmt.Sprintf("namespace %q has an invalid %s annotation %q: %v",
						pod.Namespace, AnnotationNodeSelector, s, err))
				}
				return ls, fmt.Sprintf("namespace %q (annotation %s)", pod.Namespace, AnnotationNodeSelector), nil
			}
		}
	}
	return a.clusterDefault, "the cluster default node selector (clusterDefaultNodeSelector)", nil
}

func forbidden(pod *api.Pod, why string) error {
	return api.NewForbidden(fmt.Sprintf("pods %q is forbidden: %s", pod.Name, why))
}
