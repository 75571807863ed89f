package api

import (
	"fmt"
	"slices"
	"time"
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

// The labels and annotations by which the control plane and an agent
// agree on the host's server role (SPEC CPL-2, MCH-1).
const (
	// LabelControlPlaneEligible marks a host that may serve: an agent
	// started with --control-plane-eligible puts it on its Node, and the
	// Node's machine gets it too.
	LabelControlPlaneEligible = "outpost.io/control-plane-eligible"
	// AnnotationServerRequested is set on the eligible machine chosen to
	// serve, with the domain and the time.
	AnnotationServerRequested = "outpost.io/server-requested"
	// AnnotationRolesStopped is put on a Node by its agent once it
	// stopped outpost's roles because its machine is being deleted.
	AnnotationRolesStopped = "outpost.io/roles-stopped"
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

// MachineHealthCheck (machine.openshift.io/v1beta1) says when a machine
// is unhealthy and how many may be at once before nothing is done (SPEC
// CPL-4): a machine whose node has matched one of unhealthyConditions for
// its timeout, or that has had no node for nodeStartupTimeout, is
// deleted, unless more than maxUnhealthy of the selected machines are
// unhealthy: then none is.
type MachineHealthCheck struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata"`
	Spec       MachineHealthCheckSpec   `json:"spec,omitzero"`
	Status     MachineHealthCheckStatus `json:"status,omitzero"`
}

// MachineHealthCheckSpec is OpenShift's.
type MachineHealthCheckSpec struct {
	Selector            LabelSelector        `json:"selector"`
	UnhealthyConditions []UnhealthyCondition `json:"unhealthyConditions,omitempty"`
	// MaxUnhealthy is a count or a percentage of the selected machines
	// (rounded down); default 100%.
	MaxUnhealthy *IntOrString `json:"maxUnhealthy,omitempty"`
	// NodeStartupTimeout is how long a machine may go without a node, a
	// duration ("10m"); "0" never times out; default 10m.
	NodeStartupTimeout string `json:"nodeStartupTimeout,omitempty"`
}

// UnhealthyCondition is a node condition that makes a machine unhealthy
// once it has held for Timeout (a duration, "300s").
type UnhealthyCondition struct {
	Type    string `json:"type"`
	Status  string `json:"status"`
	Timeout string `json:"timeout"`
}

// MachineHealthCheckStatus says what the check saw last.
type MachineHealthCheckStatus struct {
	ExpectedMachines    *int32             `json:"expectedMachines,omitempty"`
	CurrentHealthy      *int32             `json:"currentHealthy,omitempty"`
	RemediationsAllowed int32              `json:"remediationsAllowed"`
	Conditions          []MachineCondition `json:"conditions,omitempty"`
}

// DefaultNodeStartupTimeout is OpenShift's.
const DefaultNodeStartupTimeout = 10 * time.Minute

// MachineHealthCheck condition: whether it may remediate now.
const RemediationAllowed = "RemediationAllowed"

// StartupTimeout is spec.nodeStartupTimeout as a duration (0: never).
func (s *MachineHealthCheckSpec) StartupTimeout() time.Duration {
	if s.NodeStartupTimeout == "" {
		return DefaultNodeStartupTimeout
	}
	d, err := time.ParseDuration(s.NodeStartupTimeout)
	if err != nil && s.NodeStartupTimeout == "0" {
		return 0
	}
	if err != nil {
		return DefaultNodeStartupTimeout // refused by validation
	}
	return d
}

func validateMachineHealthCheck(h *MachineHealthCheck) ErrorList {
	var errs ErrorList
	sp := Root("spec")
	if len(h.Spec.Selector.MatchLabels) == 0 && len(h.Spec.Selector.MatchExpressions) == 0 {
		errs = append(errs, Required(sp.Child("selector"), "an empty selector would select every machine"))
	}
	errs = append(errs, ValidateLabelSelector(&h.Spec.Selector, sp.Child("selector"))...)
	for i, c := range h.Spec.UnhealthyConditions {
		cp := sp.Child("unhealthyConditions").Index(i)
		if c.Type == "" {
			errs = append(errs, Required(cp.Child("type"), "a node condition type, such as Ready"))
		}
		if c.Status != ConditionTrue && c.Status != ConditionFalse && c.Status != ConditionUnknown {
			errs = append(errs, NotSupported(cp.Child("status"), c.Status, []string{ConditionTrue, ConditionFalse, ConditionUnknown}))
		}
		if d, err := time.ParseDuration(c.Timeout); err != nil || d < 0 {
			errs = append(errs, Invalid(cp.Child("timeout"), c.Timeout, "must be a duration of 0 or more, such as 300s"))
		}
	}
	if v := h.Spec.MaxUnhealthy; v != nil {
		n, e := validateIntOrPercent(v, sp.Child("maxUnhealthy"))
		switch {
		case len(e) > 0:
			errs = append(errs, e...)
		case n < 0:
			errs = append(errs, Invalid(sp.Child("maxUnhealthy"), v.String(), "must be greater than or equal to 0"))
		case v.IsString && n > 100:
			errs = append(errs, Invalid(sp.Child("maxUnhealthy"), v.String(), "must not be greater than 100%"))
		}
	}
	if t := h.Spec.NodeStartupTimeout; t != "" && t != "0" {
		if d, err := time.ParseDuration(t); err != nil || d < 0 {
			errs = append(errs, Invalid(sp.Child("nodeStartupTimeout"), t, "must be a duration of 0 or more, such as 10m"))
		}
	}
	return errs
}

// MachineSet (machine.openshift.io/v1beta1) keeps replicas machines
// (MCH-2). On bare metal no set can make a host: it claims free machines
// that match its selector (machines no set owns) and, scaling down,
// deletes members, those with the delete-machine annotation first, then
// by deletePolicy.
type MachineSet struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata"`
	Spec       MachineSetSpec   `json:"spec,omitzero"`
	Status     MachineSetStatus `json:"status,omitzero"`
}

