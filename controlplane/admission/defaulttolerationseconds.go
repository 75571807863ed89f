package admission

import (
	"context"
	"slices"

	"github.com/outpost-edge/outpost/controlplane/api"
	"github.com/outpost-edge/outpost/controlplane/auth"
)

// DefaultTolerationSecondsConfig configures SPEC ADM-3. Unlike the other
// plugins it is on unless Disable is set, as in Kubernetes, which enables
// it by default.
type DefaultTolerationSecondsConfig struct {
	// Disable switches the plugin off (the seed's DefaultAdmissionConfig
	// `disable: true`).
	Disable bool
	// NotReadySeconds and UnreachableSeconds are the tolerationSeconds of
	// the tolerations added (`outpost server
	// --default-not-ready-toleration-seconds`,
	// `--default-unreachable-toleration-seconds`); nil is
	// DefaultTolerationSeconds.
	NotReadySeconds    *int64
	UnreachableSeconds *int64
}

// DefaultTolerationSeconds is how long a pod stays on a node that is not
// ready or unreachable when it says nothing itself: Kubernetes' 300 s.
const DefaultTolerationSeconds int64 = 300

// defaultTolerationSeconds gives every new pod that does not tolerate the
// not-ready and unreachable NoExecute taints a toleration of each, for a
// while: without it a pod would be evicted the moment its node's heartbeat
// is late.
type defaultTolerationSeconds struct {
	notReady, unreachable int64
}

func newDefaultTolerationSeconds(c DefaultTolerationSecondsConfig) *defaultTolerationSeconds {
	d := &defaultTolerationSeconds{notReady: DefaultTolerationSeconds, unreachable: DefaultTolerationSeconds}
	if c.NotReadySeconds != nil {
		d.notReady = *c.NotReadySeconds
	}
	if c.UnreachableSeconds != nil {
		d.unreachable = *c.UnreachableSeconds
	}
	return d
}

var _ KeepsValid = (*defaultTolerationSeconds)(nil)

// KeepsValid: the tolerations added are well formed, and a pod may hold
// any number of them.
func (*defaultTolerationSeconds) KeepsValid() {}

// Applies: pods being created. A workload's template is left as written;
// its pods get the tolerations when they are created.
func (*defaultTolerationSeconds) Applies(op string, _ *auth.Identity, r *api.Resource) bool {
	return op == OpCreate && r == podsResource
}

func (d *defaultTolerationSeconds) Admit(_ context.Context, op string, _ *auth.Identity, obj, _ api.Object) error {
	pod, ok := obj.(*api.Pod)
	if op != OpCreate || !ok {
		return nil
	}
	notReady, unreachable := false, false
	for _, t := range pod.Spec.Tolerations {
		// A toleration with no key (Exists) or no effect covers the taint
		// as well as one written for it; so does one by an older name.
		if t.Effect != "" && t.Effect != api.TaintEffectNoExecute {
			continue
		}
		switch api.CurrentTaintKey(t.Key) {
		case "":
			notReady, unreachable = true, true
		case api.TaintNodeNotReady:
			notReady = true
		case api.TaintNodeUnreachable:
			unreachable = true
		}
	}
	// Each pod gets its own seconds: the store keeps the pod, and a
	// shared pointer would tie every pod's toleration to one value. Both
	// live in one array, and the list grows once: admission runs on every
	// create.
	add := 0
	if !notReady {
		add++
	}
	if !unreachable {
		add++
	}
	if add == 0 {
		return nil
	}
	secs := new([2]int64)
	pod.Spec.Tolerations = slices.Grow(pod.Spec.Tolerations, add)
	if !notReady {
		secs[0] = d.notReady
		pod.Spec.Tolerations = append(pod.Spec.Tolerations, api.Toleration{
			Key: api.TaintNodeNotReady, Operator: api.TolerationOpExists, Effect: api.TaintEffectNoExecute, TolerationSeconds: &secs[0]})
	}
	if !unreachable {
		secs[1] = d.unreachable
		pod.Spec.Tolerations = append(pod.Spec.Tolerations, api.Toleration{
			Key: api.TaintNodeUnreachable, Operator: api.TolerationOpExists, Effect: api.TaintEffectNoExecute, TolerationSeconds: &secs[1]})
	}
	return nil
}
