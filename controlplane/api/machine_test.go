package api

import (
	"strings"
	"testing"
)

// Seed 002 §6.2.3's lifecycle hook example applies as it is (with a name
// where the seed writes "..."), and §6.2.5's quorum guard hook.
func TestMachineSeedSnippets(t *testing.T) {
	for _, doc := range []string{`apiVersion: machine.openshift.io/v1beta1
kind: Machine
metadata:
  name: edge-1
spec:
  lifecycleHooks:
    preDrain:
    - name: MigrateImportantApp
      owner: my-app-migration-controller
    preTerminate:
    - name: BackupFileSystem
      owner: my-backup-controller
    - name: CloudProviderSpecialCase
      owner: my-custom-storage-detach-controller
    - name: WaitForStorageDetach
      owner: my-custom-storage-detach-controller
`, `apiVersion: machine.openshift.io/v1beta1
kind: Machine
metadata:
  name: master-0
spec:
  lifecycleHooks:
    preDrain:
    - name: EtcdQuorumOperator
      owner: clusteroperator/etcd
`} {
		objs, warns, err := DecodeYAMLOrJSON([]byte(doc))
		if err != nil || len(objs) != 1 {
			t.Fatalf("decode: %v (%d objects)", err, len(objs))
		}
		if len(warns) > 0 && len(warns[0]) > 0 {
			t.Errorf("warnings %v", warns[0])
		}
		m, ok := objs[0].(*Machine)
		if !ok {
			t.Fatalf("decoded %T", objs[0])
		}
		if errs := Validate(m); len(errs) > 0 {
			t.Errorf("%s: %v", m.Name, errs)
		}
		if len(m.Spec.LifecycleHooks.PreDrain) != 1 {
			t.Errorf("%s: preDrain %v", m.Name, m.Spec.LifecycleHooks.PreDrain)
		}
	}
}

// Bad hooks are refused with every problem by field path (issue 11,
// "Bad input": hooks without owner, duplicate hook names).
func TestValidateMachine(t *testing.T) {
	m := &Machine{ObjectMeta: ObjectMeta{Name: "edge-1"}, Spec: MachineSpec{LifecycleHooks: LifecycleHooks{
		PreDrain:     []LifecycleHook{{Name: "a", Owner: "x"}, {Name: "a", Owner: "y"}, {Owner: "z"}},
		PreTerminate: []LifecycleHook{{Name: "b"}},
	}}, Status: MachineStatus{Phase: "Exploded", Conditions: []MachineCondition{{Type: "Drained", Status: "Maybe"}}}}
	var msgs []string
	for _, e := range Validate(m) {
		msgs = append(msgs, e.Error())
	}
	all := strings.Join(msgs, "; ")
	for _, want := range []string{
		`spec.lifecycleHooks.preDrain[1].name: Duplicate value: "a"`,
		"spec.lifecycleHooks.preDrain[2].name: Required value",
		"spec.lifecycleHooks.preTerminate[0].owner: Required value",
		`status.phase: Unsupported value: "Exploded"`,
		`status.conditions[0].status: Unsupported value: "Maybe"`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("errors %q lack %q", all, want)
		}
	}
}

