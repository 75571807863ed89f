package api

import (
	"fmt"
	"slices"
)

// Machine (machine.openshift.io/v1beta1) stands for a host known to the
// cluster (SPEC MCH-1): the node it backs, the provider that releases it,
// and the hooks that hold its deletion (MCH-3). Machines are cluster
// objects here, one per host: there is no machine-api namespace to keep
// them in, and `outpost get machines` shows them all.
type Machine struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata"`
	Spec       MachineSpec   `json:"spec,omitzero"`
	Status     MachineStatus `json:"status,omitzero"`
}

// MachineSpec is what the machine is and what holds its deletion.
type MachineSpec struct {
	LifecycleHooks LifecycleHooks `json:"lifecycleHooks,omitzero"`
	// ProviderID names the host to its provider ("outpost://NODE" for a
	// host that joined as an agent).
	ProviderID string `json:"providerID,omitempty"`
}

// LifecycleHooks hold a machine's deletion at two points (MCH-3, MCH-4):
// before its node is drained, and before its provider releases the host.
// Each hook's owner removes it when its work is done.
type LifecycleHooks struct {
	PreDrain     []LifecycleHook `json:"preDrain,omitempty"`
	PreTerminate []LifecycleHook `json:"preTerminate,omitempty"`
}

// LifecycleHook is one hold: its name, unique at its point, and the
// program that owns it.
type LifecycleHook struct {
	Name  string `json:"name"`
	Owner string `json:"owner"`
}

// MachineStatus is where the machine is in its life.
type MachineStatus struct {
	NodeRef    *ObjectReference   `json:"nodeRef,omitempty"`
	Phase      string             `json:"phase,omitempty"`
	Conditions []MachineCondition `json:"conditions,omitempty"`
	// LastUpdated is when the status last changed.
	LastUpdated *Time `json:"lastUpdated,omitempty"`
}

// MachineCondition is one of the deletion phase's conditions (Drainable,
// Drained, Terminable) or the provider's, in OpenShift's shape.
type MachineCondition struct {
	Type               string `json:"type"`
	Status             string `json:"status"`
	Severity           string `json:"severity,omitempty"`
	LastTransitionTime *Time  `json:"lastTransitionTime,omitempty"`
	Reason             string `json:"reason,omitempty"`
	Message            string `json:"message,omitempty"`
}

// Machine phases, as OpenShift names them.
const (
	MachineProvisioning = "Provisioning"
	MachineProvisioned  = "Provisioned"
	MachineRunning      = "Running"
	MachineDeleting     = "Deleting"
	MachineFailed       = "Failed"
)

// Machine conditions of the deletion phase (MCH-4) and of the provider.
const (
	MachineDrainable        = "Drainable"
	MachineDrained          = "Drained"
	MachineTerminable       = "Terminable"
	MachineProviderReleased = "Released"
)

// MachineFinalizer holds a machine in the API through its deletion phase,
// with OpenShift's name.
const MachineFinalizer = "machine.machine.openshift.io"

// AnnotationDeleteMachine marks the members a MachineSet gives up first
// when it scales down, with OpenShift's name.
const AnnotationDeleteMachine = "machine.openshift.io/delete-machine"

var machinePhases = []string{MachineProvisioning, MachineProvisioned, MachineRunning, MachineDeleting, MachineFailed}

func validateMachine(m *Machine) ErrorList {
	var errs ErrorList
	hp := Root("spec").Child("lifecycleHooks")
	errs = append(errs, validateHooks(m.Spec.LifecycleHooks.PreDrain, hp.Child("preDrain"))...)
	errs = append(errs, validateHooks(m.Spec.LifecycleHooks.PreTerminate, hp.Child("preTerminate"))...)
	if p := m.Status.Phase; p != "" && !slices.Contains(machinePhases, p) {
		errs = append(errs, NotSupported(Root("status").Child("phase"), p, machinePhases))
	}
	for i, c := range m.Status.Conditions {
		cp := Root("status").Child("conditions").Index(i)
		if c.Type == "" {
			errs = append(errs, Required(cp.Child("type"), ""))
		}
		if c.Status != ConditionTrue && c.Status != ConditionFalse && c.Status != ConditionUnknown {
			errs = append(errs, NotSupported(cp.Child("status"), c.Status, []string{ConditionTrue, ConditionFalse, ConditionUnknown}))
		}
	}
	return errs
}

// validateHooks: every hook has a name and an owner, and names are unique
// at their point (the owner removes its hook by name).
func validateHooks(hooks []LifecycleHook, p *Path) ErrorList {
	var errs ErrorList
	seen := map[string]bool{}
	for i, h := range hooks {
		ip := p.Index(i)
		if h.Name == "" {
			errs = append(errs, Required(ip.Child("name"), "a hook needs a name its owner removes it by"))
		} else if seen[h.Name] {
			errs = append(errs, Duplicate(ip.Child("name"), h.Name))
		}
		seen[h.Name] = true
		if h.Owner == "" {
			errs = append(errs, Required(ip.Child("owner"), "a hook needs an owner: the program that acts on it and removes it"))
		}
		for _, s := range []struct {
			field, v string
		}{{"name", h.Name}, {"owner", h.Owner}} {
			if len(s.v) > 256 {
				errs = append(errs, Invalid(ip.Child(s.field), fmt.Sprintf("%.20s...", s.v), "must be no more than 256 characters"))
			}
		}
	}
	return errs
}
