package api

import (
	"fmt"
	"strings"
)

// Taint keys the control plane sets on nodes from their conditions (SPEC
// TNT-5, TNT-6), as Kubernetes names them.
const (
	TaintNodeNotReady           = "node.kubernetes.io/not-ready"
	TaintNodeUnreachable        = "node.kubernetes.io/unreachable"
	TaintNodeUnschedulable      = "node.kubernetes.io/unschedulable"
	TaintNodeMemoryPressure     = "node.kubernetes.io/memory-pressure"
	TaintNodeDiskPressure       = "node.kubernetes.io/disk-pressure"
	TaintNodePIDPressure        = "node.kubernetes.io/pid-pressure"
	TaintNodeNetworkUnavailable = "node.kubernetes.io/network-unavailable"
)

// legacyTaintKeys are the names seed 000 §14.9.4–14.9.6 (OpenShift 3.x,
// Kubernetes before 1.13) gives the condition taints, and today's names.
// A toleration written with an old name tolerates the taint of today's.
var legacyTaintKeys = map[string]string{
	"node.alpha.kubernetes.io/notReady":    TaintNodeNotReady,
	"node.alpha.kubernetes.io/unreachable": TaintNodeUnreachable,
}

// legacyTaintPrefix starts every key of legacyTaintKeys.
const legacyTaintPrefix = "node.alpha.kubernetes.io/"

// CurrentTaintKey returns today's name of a taint key: key itself unless
// it is one of the older names of the condition taints. The scheduler asks
// it for every toleration against every taint, so most keys are answered
// without the map.
func CurrentTaintKey(key string) string {
	if !strings.HasPrefix(key, legacyTaintPrefix) {
		return key
	}
	if cur, ok := legacyTaintKeys[key]; ok {
		return cur
	}
	return key
}

// DeprecationWarnings are the warnings a write of obj gets for older
// names it uses: tolerations of the condition taints by their alpha keys,
// which outpost honours under today's names.
func DeprecationWarnings(obj Object) Warnings {
	spec, path := PodSpecOf(obj)
	if spec == nil {
		return nil
	}
	var out Warnings
	for i, t := range spec.Tolerations {
		if cur := CurrentTaintKey(t.Key); cur != t.Key {
			out = append(out, fmt.Sprintf("%s.tolerations[%d].key: %s is an older name of %s; it tolerates %s taints (write the new key)",
				path, i, t.Key, cur, cur))
		}
	}
	return out
}

// ParseTaints reads taints written as kubelet's --register-with-taints
// takes them: KEY=VALUE:EFFECT or KEY:EFFECT, separated by commas. Every
// problem is listed, each naming the taint.
func ParseTaints(s string) ([]Taint, error) {
	var out []Taint
	var errs []string
	for i, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		keyValue, effect, found := strings.Cut(part, ":")
		if !found {
			errs = append(errs, fmt.Sprintf("%q: want KEY=VALUE:EFFECT or KEY:EFFECT (the effect is NoSchedule, PreferNoSchedule or NoExecute)", part))
			continue
		}
		t := Taint{Effect: effect}
		t.Key, t.Value, _ = strings.Cut(keyValue, "=")
		for _, fe := range ValidateTaint(t, Root("taints").Index(i)) {
			errs = append(errs, fmt.Sprintf("%q: %s", part, fe.Error()))
		}
		for _, o := range out {
			if o.Key == t.Key && o.Effect == t.Effect {
				errs = append(errs, fmt.Sprintf("%q: a taint with key %s and effect %s is given already (a node has at most one per key and effect)", part, t.Key, t.Effect))
			}
		}
		out = append(out, t)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return out, nil
}