// MachineSetSpec is OpenShift's, less what only a cloud can act on.
type MachineSetSpec struct {
	Replicas     *int32        `json:"replicas,omitempty"`
	DeletePolicy string        `json:"deletePolicy,omitempty"`
	Selector     LabelSelector `json:"selector"`
	// Template is accepted as OpenShift writes it; a set here claims
	// existing machines rather than making them, so only its labels
	// matter (they must match the selector).
	Template MachineTemplateSpec `json:"template,omitzero"`
}

// MachineTemplateSpec is a machine's labels and spec.
type MachineTemplateSpec struct {
	ObjectMeta ObjectMeta  `json:"metadata,omitzero"`
	Spec       MachineSpec `json:"spec,omitzero"`
}

// MachineSetStatus counts the set's machines.
type MachineSetStatus struct {
	Replicas           int32  `json:"replicas"`
	ReadyReplicas      int32  `json:"readyReplicas,omitempty"`
	AvailableReplicas  int32  `json:"availableReplicas,omitempty"`
	ObservedGeneration int64  `json:"observedGeneration,omitempty"`
	ErrorMessage       string `json:"errorMessage,omitempty"`
}

// MachineSet delete policies.
const (
	DeletePolicyRandom = "Random"
	DeletePolicyOldest = "Oldest"
	DeletePolicyNewest = "Newest"
)

var deletePolicies = []string{DeletePolicyRandom, DeletePolicyOldest, DeletePolicyNewest}

func validateMachineSet(ms *MachineSet) ErrorList {
	var errs ErrorList
	sp := Root("spec")
	if len(ms.Spec.Selector.MatchLabels) == 0 && len(ms.Spec.Selector.MatchExpressions) == 0 {
		errs = append(errs, Required(sp.Child("selector"), "an empty selector would claim every machine"))
	}
	errs = append(errs, ValidateLabelSelector(&ms.Spec.Selector, sp.Child("selector"))...)
	if r := ms.Spec.Replicas; r != nil && *r < 0 {
		errs = append(errs, Invalid(sp.Child("replicas"), *r, "must be greater than or equal to 0"))
	}
	if p := ms.Spec.DeletePolicy; p != "" && !slices.Contains(deletePolicies, p) {
		errs = append(errs, NotSupported(sp.Child("deletePolicy"), p, deletePolicies))
	}
	if l := ms.Spec.Template.ObjectMeta.Labels; len(l) > 0 {
		if sel, err := SelectorFromLabelSelector(&ms.Spec.Selector); err == nil && !sel.Matches(l) {
			errs = append(errs, Invalid(sp.Child("template", "metadata", "labels"), l, "`selector` does not match template `labels`"))
		}
	}
	tp := sp.Child("template", "spec", "lifecycleHooks")
	errs = append(errs, validateHooks(ms.Spec.Template.Spec.LifecycleHooks.PreDrain, tp.Child("preDrain"))...)
	errs = append(errs, validateHooks(ms.Spec.Template.Spec.LifecycleHooks.PreTerminate, tp.Child("preTerminate"))...)
	return errs
}