// A health check with an empty selector (it would select every machine),
// a bad condition or a bad timeout is refused by field path.
func TestValidateMachineHealthCheck(t *testing.T) {
	bad := FromString("150%")
	h := &MachineHealthCheck{ObjectMeta: ObjectMeta{Name: "all"}, Spec: MachineHealthCheckSpec{
		UnhealthyConditions: []UnhealthyCondition{{Type: "", Status: "Sometimes", Timeout: "soon"}},
		MaxUnhealthy:        &bad, NodeStartupTimeout: "-5m"}}
	var msgs []string
	for _, e := range Validate(h) {
		msgs = append(msgs, e.Error())
	}
	all := strings.Join(msgs, "; ")
	for _, want := range []string{
		"spec.selector: Required value: an empty selector would select every machine",
		"spec.unhealthyConditions[0].type: Required value",
		`spec.unhealthyConditions[0].status: Unsupported value: "Sometimes"`,
		`spec.unhealthyConditions[0].timeout: Invalid value: "soon"`,
		`spec.maxUnhealthy: Invalid value: "150%"`,
		`spec.nodeStartupTimeout: Invalid value: "-5m"`,
	} {
		if !strings.Contains(all, want) {
			t.Errorf("errors %q lack %q", all, want)
		}
	}
	ok := &MachineHealthCheck{ObjectMeta: ObjectMeta{Name: "cp"}, Spec: MachineHealthCheckSpec{
		Selector:            LabelSelector{MatchLabels: map[string]string{"machine.openshift.io/cluster-api-machine-role": "master"}},
		UnhealthyConditions: []UnhealthyCondition{{Type: "Ready", Status: "Unknown", Timeout: "300s"}, {Type: "Ready", Status: "False", Timeout: "300s"}},
		NodeStartupTimeout:  "0"}}
	if errs := Validate(ok); len(errs) > 0 {
		t.Errorf("a good check refused: %v", errs)
	}
	if ok.Spec.StartupTimeout() != 0 || (&MachineHealthCheckSpec{}).StartupTimeout() != DefaultNodeStartupTimeout {
		t.Error("nodeStartupTimeout 0 or unset")
	}
}

// A machine set with an empty selector, negative replicas, an unknown
// delete policy or a template its selector does not match is refused.
func TestValidateMachineSet(t *testing.T) {
	neg := int32(-1)
	ms := &MachineSet{ObjectMeta: ObjectMeta{Name: "edge"}, Spec: MachineSetSpec{Replicas: &neg, DeletePolicy: "Youngest",
		Template: MachineTemplateSpec{ObjectMeta: ObjectMeta{Labels: map[string]string{"pool": "edge"}}}}}
	var msgs []string
	for _, e := range Validate(ms) {
		msgs = append(msgs, e.Error())
	}
	all := strings.Join(msgs, "; ")
	for _, want := range []string{"spec.selector: Required value", "spec.replicas: Invalid value: -1", `spec.deletePolicy: Unsupported value: "Youngest"`} {
		if !strings.Contains(all, want) {
			t.Errorf("errors %q lack %q", all, want)
		}
	}
	ms = &MachineSet{ObjectMeta: ObjectMeta{Name: "edge"}, Spec: MachineSetSpec{Selector: LabelSelector{MatchLabels: map[string]string{"pool": "edge"}},
		Template: MachineTemplateSpec{ObjectMeta: ObjectMeta{Labels: map[string]string{"pool": "core"}}}}}
	if errs := Validate(ms); len(errs) != 1 || !strings.Contains(errs[0].Error(), "spec.template.metadata.labels") {
		t.Errorf("a template the selector does not match: %v", errs)
	}
}

// The control plane machine set: named cluster, 3 or 5 replicas, known
// state and strategy, domains with a label key and no duplicates.
func TestValidateControlPlaneMachineSet(t *testing.T) {
	four := int32(4)
	c := &ControlPlaneMachineSet{ObjectMeta: ObjectMeta{Name: "cp"}, Spec: ControlPlaneMachineSetSpec{Replicas: &four, State: "On",
		Strategy: ControlPlaneStrategy{Type: "Recreate"}, FailureDomains: ControlPlaneFailureDomains{Names: []string{"a", "a", ""}}}}
	var msgs []string
	for _, e := range Validate(c) {
		msgs = append(msgs, e.Error())
	}
	all := strings.Join(msgs, "; ")
	for _, want := range []string{
		`metadata.name: Invalid value: "cp"`, `spec.replicas: Unsupported value: 4`, `spec.state: Unsupported value: "On"`,
		`spec.strategy.type: Unsupported value: "Recreate"`, "spec.failureDomains.labelKey: Required value",
		`spec.failureDomains.names[1]: Duplicate value: "a"`, "spec.failureDomains.names[2]: Required value",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("errors %q lack %q", all, want)
		}
	}
}
