package api

import (
	"encoding/json"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
)

// Time, Quantity and IntOrString write themselves into the encoder
// (MarshalJSONTo); what they write must be byte for byte what their
// MarshalJSON gives through encoding/json, the bytes every stored object
// and snapshot already holds: the store encodes old objects again and
// compares hashes with what was written before.
func TestMarshalJSONToSameBytes(t *testing.T) {
	at := Time{time.Date(2026, 11, 27, 4, 55, 1, 0, time.FixedZone("x", 3600))}
	surge, unavailable := FromString("25%"), FromInt(0)
	objs := []any{
		&Pod{
			TypeMeta:   TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: ObjectMeta{Name: "p", Namespace: "n", CreationTimestamp: &at, DeletionTimestamp: &Time{}},
			Spec: PodSpec{Containers: []Container{{
				Name: "c", Image: "i",
				Resources: ResourceRequirements{
					Requests: ResourceList{"cpu": MustParseQuantity("250m"), "memory": MustParseQuantity("64Mi")},
					Limits:   ResourceList{"memory": MustParseQuantity("1.5Gi"), "ephemeral-storage": MustParseQuantity("0")},
				},
			}}},
			Status: PodStatus{Phase: PodRunning, StartTime: &at, Conditions: []PodCondition{
				{Type: PodReady, Status: ConditionTrue, LastTransitionTime: &at},
			}},
		},
		&Deployment{Spec: DeploymentSpec{Strategy: DeploymentStrategy{RollingUpdate: &RollingUpdateDeployment{MaxSurge: &surge, MaxUnavailable: &unavailable}}}},
		&Service{Spec: ServiceSpec{Ports: []ServicePort{{Port: 80, TargetPort: FromString("web<&>\u2028é")}, {Port: 81, TargetPort: FromInt(8081)}}}},
		at, Time{}, MustParseQuantity("1e3"), Quantity{}, FromInt(-7), FromString(""), FromString("<a>"),
	}
	for _, v := range objs {
		got, err := Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("encoded\n%s\nencoding/json gives\n%s", got, want)
		}
	}
}

// The encoder calls MarshalJSONTo only on types whose method has
// MarshalerTo's signature; without it, TestMarshalJSONToSameBytes would
// pass through MarshalJSON alone.
var _ = []jsonv2.MarshalerTo{Time{}, Quantity{}, IntOrString{}}