// ControlPlaneMachineSet keeps the control plane at replicas servers
// spread over failure domains (SPEC CPL-2, CPL-3), as OpenShift's of the
// same name (served here under machine.openshift.io/v1beta1 with the
// other machine kinds; OpenShift serves it as v1). One, named "cluster".
type ControlPlaneMachineSet struct {
	TypeMeta   `json:",inline"`
	ObjectMeta `json:"metadata"`
	Spec       ControlPlaneMachineSetSpec   `json:"spec,omitzero"`
	Status     ControlPlaneMachineSetStatus `json:"status,omitzero"`
}

// ControlPlaneMachineSetSpec: 3 or 5 replicas, Active or Inactive, the
// update strategy, and the failure domains as a node label key and the
// domain names (none: every member in one domain).
type ControlPlaneMachineSetSpec struct {
	Replicas       *int32                     `json:"replicas,omitempty"`
	State          string                     `json:"state,omitempty"`
	Strategy       ControlPlaneStrategy       `json:"strategy,omitzero"`
	FailureDomains ControlPlaneFailureDomains `json:"failureDomains,omitzero"`
}

// ControlPlaneStrategy is RollingUpdate (the set moves members to
// rebalance) or OnDelete (only deleted members are replaced).
type ControlPlaneStrategy struct {
	Type string `json:"type,omitempty"`
}

// ControlPlaneFailureDomains names the domains by a node label.
type ControlPlaneFailureDomains struct {
	LabelKey string   `json:"labelKey,omitempty"`
	Names    []string `json:"names,omitempty"`
}

// ControlPlaneMachineSetStatus counts the members.
type ControlPlaneMachineSetStatus struct {
	Replicas            int32              `json:"replicas"`
	ReadyReplicas       int32              `json:"readyReplicas"`
	UpdatedReplicas     int32              `json:"updatedReplicas"`
	UnavailableReplicas int32              `json:"unavailableReplicas"`
	ObservedGeneration  int64              `json:"observedGeneration,omitempty"`
	Conditions          []MachineCondition `json:"conditions,omitempty"`
}

// Control plane machine set values.
const (
	ControlPlaneActive         = "Active"
	ControlPlaneInactive       = "Inactive"
	StrategyRollingUpdate      = "RollingUpdate"
	StrategyOnDelete           = "OnDelete"
	ControlPlaneMachineSetName = "cluster"
)

func validateControlPlaneMachineSet(c *ControlPlaneMachineSet) ErrorList {
	var errs ErrorList
	sp := Root("spec")
	if c.Name != ControlPlaneMachineSetName {
		errs = append(errs, Invalid(Root("metadata").Child("name"), c.Name, `the control plane machine set is named "cluster"`))
	}
	if r := c.Spec.Replicas; r != nil && *r != 3 && *r != 5 {
		errs = append(errs, NotSupported(sp.Child("replicas"), *r, []string{"3", "5"}))
	}
	if s := c.Spec.State; s != "" && s != ControlPlaneActive && s != ControlPlaneInactive {
		errs = append(errs, NotSupported(sp.Child("state"), s, []string{ControlPlaneActive, ControlPlaneInactive}))
	}
	if s := c.Spec.Strategy.Type; s != "" && s != StrategyRollingUpdate && s != StrategyOnDelete {
		errs = append(errs, NotSupported(sp.Child("strategy", "type"), s, []string{StrategyRollingUpdate, StrategyOnDelete}))
	}
	fp := sp.Child("failureDomains")
	if len(c.Spec.FailureDomains.Names) > 0 && c.Spec.FailureDomains.LabelKey == "" {
		errs = append(errs, Required(fp.Child("labelKey"), "the node label whose values name the domains"))
	}
	if k := c.Spec.FailureDomains.LabelKey; k != "" {
		for _, msg := range IsQualifiedName(k) {
			errs = append(errs, Invalid(fp.Child("labelKey"), k, msg))
		}
	}
	seen := map[string]bool{}
	for i, n := range c.Spec.FailureDomains.Names {
		if n == "" {
			errs = append(errs, Required(fp.Child("names").Index(i), ""))
		} else if seen[n] {
			errs = append(errs, Duplicate(fp.Child("names").Index(i), n))
		}
		seen[n] = true
	}
	return errs
}
