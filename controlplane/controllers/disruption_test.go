package controllers

import (
	"fmt"
	"testing"

	"github.com/outpost-edge/outpost/controlplane/api"
)

// A budget's status follows its pods (issue 10 item 7, for get pdb).
func TestDisruptionBudgetStatus(t *testing.T) {
	e := newEnv(t)
	e.start(nil)
	one := api.FromInt(1)
	e.create(&api.PodDisruptionBudget{ObjectMeta: api.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: api.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &api.LabelSelector{MatchLabels: webLabels}}})
	var pods []*api.Pod
	for i := range 3 {
		p := e.create(&api.Pod{ObjectMeta: api.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("web-%d", i), Labels: webLabels},
			Spec: api.PodSpec{Containers: []api.Container{{Name: "c", Image: "i"}}}}).(*api.Pod)
		pods = append(pods, p)
	}
	e.markReady(pods[0])
	e.markReady(pods[1])
	want := api.PodDisruptionBudgetStatus{ExpectedPods: 3, CurrentHealthy: 2, DesiredHealthy: 1, DisruptionsAllowed: 1, ObservedGeneration: 1}
	e.waitFor("the budget's status", func() (bool, string) {
		b := e.get(api.ResourceForKind("PodDisruptionBudget"), "default", "web").(*api.PodDisruptionBudget)
		return b.Status == want, fmt.Sprintf("%+v", b.Status)
	})
}
